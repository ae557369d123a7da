"""GeminiCodec in the races a review found: ordering, offline inputs, orphaned calls.

No event loop, no sockets: server messages go in through ``receive``, session inputs through the
codec's methods, and what a new connection is given comes out of ``resume``.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest

from transports import events as ev
from transports.base import ToolDeclaration, ToolResult, UpstreamConfig
from transports.gemini_live.codec import GeminiCodec

WEATHER = ToolDeclaration(
    "get_weather",
    "Weather for a city.",
    {
        "gemini": {
            "name": "get_weather",
            "description": "Weather for a city.",
            "parametersJsonSchema": {"type": "object", "properties": {"city": {"type": "string"}}},
        }
    },
)


def online(mode: str = "voice") -> GeminiCodec:
    codec = GeminiCodec(UpstreamConfig(mode=mode, instructions="Be brief.", tools=[WEATHER]))  # type: ignore[arg-type]
    codec.outbox.extend(codec.resume(resumed=False))
    codec.outbox.clear()
    return codec


def feed(codec: GeminiCodec, *messages: dict[str, Any]) -> list[ev.UpstreamEvent]:
    out: list[ev.UpstreamEvent] = []
    for message in messages:
        out.extend(codec.receive(message))
    return out


def frames(raw: list[str]) -> list[dict[str, Any]]:
    return [orjson.loads(f) for f in raw]


def audio(ms: int = 20) -> dict[str, Any]:
    data = base64.b64encode(b"\x01\x00" * (24 * ms)).decode()
    part = {"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": data}}
    return {"serverContent": {"modelTurn": {"role": "model", "parts": [part]}}}


def heard(text: str) -> dict[str, Any]:
    return {"serverContent": {"inputTranscription": {"text": text}}}


def said(text: str) -> dict[str, Any]:
    return {"serverContent": {"outputTranscription": {"text": text}}}


INTERRUPTED = {"serverContent": {"interrupted": True}}
TURN_COMPLETE = {"serverContent": {"turnComplete": True}}


def tool_call(*ids: str | None) -> dict[str, Any]:
    calls = []
    for call_id in ids:
        call: dict[str, Any] = {"name": "get_weather", "args": {"city": "Paris"}}
        if call_id is not None:
            call["id"] = call_id
        calls.append(call)
    return {"toolCall": {"functionCalls": calls}}


def texts(raw: list[dict[str, Any]]) -> list[str]:
    """The texts of every clientContent turn among ``raw`` frames."""
    return [
        part["text"]
        for f in raw
        if "clientContent" in f
        for turn in f["clientContent"]["turns"]
        for part in turn["parts"]
    ]


# -- relay --------------------------------------------------------------------------------------


def test_an_interruption_caused_by_our_own_text_is_not_user_speech() -> None:
    # The model is answering; the user types a new message. clientContent interrupts the
    # generation on the server, which answers `interrupted` + `turnComplete` (`clientContent`,
    # https://ai.google.dev/api/live).
    # Nobody spoke: a SpeechStarted makes the session barge in (speech.started to the client, and
    # a new turn that wipes the typed text from the user's "last words").
    codec = online("text")
    feed(codec, {"serverContent": {"modelTurn": {"parts": [{"text": "Once upon"}]}}})
    codec.user_text("stop, tell me the time instead")
    assert codec.events == [ev.ResponseDone("gemini_resp_1", "cancelled")]
    out = feed(codec, INTERRUPTED, TURN_COMPLETE)
    assert ev.SpeechStarted() not in out


def test_input_transcription_that_arrives_after_the_reply_started_stays_in_its_turn() -> None:
    # inputTranscription is not ordered with modelTurn (server content,
    # https://ai.google.dev/api/live).
    codec = online()
    first = feed(codec, heard("what is"), audio(), heard(" the weather"), TURN_COMPLETE)
    second = feed(codec, heard("thanks"), audio(), TURN_COMPLETE)
    user_done = [
        e.text for e in first + second if isinstance(e, ev.TranscriptDone) and e.role == "user"
    ]
    assert user_done == ["what is the weather", "thanks"]


def test_a_drop_after_the_user_spoke_still_closes_their_transcript() -> None:
    # The client got transcript.delta (user) for these words; no transcript.done ever follows,
    # and the session never learns the user's last words (UserInputTranscribed).
    codec = online()
    feed(codec, heard("book a table for two"))
    out = codec.connection_lost()
    assert ev.TranscriptDone("user", "book a table for two") in out
    assert ev.UserInputTranscribed("book a table for two") in out


def test_a_response_that_spoke_before_calling_a_tool_closes_its_transcript() -> None:
    codec = online()
    out = feed(codec, audio(), said("Let me check."), tool_call("fc-1"))
    done = out.index(ev.ResponseDone("gemini_resp_1", "completed"))
    assert ev.TranscriptDone("assistant", "Let me check.", "gemini_resp_1") in out[:done]


# -- inputs while offline -------------------------------------------------------------------------


def test_context_given_while_reconnecting_reaches_the_resumed_session() -> None:
    # add_context carries SET_PENDING_MESSAGE texts and "confirmation expired" notices.
    codec = online("text")
    codec.connection_lost()
    codec.context("The user's daughter is called Ana.")
    assert "The user's daughter is called Ana." in texts(frames(codec.resume(resumed=True)))


def test_push_to_talk_released_while_reconnecting_still_ends_the_audio_stream() -> None:
    codec = online()
    codec.connection_lost()
    codec.audio(b"\x01\x00" * 8000)  # 500 ms said while offline, then released
    codec.commit()
    replay = frames(codec.resume(resumed=True))
    assert any("audio" in f.get("realtimeInput", {}) for f in replay)
    assert replay[-1] == {"realtimeInput": {"audioStreamEnd": True}}


def test_every_text_typed_while_reconnecting_is_asked() -> None:
    codec = online("text")
    codec.connection_lost()
    codec.user_text("first question")
    codec.user_text("second question")
    asked = texts(frames(codec.resume(resumed=True)))
    assert "first question" in asked
    assert "second question" in asked


def test_a_question_whose_reply_the_client_cancelled_is_not_asked_again() -> None:
    codec = online("text")
    codec.user_text("tell me a very long story")
    codec.outbox.clear()  # sent
    feed(codec, {"serverContent": {"modelTurn": {"parts": [{"text": "Once upon a time"}]}}})
    codec.cancel()  # the client's response.cancel
    feed(codec, TURN_COMPLETE)
    codec.connection_lost()
    assert "tell me a very long story" not in texts(frames(codec.resume(resumed=True)))


# -- continuity -----------------------------------------------------------------------------------


def test_the_codec_is_not_idle_while_the_user_is_talking() -> None:
    # The goAway swap happens "at the next quiet moment" (codec.idle). The user's words so far
    # went to the old connection and are not replayed (only audio sent while offline is), and
    # connection_lost forgets the transcript: the new connection hears only the rest.
    codec = online()
    feed(codec, heard("what's the weather"))
    assert not codec.idle


def test_calls_without_an_id_are_never_mistaken_for_duplicates() -> None:
    codec = online()
    for n in range(4096):
        feed(codec, tool_call(f"fc-{n}"))
        codec.tool_results([ToolResult(f"fc-{n}", "get_weather", {"ok": True})])
    first = feed(codec, tool_call(None))
    second = feed(codec, tool_call(None))
    assert any(isinstance(e, ev.ToolCallsRequested) for e in first)
    assert any(isinstance(e, ev.ToolCallsRequested) for e in second)


# -- calls orphaned by a reconnect ----------------------------------------------------------------


def result(call_id: str) -> ToolResult:
    return ToolResult(call_id, "get_weather", {"ok": True, "data": {"temp_c": 21}})


def test_the_orphaned_results_of_one_batch_reach_the_model_as_one_turn() -> None:
    # A toolResponse answers every id of a batch at once; the text fallback sends one
    # clientContent turnComplete per call, and each clientContent interrupts the reply to the
    # previous one (`clientContent`, https://ai.google.dev/api/live).
    codec = online("text")
    codec.user_text("weather in Paris and Rome?")
    codec.outbox.clear()  # sent
    feed(codec, tool_call("fc-1", "fc-2"))
    codec.connection_lost()
    codec.outbox.extend(codec.resume(resumed=True))
    codec.outbox.clear()
    codec.tool_results([result("fc-1"), result("fc-2")])
    turns = [f for f in frames(list(codec.outbox)) if "clientContent" in f]
    assert len(turns) == 1


def test_an_orphaned_result_does_not_cut_a_reply_in_progress() -> None:
    # The result arrives while the new connection is answering something else: a clientContent
    # with turnComplete interrupts that generation on the server (https://ai.google.dev/api/live),
    # and the codec did not even end the response itself (unlike user_text).
    codec = online()
    feed(codec, tool_call("fc-1"))
    codec.connection_lost()
    codec.outbox.extend(codec.resume(resumed=True))
    codec.outbox.clear()
    feed(codec, audio(), said("Meanwhile, about your other question"))  # a reply in progress
    codec.tool_results([result("fc-1")])
    assert not [f for f in frames(list(codec.outbox)) if "clientContent" in f]


def test_a_drop_while_the_model_answers_from_a_tool_result_does_not_lose_the_question() -> None:
    # The handle is not resumable while tools run or the model generates (`resumable` of
    # SessionResumptionUpdate, https://ai.google.dev/api/live): the
    # resumed session is back before the question. The question is no longer replayed (it led to
    # a call) and the result was already sent by id, so the new connection gets nothing at all.
    codec = online("text")
    codec.user_text("what's the weather in Paris?")
    feed(codec, {"sessionResumptionUpdate": {"newHandle": "", "resumable": False}})
    feed(codec, tool_call("fc-1"))
    codec.tool_results([result("fc-1")])  # answered by id on this connection
    out = feed(codec, {"serverContent": {"modelTurn": {"parts": [{"text": "It is 21"}]}}})
    assert isinstance(out[0], ev.ResponseStarted)
    assert codec.connection_lost()[-1].status == "interrupted"  # type: ignore[union-attr]
    replay = frames(codec.resume(resumed=True))
    assert any("clientContent" in f for f in replay)  # the question, or the result as text


def test_a_batch_whose_result_cannot_be_serialised_can_still_be_answered() -> None:
    # The session answers a batch that failed inside the gateway with INTERNAL results
    # (session.py _answer_failed_batch) "so the model never waits forever". Here the id was
    # popped before the serialisation failed, so that answer is dropped as "already answered"
    # and the BLOCKING call is never answered.
    from decimal import Decimal

    codec = online()
    feed(codec, tool_call("fc-1"))
    with pytest.raises(TypeError):
        codec.tool_results(
            [ToolResult("fc-1", "get_weather", {"ok": True, "data": {"price": Decimal("1.5")}})]
        )
    failure = {"ok": False, "error": {"type": "INTERNAL", "message": "retry later"}}
    codec.tool_results([ToolResult("fc-1", "get_weather", failure)])
    (frame,) = frames(list(codec.outbox))
    assert frame["toolResponse"]["functionResponses"][0]["id"] == "fc-1"
