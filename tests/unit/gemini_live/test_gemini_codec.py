"""GeminiCodec: server messages → neutral events, session inputs → client frames (no sockets)."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest

from transports import events as ev
from transports.base import ConversationItem, ToolDeclaration, ToolResult, UpstreamConfig
from transports.gemini_live import wire
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


def online(mode: str = "voice", **extra: Any) -> GeminiCodec:
    codec = GeminiCodec(
        UpstreamConfig(mode=mode, instructions="Be brief.", tools=[WEATHER], **extra)
    )  # type: ignore[arg-type]
    codec.outbox.extend(codec.resume(resumed=False))
    codec.outbox.clear()
    return codec


def sent(codec: GeminiCodec) -> list[dict[str, Any]]:
    frames = [orjson.loads(f) for f in codec.outbox]
    codec.outbox.clear()
    return frames


def feed(codec: GeminiCodec, *messages: dict[str, Any]) -> list[ev.UpstreamEvent]:
    out: list[ev.UpstreamEvent] = []
    for message in messages:
        out.extend(codec.receive(message))
    return out


def audio(ms: int, urlsafe: bool = False) -> dict[str, Any]:
    pcm = b"\xff\xfe" * (24 * ms)
    data = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(pcm).decode().rstrip("=")
    part = {"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": data}}
    return {"serverContent": {"modelTurn": {"role": "model", "parts": [part]}}}


def turn_complete(**usage: int) -> dict[str, Any]:
    message: dict[str, Any] = {"serverContent": {"turnComplete": True}}
    if usage:
        message["usageMetadata"] = usage
    return message


def tool_call(*ids: str) -> dict[str, Any]:
    calls = [{"id": i, "name": "get_weather", "args": {"city": "Paris"}} for i in ids]
    return {"toolCall": {"functionCalls": calls}}


def requested(out: list[ev.UpstreamEvent]) -> tuple[ev.RequestedCall, ...]:
    return next(e for e in out if isinstance(e, ev.ToolCallsRequested)).calls


def result(call_id: str) -> ToolResult:
    return ToolResult(call_id, "get_weather", {"ok": True, "data": {"temp_c": 21}})


class TestSetup:
    def test_voice_setup_has_audio_transcription_resumption_and_compression(self) -> None:
        config = online("voice", voice="Puck", locale="en-US").live_config(resume=True)
        assert config.response_modalities == ["AUDIO"]
        assert config.input_audio_transcription is not None
        assert config.output_audio_transcription is not None
        assert config.session_resumption is not None
        assert config.session_resumption.handle is None  # a new resumable session: {}
        assert config.context_window_compression is not None
        assert config.context_window_compression.sliding_window is not None
        assert config.system_instruction == "Be brief."
        assert config.tools is not None
        (declaration,) = config.tools[0].function_declarations or []
        assert declaration.name == "get_weather"
        assert declaration.parameters_json_schema == {
            "type": "object",
            "properties": {"city": {"type": "string"}},
        }

    def test_text_setup_answers_in_text_without_transcription(self) -> None:
        config = online("text").live_config(resume=False)
        assert config.response_modalities == ["TEXT"]
        assert config.input_audio_transcription is None

    def test_the_last_resumable_handle_is_used_to_resume(self) -> None:
        codec = online()
        feed(
            codec,
            {"sessionResumptionUpdate": {"newHandle": "h1", "resumable": True}},
            {"sessionResumptionUpdate": {"newHandle": "", "resumable": False}},
        )
        assert codec.live_config(resume=True).session_resumption.handle == "h1"  # type: ignore[union-attr]
        assert codec.live_config(resume=False).session_resumption.handle is None  # type: ignore[union-attr]


class TestRelay:
    def test_a_spoken_turn(self) -> None:
        codec = online()
        out = feed(
            codec,
            {"serverContent": {"inputTranscription": {"text": "hi there"}}},
            audio(20),
            {"serverContent": {"outputTranscription": {"text": "Hello"}}},
            audio(20, urlsafe=True),
            {"serverContent": {"generationComplete": True}},
            turn_complete(totalTokenCount=7),
        )
        assert out[0] == ev.TranscriptDelta("user", "hi there")
        assert out[1] == ev.ResponseStarted("gemini_resp_1")
        assert isinstance(out[2], ev.AudioDelta)
        assert len(out[2].pcm) == 960
        assert out[3] == ev.TranscriptDelta("assistant", "Hello", "gemini_resp_1")
        assert isinstance(out[4], ev.AudioDelta)
        assert out[4].pcm == b"\xff\xfe" * 480
        # The user's transcription is unordered with the reply: closed at the turn's end.
        assert out[5:] == [
            ev.TranscriptDone("user", "hi there"),
            ev.UserInputTranscribed("hi there"),
            ev.TranscriptDone("assistant", "Hello", "gemini_resp_1"),
            ev.ResponseDone("gemini_resp_1", "completed", {"totalTokenCount": 7}),
        ]

    def test_text_parts_are_text_and_thoughts_are_not(self) -> None:
        codec = online("text")
        message = {
            "serverContent": {
                "modelTurn": {"parts": [{"text": "plan", "thought": True}, {"text": "Hi"}]}
            }
        }
        out = feed(codec, message, turn_complete())
        assert out == [
            ev.ResponseStarted("gemini_resp_1"),
            ev.TextDelta("gemini_resp_1", "Hi"),
            ev.ResponseDone("gemini_resp_1", "completed", None),
        ]

    def test_interrupted_is_a_barge_in_and_nothing_follows(self) -> None:
        codec = online()
        feed(codec, audio(20))
        out = feed(codec, {"serverContent": {"interrupted": True}}, audio(20), turn_complete())
        assert out == [ev.SpeechStarted(), ev.ResponseDone("gemini_resp_1", "interrupted", None)]

    def test_unknown_messages_are_kept(self) -> None:
        assert feed(online(), {"voiceActivity": {"x": 1}}) == [
            ev.Unknown({"voiceActivity": {"x": 1}})
        ]

    def test_uplink_audio_is_batched_to_20_ms_at_16_khz(self) -> None:
        codec = online()
        codec.audio(b"\x00" * 300)
        assert sent(codec) == []
        codec.audio(b"\x00" * 340)
        (frame,) = sent(codec)
        assert frame["realtimeInput"]["audio"]["mimeType"] == "audio/pcm;rate=16000"
        assert len(base64.b64decode(frame["realtimeInput"]["audio"]["data"])) == 640

    def test_text_is_a_complete_user_turn_and_context_is_not(self) -> None:
        codec = online("text")
        codec.context("remember this")
        codec.user_text("hello")
        frames = sent(codec)
        assert frames[0]["clientContent"]["turnComplete"] is False
        assert frames[1]["clientContent"] == {
            "turns": [{"role": "user", "parts": [{"text": "hello"}]}],
            "turnComplete": True,
        }

    def test_push_to_talk_ends_the_audio_stream(self) -> None:
        codec = online()
        codec.audio(b"\x00" * 100)
        codec.commit()
        assert [list(f["realtimeInput"]) for f in sent(codec)] == [["audio"], ["audioStreamEnd"]]

    def test_a_client_cancel_ends_the_reply_at_once_and_drops_the_rest(self) -> None:
        codec = online()
        feed(codec, audio(20))
        codec.cancel()
        assert codec.events == [ev.ResponseDone("gemini_resp_1", "cancelled")]
        assert feed(codec, audio(20), turn_complete()) == []
        out = feed(codec, audio(20))
        assert out[0] == ev.ResponseStarted("gemini_resp_2")


class TestTools:
    def test_a_batch_ends_its_response_and_is_answered_in_one_message(self) -> None:
        codec = online()
        out = feed(codec, tool_call("fc-1", "fc-2"))
        assert out[0] == ev.ResponseStarted("gemini_resp_1")
        assert isinstance(out[1], ev.ToolCallsRequested)
        assert [c.call_id for c in out[1].calls] == ["fc-1", "fc-2"]
        assert out[1].calls[0].arguments == {"city": "Paris"}
        assert out[2] == ev.ResponseDone("gemini_resp_1", "completed")
        assert not codec.idle
        codec.tool_results([result("fc-1"), result("fc-2")])
        (frame,) = sent(codec)
        responses = frame["toolResponse"]["functionResponses"]
        assert [(r["id"], r["name"]) for r in responses] == [
            ("fc-1", "get_weather"),
            ("fc-2", "get_weather"),
        ]
        assert responses[0]["response"] == {"ok": True, "data": {"temp_c": 21}}
        assert not codec.idle  # the last handle predates the call
        feed(codec, {"sessionResumptionUpdate": {"newHandle": "h2", "resumable": True}})
        assert codec.idle

    def test_a_call_delivered_twice_runs_once(self) -> None:
        codec = online()
        feed(codec, tool_call("fc-1"))
        assert feed(codec, tool_call("fc-1")) == []

    def test_cancelled_calls_are_never_answered(self) -> None:
        codec = online()
        feed(codec, tool_call("fc-1", "fc-2"))
        out = feed(codec, {"toolCallCancellation": {"ids": ["fc-1", "fc-9"]}})
        assert out == [ev.ToolCallsCancelled(("fc-1",))]
        codec.tool_results([result("fc-1"), result("fc-2")])
        (frame,) = sent(codec)
        assert [r["id"] for r in frame["toolResponse"]["functionResponses"]] == ["fc-2"]

    def test_calls_of_an_earlier_connection_are_never_answered_by_id(self) -> None:
        codec = online("text")
        codec.user_text("weather?")
        feed(codec, tool_call("fc-1"))
        sent(codec)
        codec.connection_lost()
        codec.tool_results([result("fc-1")])  # finished while offline
        frames = [orjson.loads(f) for f in codec.resume(resumed=True)]
        # Not as a toolResponse (the new connection does not know fc-1): the question back, as
        # context only (asked again, the model would call its tools again), then the result as
        # text, which the model answers.
        assert ["toolResponse" in f for f in frames] == [False, False]
        question = frames[0]["clientContent"]
        assert question["turns"][0]["parts"][0]["text"] == "weather?"
        assert question["turnComplete"] is False
        (turn,) = frames[1]["clientContent"]["turns"]
        assert "fc-1" in turn["parts"][0]["text"]
        assert "temp_c" in turn["parts"][0]["text"]
        assert frames[1]["clientContent"]["turnComplete"] is True

    def test_a_question_whose_calls_were_answered_is_given_back_with_their_results(self) -> None:
        codec = online("text")
        codec.user_text("weather?")
        feed(codec, tool_call("fc-1"))
        codec.tool_results([result("fc-1")])  # answered by id; the reply to it is then cut
        sent(codec)
        codec.connection_lost()
        frames = [orjson.loads(f)["clientContent"] for f in codec.resume(resumed=True)]
        assert [(f["turns"][0]["parts"][0]["text"][:8], f["turnComplete"]) for f in frames] == [
            ("weather?", False),
            ("Results ", True),
        ]
        assert "temp_c" in frames[1]["turns"][0]["parts"][0]["text"]

    def test_ids_of_a_new_session_that_repeat_earlier_ones_are_made_unique(self) -> None:
        """Gemini numbers calls per session: a new session (not resumed) may reuse an id."""
        codec = online()
        (first,) = requested(feed(codec, tool_call("fc-1")))
        assert first.call_id == "fc-1"
        codec.tool_results([result("fc-1")])
        feed(codec, audio(20), turn_complete())  # the model answered: a later question's calls
        sent(codec)
        codec.connection_lost()
        codec.resume(resumed=False)
        (again,) = requested(feed(codec, tool_call("fc-1")))
        assert again.call_id != "fc-1"
        assert feed(codec, tool_call("fc-1")) == []  # delivered twice in one session: once
        codec.tool_results([result(again.call_id)])
        (frame,) = sent(codec)
        assert [r["id"] for r in frame["toolResponse"]["functionResponses"]] == ["fc-1"]
        (other,) = requested(feed(codec, tool_call("fc-2")))
        out = feed(codec, {"toolCallCancellation": {"ids": ["fc-2"]}})
        assert out == [ev.ToolCallsCancelled((other.call_id,))]

    def test_a_restored_session_never_reuses_ids_of_its_earlier_life(self) -> None:
        """On another node the transport does not know the ids the session used before (its
        ledger does): every id of a restored session is made unique."""
        codec = online(history=(ConversationItem("user", "earlier"),))
        (call,) = requested(feed(codec, tool_call("fc-1")))
        assert call.call_id.startswith("fc-1")
        assert call.call_id != "fc-1"

    def test_a_cancelled_call_is_not_reported_after_a_reconnect(self) -> None:
        codec = online()
        feed(codec, tool_call("fc-1"), {"toolCallCancellation": {"ids": ["fc-1"]}})
        codec.connection_lost()
        codec.resume(resumed=True)
        codec.tool_results([result("fc-1")])
        assert sent(codec) == []
        assert codec.notes[-1] == ("tool_result_dropped", {"call_id": "fc-1"})


class TestContinuity:
    def test_go_away_is_kept_for_the_shell(self) -> None:
        codec = online()
        feed(codec, {"goAway": {"timeLeft": "9.5s"}})
        assert codec.go_away_s == pytest.approx(9.5)

    def test_a_drop_ends_the_reply_and_buffers_uplink_audio(self) -> None:
        codec = online("voice")
        feed(codec, audio(20))
        assert codec.connection_lost() == [ev.ResponseDone("gemini_resp_1", "interrupted")]
        codec.audio(b"\x01\x00" * 16000)  # 1 s said while offline
        frames = [orjson.loads(f) for f in codec.resume(resumed=True)]
        audio_bytes = sum(
            len(base64.b64decode(f["realtimeInput"]["audio"]["data"])) for f in frames
        )
        assert audio_bytes == 32000

    def test_a_new_session_gets_the_history_and_the_unanswered_text(self) -> None:
        codec = GeminiCodec(
            UpstreamConfig(
                mode="text",
                instructions="",
                tools=[],
                history=(ConversationItem("user", "hi"), ConversationItem("assistant", "hello")),
            )
        )
        codec.resume(resumed=False)
        codec.user_text("what now?")
        sent(codec)
        codec.connection_lost()
        frames = [orjson.loads(f) for f in codec.resume(resumed=False)]
        history = frames[0]["clientContent"]
        assert history["turnComplete"] is False
        assert [(t["role"], t["parts"][0]["text"]) for t in history["turns"]] == [
            ("user", "hi"),
            ("model", "hello"),
        ]
        assert frames[1]["clientContent"]["turns"][0]["parts"][0]["text"] == "what now?"
        assert frames[1]["clientContent"]["turnComplete"] is True

    def test_a_resumed_session_gets_no_history(self) -> None:
        codec = online("text")
        codec.user_text("hello")
        sent(codec)  # the shell sends what the codec queued at once
        feed(codec, {"serverContent": {"modelTurn": {"parts": [{"text": "Hi"}]}}}, turn_complete())
        codec.connection_lost()
        assert codec.resume(resumed=True) == []

    def test_frames_not_sent_before_a_drop_go_to_the_next_connection_except_answers(
        self,
    ) -> None:
        codec = online()
        feed(codec, tool_call("fc-1"))
        codec.audio(b"\x00" * 640)
        codec.tool_results([result("fc-1")])  # both still queued when the socket drops
        codec.connection_lost()
        frames = [orjson.loads(f) for f in codec.resume(resumed=True)]
        assert [next(iter(f)) for f in frames] == ["realtimeInput", "clientContent"]
        assert "fc-1" in frames[1]["clientContent"]["turns"][0]["parts"][0]["text"]
        assert "temp_c" in frames[1]["clientContent"]["turns"][0]["parts"][0]["text"]


def test_base64_in_either_alphabet_padded_or_not() -> None:
    raw = bytes(range(256))
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        text = encode(raw).decode()
        assert wire.decode_bytes(text) == raw
        assert wire.decode_bytes(text.rstrip("=")) == raw


def test_usage_of_each_generation_reaches_a_response_end_once() -> None:
    """Found in review: only the last usageMetadata was kept, and the response that ended in a
    toolCall carried none, so the tool-calling generation's tokens were lost."""
    codec = online()
    with_usage = {**tool_call("fc-1"), "usageMetadata": {"promptTokenCount": 100}}
    calls = feed(codec, audio(40), with_usage)
    (call_end,) = [e for e in calls if isinstance(e, ev.ResponseDone)]
    assert call_end.usage == {"promptTokenCount": 100}
    reply = feed(codec, audio(40), turn_complete(promptTokenCount=130, responseTokenCount=20))
    (reply_end,) = [e for e in reply if isinstance(e, ev.ResponseDone)]
    assert reply_end.usage == {"promptTokenCount": 130, "responseTokenCount": 20}


def test_a_report_with_no_response_open_goes_with_the_next_end() -> None:
    codec = online()
    feed(
        codec,
        {
            "usageMetadata": {
                "promptTokenCount": 7,
                "promptTokensDetails": [{"modality": "AUDIO", "tokenCount": 7}],
            }
        },
    )
    out = feed(codec, audio(40), turn_complete(promptTokenCount=5, responseTokenCount=3))
    (end,) = [e for e in out if isinstance(e, ev.ResponseDone)]
    assert end.usage == {
        "promptTokenCount": 12,
        "promptTokensDetails": [{"modality": "AUDIO", "tokenCount": 7}],
        "responseTokenCount": 3,
    }


def test_a_renewed_connection_gets_an_answered_result_once() -> None:
    """Found by the soak (seed 3): a question's tool had answered, then the connection dropped
    before the model replied. The new connection got the result twice: in the history replayed
    to it, and again after the question asked anew with the results it had led to."""
    codec = online("text")
    codec.user_text("weather in Paris?")
    sent(codec)
    feed(codec, tool_call("fc-1"))
    codec.tool_results([result("fc-1")])
    assert [next(iter(f)) for f in sent(codec)] == ["toolResponse"]
    codec.connection_lost()
    frames = codec.resume(resumed=False)
    texts = [
        part["text"]
        for frame in frames
        for turn in orjson.loads(frame)["clientContent"]["turns"]
        for part in turn["parts"]
    ]
    assert sum("temp_c" in text for text in texts) == 1, texts
    assert sum(text == "weather in Paris?" for text in texts) == 1, texts
