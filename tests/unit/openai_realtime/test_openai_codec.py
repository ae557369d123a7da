"""RealtimeCodec: server events → neutral events, session inputs → client frames (no sockets)."""

from __future__ import annotations

import base64

import orjson
import pytest
from realtime_kit import (
    WEATHER,
    audio,
    call_events,
    config,
    created,
    done,
    feed,
    online,
    result,
    sent,
    types,
    updated,
)

from transports import events as ev
from transports.base import ConversationItem, ToolDeclaration, UpstreamConfig
from transports.openai_realtime.codec import NOT_RUN_OUTPUT, RealtimeCodec
from transports.openai_realtime.wire import session_config


class TestSessionConfig:
    def test_voice_session_is_ga_shaped(self) -> None:
        body = session_config(config("voice", voice="marin", locale="fr-FR"), "voice", "Hi.")
        assert body["type"] == "realtime"
        assert body["output_modalities"] == ["audio"]
        assert body["audio"]["input"]["format"] == {"type": "audio/pcm", "rate": 24000}
        assert body["audio"]["output"] == {
            "format": {"type": "audio/pcm", "rate": 24000},
            "voice": "marin",
        }
        detection = body["audio"]["input"]["turn_detection"]
        assert detection is not None
        assert detection["type"] == "server_vad"
        assert detection["interrupt_response"]
        assert detection["create_response"]
        transcription = body["audio"]["input"]["transcription"]
        assert transcription is not None
        assert transcription["language"] == "fr"
        assert body["tools"] == [WEATHER.provider_schemas["openaiRealtime"]]
        assert body["tool_choice"] == "auto"

    def test_a_phone_call_asks_for_mu_law_both_ways(self) -> None:
        call = UpstreamConfig(
            mode="voice",
            instructions="",
            tools=[],
            client_input_rate=8000,
            client_output_rate=8000,
            client_encoding="pcmu",
        )
        body = session_config(call, "voice", "Hi.")
        assert body["audio"]["input"]["format"] == {"type": "audio/pcmu"}
        assert body["audio"]["output"]["format"] == {"type": "audio/pcmu"}
        codec = RealtimeCodec(call)
        assert codec.bytes_per_ms == 8
        assert codec.uplink.min_append == 160  # one Twilio frame goes up as it came

    def test_text_session_has_text_output_and_no_vad(self) -> None:
        body = session_config(config("text"), "text", "Hi.")
        assert body["output_modalities"] == ["text"]
        assert body["audio"]["input"]["turn_detection"] is None
        assert body["audio"]["input"]["transcription"] is None

    def test_a_nested_chat_tool_is_refused(self) -> None:
        nested = ToolDeclaration("x", "x", {"openaiRealtime": {"type": "function", "function": {}}})
        with pytest.raises(ValueError, match="flat"):
            session_config(UpstreamConfig(mode="text", instructions="", tools=[nested]), "text", "")


class TestRelay:
    def test_audio_text_and_transcripts_become_neutral_events(self) -> None:
        codec = online()
        out = feed(
            codec,
            created("resp_1"),
            audio("resp_1", "item_a", 20),
            {
                "type": "response.output_audio_transcript.delta",
                "response_id": "resp_1",
                "item_id": "item_a",
                "delta": "Hi",
            },
            {
                "type": "response.output_audio_transcript.done",
                "response_id": "resp_1",
                "item_id": "item_a",
                "transcript": "Hi",
            },
            done("resp_1", usage={"total_tokens": 5}),
        )
        assert out[0] == ev.ResponseStarted("resp_1")
        assert isinstance(out[1], ev.AudioDelta)
        assert len(out[1].pcm) == 960
        assert out[2] == ev.TranscriptDelta("assistant", "Hi", "resp_1")
        assert out[3] == ev.TranscriptDone("assistant", "Hi", "resp_1")
        assert out[4] == ev.ResponseDone("resp_1", "completed", {"total_tokens": 5})

    def test_user_transcription_is_reported(self) -> None:
        codec = online()
        out = feed(
            codec,
            {
                "type": "conversation.item.added",
                "item": {"id": "item_u", "role": "user", "content": [{"type": "input_audio"}]},
            },
            {
                "type": "conversation.item.input_audio_transcription.delta",
                "item_id": "item_u",
                "delta": "hel",
            },
            {
                "type": "conversation.item.input_audio_transcription.completed",
                "item_id": "item_u",
                "transcript": "hello",
            },
        )
        assert out == [
            ev.TranscriptDelta("user", "hel"),
            ev.TranscriptDone("user", "hello"),
            ev.UserInputTranscribed("hello"),
        ]

    def test_unknown_events_are_kept_not_raised(self) -> None:
        assert feed(online(), {"type": "brand.new", "x": 1}) == [
            ev.Unknown({"type": "brand.new", "x": 1})
        ]
        assert feed(online(), {"type": "rate_limits.updated", "rate_limits": []}) == []

    def test_uplink_audio_is_batched_to_20_ms(self) -> None:
        codec = online()
        codec.audio(b"\x00" * 500)
        assert sent(codec) == []
        codec.audio(b"\x00" * 500)
        frames = sent(codec)
        assert types(frames) == ["input_audio_buffer.append"]
        assert len(base64.b64decode(frames[0]["audio"])) == 1000

    def test_the_clients_base64_goes_up_as_is_only_for_a_whole_frame(self) -> None:
        codec = online()
        # "AAB=" is strictly valid with a stray bit past its two bytes: encoding the bytes
        # again would give "AAA=", so only the client's own string can arrive as "AAB=".
        codec.audio(b"\x00\x00" * 480, "AAB=")  # the caller vouches for it: 960 bytes
        assert sent(codec)[0]["audio"] == "AAB="
        codec.audio(b"\x00" * 500, "AAB=")  # gathered with the next: encoded from the bytes
        codec.audio(b"\x00" * 500, "AAB=")
        assert sent(codec)[0]["audio"] == base64.b64encode(b"\x00" * 1000).decode()

    def test_an_audio_delta_keeps_the_upstreams_base64(self) -> None:
        codec = online()
        out = feed(codec, created("resp_1"), audio("resp_1", "item_a", 20))
        delta = out[1]
        assert isinstance(delta, ev.AudioDelta)
        assert delta.encoded is not None
        assert base64.b64decode(delta.encoded) == delta.pcm

    def test_user_text_is_an_item_then_a_response(self) -> None:
        codec = online("text")
        codec.user_text("hello")
        frames = sent(codec)
        assert frames == [
            {
                "type": "conversation.item.create",
                "item": {
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "hello"}],
                },
            },
            {"type": "response.create"},
        ]

    def test_text_during_an_answer_cancels_it_and_waits_for_its_end(self) -> None:
        codec = online("text")
        feed(codec, created("resp_1"))
        codec.user_text("stop, new question")
        assert types(sent(codec)) == ["response.cancel", "conversation.item.create"]
        out = feed(codec, done("resp_1", "cancelled", "client_cancelled"))
        assert out == [ev.ResponseDone("resp_1", "cancelled")]
        assert types(sent(codec)) == ["response.create"]

    def test_push_to_talk_commit_needs_100_ms(self) -> None:
        codec = online()
        codec.audio(b"\x00" * 960 * 3)  # 60 ms
        codec.commit()
        assert types(sent(codec)) == ["input_audio_buffer.append"]
        codec.audio(b"\x00" * 960 * 5)
        codec.commit()
        assert types(sent(codec)) == [
            "input_audio_buffer.append",
            "input_audio_buffer.commit",
            "response.create",
        ]

    def test_an_active_response_error_is_quiet(self) -> None:
        codec = online("text")
        out = feed(
            codec,
            {
                "type": "error",
                "error": {"code": "conversation_already_has_active_response", "message": "busy"},
            },
        )
        assert out == []
        assert codec.notes[-1][0] == "upstream_error_ignored"

    def test_other_errors_are_notices(self) -> None:
        out = feed(
            online(), {"type": "error", "error": {"type": "server_error", "message": "boom"}}
        )
        assert out == [ev.UpstreamNotice("server_error", "boom")]


class TestToolCalls:
    def test_each_call_runs_once_and_the_follow_up_waits_for_every_output(self) -> None:
        codec = online()
        out = feed(
            codec,
            created("resp_1"),
            *call_events("resp_1", "call_a"),
            *call_events("resp_1", "call_b"),
        )
        assert out == [ev.ResponseStarted("resp_1")]  # nothing runs before the response ends
        out = feed(
            codec,
            done(
                "resp_1",
                output=[
                    {
                        "type": "function_call",
                        "call_id": "call_a",
                        "name": "get_weather",
                        "arguments": "{}",
                    }
                ],
            ),
        )
        assert isinstance(out[0], ev.ToolCallsRequested)
        assert [c.call_id for c in out[0].calls] == ["call_a", "call_b"]
        assert out[0].calls[0].arguments == '{"city":"Paris"}'
        assert out[1] == ev.ResponseDone("resp_1", "completed")
        codec.tool_results([result("call_a")])
        frames = sent(codec)
        assert types(frames) == ["conversation.item.create"]
        assert frames[0]["item"]["type"] == "function_call_output"
        assert isinstance(frames[0]["item"]["output"], str)
        assert orjson.loads(frames[0]["item"]["output"]) == {"ok": True, "data": {"temp_c": 21}}
        codec.tool_results([result("call_b")])
        assert types(sent(codec)) == ["conversation.item.create", "response.create"]
        codec.tool_results([result("call_b")])  # a repeat is dropped
        assert sent(codec) == []

    def test_a_call_seen_again_in_a_later_response_does_not_run_twice(self) -> None:
        codec = online()
        feed(codec, created("resp_1"), *call_events("resp_1", "call_a"), done("resp_1"))
        codec.tool_results([result("call_a")])
        sent(codec)
        out = feed(codec, created("resp_2"), *call_events("resp_2", "call_a"), done("resp_2"))
        assert not any(isinstance(e, ev.ToolCallsRequested) for e in out)

    def test_calls_of_a_cancelled_response_never_run_but_are_answered(self) -> None:
        codec = online()
        out = feed(
            codec,
            created("resp_1"),
            *call_events("resp_1", "call_a"),
            done("resp_1", "cancelled", "turn_detected"),
        )
        assert out == [ev.ResponseStarted("resp_1"), ev.ResponseDone("resp_1", "interrupted")]
        frames = sent(codec)
        assert types(frames) == ["conversation.item.create"]
        assert frames[0]["item"] == {
            "type": "function_call_output",
            "call_id": "call_a",
            "output": NOT_RUN_OUTPUT,
        }
        assert "response.create" not in types(frames)

    def test_the_follow_up_waits_for_an_active_response(self) -> None:
        codec = online()
        feed(codec, created("resp_1"), *call_events("resp_1", "call_a"), done("resp_1"))
        feed(codec, created("resp_2"))  # the user spoke; VAD started another response
        codec.tool_results([result("call_a")])
        assert types(sent(codec)) == ["conversation.item.create"]
        feed(codec, done("resp_2"))
        assert types(sent(codec)) == ["response.create"]

    def test_a_failed_response_is_a_notice_and_its_calls_do_not_run(self) -> None:
        codec = online()
        failed = done("resp_1", "failed")
        failed["response"]["status_details"] = {
            "type": "failed",
            "error": {"code": "server_error", "message": "overloaded"},
        }
        out = feed(codec, created("resp_1"), *call_events("resp_1", "call_a"), failed)
        assert ev.UpstreamNotice("server_error", "overloaded") in out
        assert out[-1] == ev.ResponseDone("resp_1", "failed")
        assert not any(isinstance(e, ev.ToolCallsRequested) for e in out)

    def test_a_late_result_is_new_input_for_the_model(self) -> None:
        codec = online("text")
        codec.late_result(result("call_z"))
        frames = sent(codec)
        assert types(frames) == ["conversation.item.create", "response.create"]
        assert frames[0]["item"]["role"] == "system"
        assert "call_z" in frames[0]["item"]["content"][0]["text"]


class TestBargeIn:
    def test_no_audio_of_the_interrupted_response_follows_speech_started(self) -> None:
        codec = online()
        feed(codec, created("resp_1"), audio("resp_1", "item_a", 20))
        out = feed(
            codec,
            {
                "type": "input_audio_buffer.speech_started",
                "audio_start_ms": 10,
                "item_id": "item_u",
            },
        )
        assert out == [ev.SpeechStarted()]
        assert sent(codec) == []  # the server cancels by itself (interrupt_response)
        assert feed(codec, audio("resp_1", "item_a", 20)) == []
        assert feed(codec, done("resp_1", "cancelled", "turn_detected")) == [
            ev.ResponseDone("resp_1", "interrupted")
        ]

    def test_cancel_is_sent_when_the_server_will_not(self) -> None:
        codec = online()
        feed(codec, updated(interrupt=False), created("resp_1"))
        feed(codec, {"type": "input_audio_buffer.speech_started"})
        assert sent(codec) == [{"type": "response.cancel", "response_id": "resp_1"}]
        out = feed(codec, done("resp_1", "cancelled", "client_cancelled"))
        assert out == [ev.ResponseDone("resp_1", "interrupted")]

    def test_cancel_overdue_cancels_once_and_only_the_interrupted_response(self) -> None:
        codec = online()
        feed(codec, created("resp_1"), {"type": "input_audio_buffer.speech_started"})
        codec.cancel_overdue("resp_0")
        assert sent(codec) == []
        codec.cancel_overdue("resp_1")
        codec.cancel_overdue("resp_1")
        assert sent(codec) == [{"type": "response.cancel", "response_id": "resp_1"}]

    def test_truncate_is_clamped_to_the_audio_received(self) -> None:
        codec = online()
        feed(
            codec,
            created("resp_1"),
            audio("resp_1", "item_a", 300),
            {"type": "input_audio_buffer.speech_started"},
        )
        codec.truncate("resp_1", 5000)
        assert sent(codec) == [
            {
                "type": "conversation.item.truncate",
                "item_id": "item_a",
                "content_index": 0,
                "audio_end_ms": 300,
            }
        ]

    def test_truncate_is_skipped_when_nothing_or_everything_was_heard(self) -> None:
        codec = online()
        feed(codec, created("resp_1"), audio("resp_1", "item_a", 200))
        codec.truncate("resp_1", 0)
        assert sent(codec) == []
        feed(
            codec,
            {"type": "response.output_audio.done", "response_id": "resp_1", "item_id": "item_a"},
        )
        codec.truncate("resp_1", 200)
        assert sent(codec) == []
        codec.truncate("resp_unknown", 100)
        assert sent(codec) == []

    def test_truncate_finds_the_item_where_playback_stopped(self) -> None:
        codec = online()
        feed(
            codec,
            created("resp_1"),
            audio("resp_1", "item_a", 100),
            {"type": "response.output_audio.done", "response_id": "resp_1", "item_id": "item_a"},
            audio("resp_1", "item_b", 100),
        )
        codec.truncate("resp_1", 140)
        assert sent(codec) == [
            {
                "type": "conversation.item.truncate",
                "item_id": "item_b",
                "content_index": 0,
                "audio_end_ms": 40,
            }
        ]


class TestReconnect:
    def test_a_lost_connection_ends_the_answer_and_the_new_one_replays_everything(self) -> None:
        codec = online("text")
        codec.user_text("what is the weather")
        sent(codec)
        feed(codec, created("resp_1"), *call_events("resp_1", "call_a"), done("resp_1"))
        codec.tool_results([result("call_a")])
        sent(codec)
        feed(
            codec,
            created("resp_2"),
            {
                "type": "response.output_text.delta",
                "response_id": "resp_2",
                "item_id": "item_t",
                "delta": "Sunny",
            },
            {
                "type": "response.output_text.done",
                "response_id": "resp_2",
                "item_id": "item_t",
                "text": "Sunny.",
            },
            done("resp_2"),
            created("resp_3"),
        )
        assert codec.connection_lost() == [ev.ResponseDone("resp_3", "interrupted")]
        codec.user_text("and tomorrow?")  # typed while offline: kept, not sent
        codec.audio(b"\x00" * 960)
        assert sent(codec) == []
        frames = codec.resume()
        items = [orjson.loads(f) for f in frames]
        assert types(items) == ["conversation.item.create"] * 5 + [
            "input_audio_buffer.append",
            "response.create",
        ]
        replayed = [i["item"] for i in items[:5]]
        assert [(i["type"], i.get("role")) for i in replayed] == [
            ("message", "user"),
            ("function_call", None),
            ("function_call_output", None),
            ("message", "assistant"),
            ("message", "user"),
        ]
        assert replayed[1]["call_id"] == replayed[2]["call_id"] == "call_a"
        assert replayed[3]["content"][0] == {"type": "output_text", "text": "Sunny."}
        assert replayed[4]["content"][0]["text"] == "and tomorrow?"

    def test_history_from_a_resume_is_replayed_on_first_connect(self) -> None:
        codec = RealtimeCodec(
            config(
                "text",
                history=(ConversationItem("user", "hi"), ConversationItem("assistant", "hello")),
            )
        )
        codec.session_update()  # the shell configures the new session first
        frames = [orjson.loads(f) for f in codec.resume()]
        assert [f["item"]["role"] for f in frames] == ["user", "assistant"]

    def test_a_call_pending_at_the_drop_can_be_answered_after_the_replay(self) -> None:
        codec = online()
        feed(codec, created("resp_1"), *call_events("resp_1", "call_a"), done("resp_1"))
        codec.connection_lost()
        codec.tool_results([result("call_a")])  # the tool finished while offline
        frames = [orjson.loads(f) for f in codec.resume()]
        assert [f["item"]["type"] for f in frames if f["type"] == "conversation.item.create"] == [
            "function_call",
            "function_call_output",
        ]
        assert frames[-1]["type"] == "response.create"

    def test_uplink_audio_buffered_offline_is_bounded(self) -> None:
        codec = online()
        codec.connection_lost()
        for _ in range(100):
            codec.audio(b"\x00" * 48_000)  # 1 s each
        frames = [orjson.loads(f) for f in codec.resume()]
        total = sum(
            len(base64.b64decode(f["audio"]))
            for f in frames
            if f["type"] == "input_audio_buffer.append"
        )
        assert total == 15_000 * 48

    def test_after_a_drop_the_utterance_in_progress_is_sent_again_not_the_silence_before(
        self,
    ) -> None:
        codec = online()  # server VAD with the default 300 ms prefix padding
        for _ in range(250):
            codec.audio(b"\x00" * 960)  # 5 s of silence in 20 ms frames
        feed(codec, {"type": "input_audio_buffer.speech_started", "audio_start_ms": 4700})
        for _ in range(150):
            codec.audio(b"\x01" * 960)
        codec.connection_lost()
        assert _appended_bytes(codec.resume()) == (300 + 1000) * 48 + 3 * 48_000

    def test_under_semantic_vad_every_uncommitted_byte_is_sent_again(self) -> None:
        codec = online()
        semantic = {"type": "semantic_vad", "eagerness": "auto"}
        feed(
            codec,
            {
                "type": "session.updated",
                "session": {"audio": {"input": {"turn_detection": semantic}}},
            },
        )
        for _ in range(8):
            codec.audio(b"\x00" * 48_000)
        codec.connection_lost()
        assert _appended_bytes(codec.resume()) == 8 * 48_000

    def test_expiry_is_not_an_error_for_the_client(self) -> None:
        codec = online()
        assert (
            feed(
                codec,
                {"type": "error", "error": {"code": "session_expired", "message": "60 minutes"}},
            )
            == []
        )
        assert codec.expired


def _appended_bytes(frames: list[bytes] | list[str]) -> int:
    events = [orjson.loads(f) for f in frames]
    return sum(
        len(base64.b64decode(e["audio"]))
        for e in events
        if e["type"] == "input_audio_buffer.append"
    )
