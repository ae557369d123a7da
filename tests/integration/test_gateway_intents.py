"""Tool intents end to end (docs/protocol.md sections 7 and 9) over real sockets, local model.

END_VOICE_SESSION (end_voice_session), SUPPRESS_AUDIO / SUPPRESS_TRANSCRIPT with duration_ms
(ignore_user) and without (the fixture tool tests/fixtures/intent_tools/suppress_reply),
SET_PENDING_MESSAGE (remember_for_next_turn). The local model answers a tool batch with
``Tool results: NAME=<envelope JSON>`` and speaks each word as 100 ms of PCM16.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from harness import (
    Client,
    Gateway,
    GatewayFactory,
    first,
    pcm_silence,
    pcm_tone,
    timeline_index,
    types,
)

from gateway.registry import Registry, load_registry
from registry_build import build_registry
from registry_build.build import serialize_artifact

REPO = Path(__file__).resolve().parents[2]
INTENT_TOOLS = REPO / "tests" / "fixtures" / "intent_tools"
WORD_MS = 100
RATE = 24000  # default output rate
TRANSCRIPTS = ("transcript.delta", "transcript.done")


@pytest.fixture(scope="session")
def intent_registry(tmp_path_factory: pytest.TempPathFactory) -> Registry:
    """The project's tools plus suppress_reply (SUPPRESS_* without duration_ms)."""
    result = build_registry([REPO / "tools", INTENT_TOOLS])
    assert result.artifact is not None, [str(e) for e in result.errors]
    out = tmp_path_factory.mktemp("registry") / "intent_registry.json"
    out.write_bytes(serialize_artifact(result.artifact))
    return load_registry(out)


def _tool(name: str, arguments: dict[str, Any] | None = None) -> str:
    return f"/tool {name} {json.dumps(arguments or {})}"


def _envelope(reply_text: str, name: str) -> dict[str, Any]:
    """The envelope the model received, from its ``Tool results: NAME=<json>`` echo."""
    prefix = f"Tool results: {name}="
    assert reply_text.startswith(prefix), reply_text
    envelope: dict[str, Any] = json.loads(reply_text[len(prefix) :])
    return envelope


def _response_audio(client: Client, response_id: str) -> list[bytes]:
    timeline = client.timeline
    start = timeline_index(timeline, "response.started", response_id=response_id)
    done = timeline_index(timeline, "response.done", response_id=response_id)
    return [item for kind, item in timeline[start + 1 : done] if kind == "audio"]


def _response_events(events: list[dict[str, Any]], response_id: str) -> list[dict[str, Any]]:
    return [e for e in events if e.get("response_id") == response_id]


def _spoken_ms(frames: list[bytes], rate: int = RATE) -> float:
    return sum(len(f) for f in frames) / 2 / rate * 1000


def _tool_turn(events: list[dict[str, Any]], name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The tool.finished of ``name`` and the response.done of the reply to its result."""
    finished = first(events, "tool.finished", name=name)
    assert events[-1]["type"] == "response.done"
    return finished, events[-1]


def _transport(gateway: Gateway, client: Client) -> Any:
    # The LocalTransport records what the model was given (history, context_notes).
    return gateway.manager.sessions[client.started["session_id"]].transport


async def _utterance(client: Client, speech_ms: int) -> None:
    for pcm in (pcm_tone(speech_ms), pcm_silence(400)):
        for i in range(0, len(pcm), 3200):
            await client.send_raw(pcm[i : i + 3200])


# -- END_VOICE_SESSION ---------------------------------------------------------------------------


async def test_end_voice_session_ends_after_the_reply_is_delivered(gateway: Gateway) -> None:
    async with gateway.session("voice") as client:
        await client.send("text.send", text=_tool("end_voice_session", {"reason": "goodbye"}))
        code = await client.wait_closed()
        events = client.events
        assert code == 1000

        finished = first(events, "tool.finished", name="end_voice_session")
        assert finished["ok"] is True
        assert finished["data"] == {"ending": True}
        assert finished["intents"] == ["END_VOICE_SESSION"]

        # The tool response, then the complete spoken reply to the result, then the end.
        ended = events[-1]
        assert (ended["type"], ended["reason"]) == ("session.ended", "intent")
        assert types(events).count("session.ended") == 1
        dones = [e for e in events if e["type"] == "response.done"]
        assert [d["status"] for d in dones] == ["completed", "completed"]
        reply = dones[-1]
        assert events[-2] == reply
        envelope = _envelope(reply["text"], "end_voice_session")
        assert envelope["ok"] is True
        assert [i["type"] for i in envelope["intents"]] == ["END_VOICE_SESSION"]
        transcript = first(events, "transcript.done", role="assistant")
        assert transcript["text"] == reply["text"]

        # Every word of the reply was delivered before session.ended, nothing after it.
        frames = _response_audio(client, reply["response_id"])
        assert _spoken_ms(frames) == pytest.approx(len(reply["text"].split()) * WORD_MS, abs=20)
        assert client.timeline[-1] == ("event", ended)
        assert sum(len(f) for f in client.audio) == sum(len(f) for f in frames)
        assert gateway.decisions("end_voice_session") == [("end_voice_session", "executed")]


async def test_end_voice_session_is_refused_in_text_mode(gateway: Gateway) -> None:
    # tools/end_voice_session/schema.json: "modes": ["voice"] → MODE_RESTRICTED elsewhere.
    async with gateway.session("text") as client:
        events = await client.say(_tool("end_voice_session", {"reason": "goodbye"}))
        finished, reply = _tool_turn(events, "end_voice_session")
        assert finished["ok"] is False
        assert finished["error"]["type"] == "MODE_RESTRICTED"
        assert finished["intents"] == []
        envelope = _envelope(reply["text"], "end_voice_session")
        assert envelope["ok"] is False
        assert envelope["error"]["type"] == "MODE_RESTRICTED"
        assert gateway.decisions("end_voice_session") == [("end_voice_session", "blocked")]

        events = await client.say("still here?")
        assert events[-1]["text"] == "You said: still here?"
        assert "session.ended" not in types(client.events)


# -- SUPPRESS_AUDIO / SUPPRESS_TRANSCRIPT ----------------------------------------------------------


async def test_suppress_with_duration_hides_audio_and_transcripts_for_that_time(
    gateway: Gateway,
) -> None:
    async with gateway.session("voice") as client:
        # 1000 ms is the smallest duration ignore_user accepts (schema minimum).
        events = await client.say(_tool("ignore_user", {"duration_ms": 1000}))
        finished, reply = _tool_turn(events, "ignore_user")
        assert finished["ok"] is True
        assert finished["data"] == {"suppressed_ms": 1000}
        assert finished["intents"] == ["SUPPRESS_AUDIO", "SUPPRESS_TRANSCRIPT"]
        # The reply to the result: no transcript events, no audio, no text in response.done.
        assert reply["status"] == "completed"
        assert reply["text"] == ""
        assert not [e for e in events if e["type"] in TRANSCRIPTS]
        assert client.audio == []

        # A spoken user turn inside the window: speech.started is still sent (stop playback),
        # but neither the user's nor the assistant's transcript, nor the assistant's audio.
        await _utterance(client, 300)
        events = await client.until("response.done")
        assert "speech.started" in types(events)
        assert not [e for e in events if e["type"] in TRANSCRIPTS]
        assert (events[-1]["status"], events[-1]["text"]) == ("completed", "")
        assert client.audio == []

        # A reply that starts speaking 1.2 s from now, after the window: heard and shown again.
        events = await client.say("/slow 1200 welcome back")
        done = events[-1]
        assert (done["status"], done["text"]) == ("completed", "welcome back")
        deltas = [e["delta"] for e in events if e["type"] == "transcript.delta"]
        assert "".join(deltas) == "welcome back"
        assert first(events, "transcript.done", role="assistant")["text"] == "welcome back"
        frames = _response_audio(client, done["response_id"])
        assert _spoken_ms(frames) == pytest.approx(2 * WORD_MS, abs=20)
        assert client.audio == frames


async def test_suppress_without_duration_covers_the_reply_not_the_next_one(
    gateway_factory: GatewayFactory, intent_registry: Registry
) -> None:
    gateway = await gateway_factory(registry=intent_registry)
    async with gateway.session("voice") as client:
        events = await client.say(_tool("suppress_reply"))
        finished, reply = _tool_turn(events, "suppress_reply")
        assert finished["ok"] is True
        assert finished["data"] == {"suppressed": True}
        assert finished["intents"] == ["SUPPRESS_AUDIO", "SUPPRESS_TRANSCRIPT"]
        tool_response = first(events, "response.started")["response_id"]
        assert tool_response != reply["response_id"]
        # The current (tool-call) response and the reply that follows the result: covered.
        assert [e["type"] for e in _response_events(events, reply["response_id"])] == [
            "response.started",
            "response.done",
        ]
        assert (reply["status"], reply["text"]) == ("completed", "")
        assert client.audio == []

        # The response after that one is not covered.
        events = await client.say("hello")
        done = events[-1]
        assert (done["status"], done["text"]) == ("completed", "You said: hello")
        deltas = [e["delta"] for e in events if e["type"] == "transcript.delta"]
        assert "".join(deltas) == "You said: hello"
        assert first(events, "transcript.done", role="assistant")["text"] == "You said: hello"
        frames = _response_audio(client, done["response_id"])
        assert _spoken_ms(frames) == pytest.approx(3 * WORD_MS, abs=20)
        assert client.audio == frames


# -- SET_PENDING_MESSAGE -------------------------------------------------------------------------


async def test_pending_message_is_given_at_the_start_of_the_next_user_turn(
    gateway: Gateway,
) -> None:
    note = "Ask whether the new dose caused dizziness."
    async with gateway.session("text") as client:
        events = await client.say(_tool("remember_for_next_turn", {"message": note}))
        finished, reply = _tool_turn(events, "remember_for_next_turn")
        assert finished["ok"] is True
        assert finished["data"] == {"queued": True}
        assert finished["intents"] == ["SET_PENDING_MESSAGE"]
        assert _envelope(reply["text"], "remember_for_next_turn")["ok"] is True

        transport = _transport(gateway, client)
        # Not given to the model yet: the reply to the tool result is not a user turn, nor is
        # anything that is not a user message.
        assert transport.context_notes == []
        await client.send("ping", id="p")
        await client.last("pong")
        assert transport.context_notes == []

        events = await client.say("hello")
        assert events[-1]["text"] == "You said: hello"
        assert transport.context_notes == [note]
        # Given as input at the start of that turn: right before the user's message.
        position = transport.history.index(("user", note))
        assert transport.history[position + 1] == ("user", "hello")

        await client.say("and again")
        assert transport.context_notes == [note]  # once only
        assert transport.history.count(("user", note)) == 1


async def test_pending_message_in_voice_waits_for_the_user_to_speak(gateway: Gateway) -> None:
    note = "Remind the user to drink water."
    async with gateway.session("voice") as client:
        events = await client.say(_tool("remember_for_next_turn", {"message": note}))
        assert first(events, "tool.finished")["intents"] == ["SET_PENDING_MESSAGE"]
        transport = _transport(gateway, client)

        # Silence is not a turn: still nothing for the model.
        await client.send_raw(pcm_silence(200))
        await client.send("ping", id="p")
        await client.last("pong")
        assert transport.context_notes == []

        # The user starts talking: the turn starts, the note is given now.
        await client.send_raw(pcm_tone(300))
        await client.last("speech.started")
        assert transport.context_notes == [note]
        await client.send_raw(pcm_silence(400))
        events = await client.until("response.done")
        assert first(events, "transcript.done", role="user")["text"] == "audio:300ms"
        assert events[-1]["text"] == "You said: audio:300ms"
        position = transport.history.index(("user", note))
        assert transport.history[position + 1 : position + 3] == [
            ("user", "audio:300ms"),
            ("assistant", "You said: audio:300ms"),
        ]
        assert transport.context_notes == [note]


async def test_pending_message_precedes_an_utterance_sent_in_one_frame(gateway: Gateway) -> None:
    note = "Remind the user to drink water."
    async with gateway.session("voice") as client:
        await client.say(_tool("remember_for_next_turn", {"message": note}))
        transport = _transport(gateway, client)
        # A whole utterance (speech, then the silence that ends it) in one binary frame, as a
        # client does that uploads recorded audio or flushes a buffer after a network stall.
        await client.send_raw(pcm_tone(300) + pcm_silence(400))
        events = await client.until("response.done")
        assert events[-1]["text"] == "You said: audio:300ms"
        assert transport.context_notes == [note]
        # The model must have the note before it answers the turn the note was kept for.
        position = transport.history.index(("user", note))
        assert transport.history[position + 1 : position + 3] == [
            ("user", "audio:300ms"),
            ("assistant", "You said: audio:300ms"),
        ]


# -- tool.finished.intents -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "arguments", "intents"),
    [
        ("get_current_time", {"timezone": "Europe/Paris"}, []),
        ("ignore_user", {"duration_ms": 1000}, ["SUPPRESS_AUDIO", "SUPPRESS_TRANSCRIPT"]),
        ("remember_for_next_turn", {"message": "Ask again."}, ["SET_PENDING_MESSAGE"]),
        ("suppress_reply", {}, ["SUPPRESS_AUDIO", "SUPPRESS_TRANSCRIPT"]),
        ("end_voice_session", {}, ["END_VOICE_SESSION"]),
    ],
)
async def test_tool_finished_lists_intent_type_names(
    gateway_factory: GatewayFactory,
    intent_registry: Registry,
    tool: str,
    arguments: dict[str, Any],
    intents: list[str],
) -> None:
    gateway = await gateway_factory(registry=intent_registry)
    async with gateway.session("voice") as client:
        await client.send("text.send", text=_tool(tool, arguments))
        finished = await client.last("tool.finished")
        assert finished["name"] == tool
        assert finished["ok"] is True
        assert finished["intents"] == intents
        # The audit record carries the same names.
        [record] = [r for r in gateway.audit.records if r.tool == tool]
        assert list(record.intents) == intents
