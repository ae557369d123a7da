"""Voice sessions over real sockets against the local model: audio in, audio out, barge-in.

The local model (``transports/local``) hears speech with an energy VAD (10 ms frames, 60 ms of
speech start an utterance, 300 ms of silence end it), transcribes an utterance of N ms as
``audio:<N>ms`` and speaks every word as exactly 100 ms of PCM16 at the session's output rate.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest
from harness import (
    Client,
    Gateway,
    GatewayFactory,
    b64,
    first,
    pcm_silence,
    pcm_tone,
    timeline_index,
    types,
)

WORD_MS = 100  # the local model's speech: one word = 80 ms tone + 20 ms gap
TRANSCRIPTS = ("transcript.delta", "transcript.done")


def _chunks(pcm: bytes, rate: int, ms: int = 100) -> list[bytes]:
    size = rate * ms // 1000 * 2
    return [pcm[i : i + size] for i in range(0, len(pcm), size)]


async def _send_binary(client: Client, pcm: bytes, rate: int) -> None:
    for chunk in _chunks(pcm, rate):
        await client.send_raw(chunk)


async def _send_append(client: Client, pcm: bytes, rate: int) -> None:
    for n, chunk in enumerate(_chunks(pcm, rate)):
        await client.send("audio.append", audio=b64(chunk), event_id=f"a{n}")


def _response_span(timeline: list[tuple[str, Any]], response_id: str) -> tuple[int, int]:
    return (
        timeline_index(timeline, "response.started", response_id=response_id),
        timeline_index(timeline, "response.done", response_id=response_id),
    )


def _audio_between(timeline: list[tuple[str, Any]], start: int, end: int) -> list[bytes]:
    return [item for kind, item in timeline[start + 1 : end] if kind == "audio"]


def _check_response_order(client: Client, response_id: str) -> list[bytes]:
    """docs/protocol.md 6: response.started precedes the response's audio and deltas; response.done
    follows them. Returns the audio frames of the response (those inside its span)."""
    timeline = client.timeline
    start, done = _response_span(timeline, response_id)
    for i, (kind, item) in enumerate(timeline):
        if kind == "event" and item.get("response_id") == response_id and i not in (start, done):
            assert start < i < done, (item, start, done)
    # Between this response's done and the next response.started no audio may arrive: it would
    # be audio of this response after its response.done.
    after = [
        i
        for i, (kind, item) in enumerate(timeline)
        if i > done and kind == "event" and item["type"] == "response.started"
    ]
    end = after[0] if after else len(timeline)
    assert _audio_between(timeline, done, end) == [], "audio after response.done"
    return _audio_between(timeline, start, done)


def _assert_speech(frames: list[bytes], rate: int, words: int) -> None:
    assert frames, "no assistant audio"
    assert all(len(f) % 2 == 0 and f for f in frames)
    duration_ms = sum(len(f) for f in frames) / 2 / rate * 1000
    # The local model speaks 100 ms per word; allow one 20 ms chunk of slack.
    assert abs(duration_ms - words * WORD_MS) <= 20, (duration_ms, words)


def _voice(
    gateway: Gateway, input_rate: int = 16000, output_rate: int = 24000
) -> AbstractAsyncContextManager[Client]:
    return gateway.session("voice", audio={"input_rate": input_rate, "output_rate": output_rate})


@pytest.mark.parametrize(("input_rate", "output_rate"), [(16000, 24000), (8000, 48000)])
async def test_voice_turn_binary_audio_both_ways(
    gateway: Gateway, input_rate: int, output_rate: int
) -> None:
    async with _voice(gateway, input_rate, output_rate) as client:
        assert client.started["mode"] == "voice"
        # The local model takes any rate: the client's own, so nothing is resampled.
        assert client.started["audio"] == {
            "input_rate": input_rate,
            "output_rate": output_rate,
            "upstream_input_rate": input_rate,
        }

        await _send_binary(client, pcm_tone(400, input_rate), input_rate)
        await _send_binary(client, pcm_silence(400, input_rate), input_rate)
        events = await client.until("response.done")

        speech = events.index(first(events, "speech.started"))
        user_done = first(events, "transcript.done", role="user")
        assert user_done["text"] == "audio:400ms"
        assert user_done.get("response_id") is None  # assistant only
        user_deltas = [
            e["delta"] for e in events if e["type"] == "transcript.delta" and e["role"] == "user"
        ]
        assert not user_deltas or "".join(user_deltas) == user_done["text"]
        started = first(events, "response.started")
        assert speech < events.index(user_done) < events.index(started)

        rid = started["response_id"]
        said = "You said: audio:400ms"
        deltas = [e for e in events if e["type"] == "transcript.delta" and e["role"] == "assistant"]
        assert all(d["response_id"] == rid for d in deltas)
        assert "".join(d["delta"] for d in deltas) == said
        assistant_done = first(events, "transcript.done", role="assistant")
        assert (assistant_done["response_id"], assistant_done["text"]) == (rid, said)
        done = events[-1]
        assert (done["response_id"], done["status"], done["text"]) == (rid, "completed", said)
        assert "text.delta" not in types(events)

        frames = _check_response_order(client, rid)
        _assert_speech(frames, output_rate, len(said.split()))
        assert frames == client.audio  # all the audio so far belongs to this response


async def test_audio_append_base64_works_like_binary(gateway: Gateway) -> None:
    async with _voice(gateway) as client:
        await _send_append(client, pcm_tone(300), 16000)
        await _send_append(client, pcm_silence(400), 16000)
        events = await client.until("response.done")
        assert "error" not in types(events)
        assert "speech.started" in types(events)
        assert first(events, "transcript.done", role="user")["text"] == "audio:300ms"
        done = events[-1]
        assert (done["status"], done["text"]) == ("completed", "You said: audio:300ms")
        _assert_speech(_check_response_order(client, done["response_id"]), 24000, 3)


async def test_audio_commit_is_push_to_talk(gateway: Gateway) -> None:
    async with _voice(gateway) as client:
        # Quiet audio: the VAD hears no speech and never ends an utterance by itself; the
        # commit does (push-to-talk), over the whole buffered audio.
        await _send_binary(client, pcm_silence(300), 16000)
        await client.send("audio.commit")
        events = await client.until("response.done")
        assert "speech.started" not in types(events)
        assert first(events, "transcript.done", role="user")["text"] == "audio:300ms"
        assert events[-1]["text"] == "You said: audio:300ms"

        # Speech without the trailing silence: the commit ends the utterance at once.
        await _send_binary(client, pcm_tone(200), 16000)
        await client.send("audio.commit", event_id="ptt")
        events = await client.until("response.done")
        assert "error" not in types(events)
        assert types(events).index("speech.started") < types(events).index("transcript.done")
        assert first(events, "transcript.done", role="user")["text"] == "audio:200ms"
        done = events[-1]
        assert (done["status"], done["text"]) == ("completed", "You said: audio:200ms")
        _assert_speech(_check_response_order(client, done["response_id"]), 24000, 3)


async def test_audio_clear_drops_buffered_audio(gateway: Gateway) -> None:
    async with _voice(gateway) as client:
        await _send_binary(client, pcm_tone(200), 16000)
        assert (await client.next())["type"] == "speech.started"
        await client.send("audio.clear")
        # Without the clear, 300 ms of this silence would end a 200 ms utterance. After it, the
        # silence is only buffered audio, and the commit ends an utterance of just that audio.
        await _send_binary(client, pcm_silence(500), 16000)
        await client.send("audio.commit")
        events = await client.until("response.done")
        user = [e["text"] for e in events if e["type"] == "transcript.done" and e["role"] == "user"]
        assert user == ["audio:500ms"]
        assert events[-1]["text"] == "You said: audio:500ms"
        assert "error" not in types(events)


async def test_text_send_in_voice_mode_is_answered_with_speech(gateway: Gateway) -> None:
    async with _voice(gateway, 16000, 48000) as client:
        events = await client.say("hello there")
        assert "text.delta" not in types(events)
        done = events[-1]
        assert (done["status"], done["text"]) == ("completed", "You said: hello there")
        transcript = first(events, "transcript.done", role="assistant")
        assert transcript["text"] == "You said: hello there"
        _assert_speech(_check_response_order(client, done["response_id"]), 48000, 4)


async def test_invalid_audio_is_reported_and_the_session_continues(gateway: Gateway) -> None:
    async with _voice(gateway) as client:
        await client.send_raw(b"\x00\x01\x02")
        error = await client.last("error")
        assert error["code"] == "invalid_audio"
        assert error["fatal"] is False
        assert error.get("event_id") is None

        await client.send("audio.append", audio=b64(b"\x01\x02\x03"), event_id="odd")
        error = await client.last("error")
        assert (error["code"], error["event_id"]) == ("invalid_audio", "odd")

        # Not base64 at all: the value of the field ``audio`` is wrong (docs/protocol.md 5:
        # fields of the wrong value → invalid_event naming the field).
        await client.send("audio.append", audio="%%% not base64 %%%", event_id="bad64")
        error = await client.last("error")
        assert (error["code"], error["event_id"]) == ("invalid_event", "bad64")
        assert "audio" in error["message"]

        # The dropped frames did not disturb the session or the VAD: a normal turn follows.
        await client.send("ping", id="p")
        assert (await client.last("pong"))["id"] == "p"
        await _send_binary(client, pcm_tone(300), 16000)
        await _send_binary(client, pcm_silence(400), 16000)
        events = await client.until("response.done")
        assert first(events, "transcript.done", role="user")["text"] == "audio:300ms"
        assert events[-1]["status"] == "completed"
        assert "session.ended" not in types(client.events)


async def test_audio_in_text_mode_is_refused(gateway: Gateway) -> None:
    async with gateway.session("text") as client:
        await client.send_raw(pcm_tone(100))
        error = await client.last("error")
        # docs/protocol.md 5: binary audio is "voice mode only"; the gateway says so with
        # invalid_event and keeps the session.
        assert error["code"] == "invalid_event"
        assert "voice" in error["message"]
        assert error["fatal"] is False
        await client.send("audio.append", audio=b64(pcm_tone(100)), event_id="txt")
        error = await client.last("error")
        assert (error["code"], error["event_id"]) == ("invalid_event", "txt")
        events = await client.say("still here")
        assert events[-1]["text"] == "You said: still here"
        assert not client.audio


async def test_barge_in_interrupts_the_spoken_response(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory(local_pace=1.0)
    long_text = " ".join(f"word{i}" for i in range(40))  # 4 s of speech
    async with _voice(gateway) as client:
        await client.send("text.send", text=f"/say {long_text}")
        rid = (await client.last("response.started"))["response_id"]
        await client.last("transcript.delta", response_id=rid)
        await client.last("transcript.delta", response_id=rid)  # word 2: word 1's audio is out
        assert client.audio, "no assistant audio before the barge-in"

        await client.send("audio.playback", response_id=rid, played_ms=100, event_id="pb")
        await client.send_raw(pcm_tone(100))  # 100 ms of speech: the VAD starts at 60 ms
        events = await client.until("response.done", response_id=rid)
        assert "speech.started" in types(events)
        assert not [e for e in events if e["type"] == "error"]  # the playback was accepted
        done = events[-1]
        assert done["status"] == "interrupted"
        assert long_text.startswith(done["text"])
        assert done["text"] != long_text

        # The user stops talking: the utterance ends and a new response answers it.
        await _send_binary(client, pcm_silence(400), 16000)
        events = await client.until("response.done")
        assert first(events, "transcript.done", role="user")["text"] == "audio:100ms"
        reply = events[-1]
        assert (reply["status"], reply["text"]) == ("completed", "You said: audio:100ms")

        timeline = client.timeline
        speech = timeline_index(timeline, "speech.started")
        assert speech < timeline_index(timeline, "response.done", response_id=rid)
        next_start = timeline_index(timeline, "response.started", response_id=reply["response_id"])
        assert _audio_between(timeline, speech, next_start) == [], "audio after speech.started"
        _assert_speech(_check_response_order(client, reply["response_id"]), 24000, 3)
        assert "error" not in types(client.events)

        # The model was told how much the user heard: the playback position (100 ms = 1 word).
        transport: Any = gateway.manager.sessions[client.started["session_id"]].transport
        assert transport.truncations == [(rid, 100)]
        assert ("assistant", "word0") in transport.history


async def test_response_cancel_stops_a_long_spoken_response(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory(local_pace=1.0)
    long_text = " ".join(f"word{i}" for i in range(40))
    async with _voice(gateway) as client:
        await client.send("text.send", text=f"/say {long_text}")
        rid = (await client.last("response.started"))["response_id"]
        await client.last("transcript.delta", response_id=rid)
        await client.send("response.cancel", event_id="stop")
        events = await client.until("response.done", response_id=rid)
        done = events[-1]
        assert done["status"] == "cancelled"
        assert long_text.startswith(done["text"])
        assert done["text"] != long_text
        assert "error" not in types(events)

        events = await client.say("after")
        assert events[-1]["text"] == "You said: after"
        _check_response_order(client, rid)  # no audio of the cancelled response after its done
        _assert_speech(_check_response_order(client, events[-1]["response_id"]), 24000, 3)


async def test_session_update_switches_between_text_and_voice(gateway: Gateway) -> None:
    async with _voice(gateway) as client:
        events = await client.say("one")
        _assert_speech(_check_response_order(client, events[-1]["response_id"]), 24000, 3)

        await client.send("session.update", mode="text", event_id="to-text")
        updated = await client.last("session.updated")
        assert updated["mode"] == "text"
        audio_before = len(client.audio)
        events = await client.say("two")
        rid = events[-1]["response_id"]
        deltas = [e for e in events if e["type"] == "text.delta"]
        assert "".join(d["delta"] for d in deltas) == "You said: two"
        assert all(d["response_id"] == rid for d in deltas)
        assert not [e for e in events if e["type"] in TRANSCRIPTS]
        assert len(client.audio) == audio_before  # no speech in text mode
        assert events[-1]["text"] == "You said: two"
        _check_response_order(client, rid)

        await client.send_raw(pcm_tone(100))  # audio is voice-mode only now
        assert (await client.last("error"))["code"] == "invalid_event"

        await client.send("session.update", mode="voice")
        assert (await client.last("session.updated"))["mode"] == "voice"
        events = await client.say("three")
        assert "text.delta" not in types(events)
        assert first(events, "transcript.done", role="assistant")["text"] == "You said: three"
        _assert_speech(_check_response_order(client, events[-1]["response_id"]), 24000, 3)
