"""Gemini Live with the session's turn detection and tool choice (``turns.TurnsCodec``, and the
setup ``wire.live_config`` builds): push-to-talk turns held and sent whole when the answer is
asked for, a commit that does not ask for one, a connection lost before the reply, and the
tools a ``tool_choice`` leaves declared. No sockets."""

from __future__ import annotations

import base64
from typing import Any

import orjson
from google.genai import types

from transports import events as ev
from transports.base import ForcedTool, ToolChoice, ToolDeclaration, TurnDetection, UpstreamConfig
from transports.gemini_live import wire
from transports.gemini_live.turns import TurnsCodec


def tool(name: str) -> ToolDeclaration:
    return ToolDeclaration(name, name, {"gemini": {"name": name, "description": name}})


TOOLS = [tool("get_weather"), tool("lookup_order")]
MANUAL = TurnDetection(manual=True)
SPEECH = b"\x10\x00" * 16000  # one second of 16 kHz PCM16


def online(turns: TurnDetection = MANUAL, choice: ToolChoice = "auto") -> TurnsCodec:
    config = UpstreamConfig(
        mode="voice",
        instructions="Be brief.",
        tools=TOOLS,
        turn_detection=turns,
        tool_choice=choice,
    )
    codec = TurnsCodec(config)
    codec.outbox.extend(codec.resume(resumed=False))
    codec.outbox.clear()
    return codec


def sent(codec: TurnsCodec) -> list[dict[str, Any]]:
    frames = [orjson.loads(f) for f in codec.outbox]
    codec.outbox.clear()
    return frames


def kinds(frames: list[dict[str, Any]]) -> list[str]:
    """``realtimeInput.<field>`` or the top-level key of each frame."""
    return [
        f"realtimeInput.{next(iter(f['realtimeInput']))}" if "realtimeInput" in f else next(iter(f))
        for f in frames
    ]


def audio_of(frames: list[dict[str, Any]]) -> bytes:
    return b"".join(
        base64.b64decode(f["realtimeInput"]["audio"]["data"])
        for f in frames
        if "audio" in f.get("realtimeInput", {})
    )


MODEL_SPEAKS = {"serverContent": {"outputTranscription": {"text": "Hello"}}}


def test_push_to_talk_holds_the_audio_until_the_answer_is_asked_for() -> None:
    codec = online()
    codec.audio(SPEECH[:16000])
    codec.audio(SPEECH[16000:])
    codec.commit(respond=False)
    assert sent(codec) == []  # an activityEnd would make the model answer: nothing goes yet
    codec.request_response()
    frames = sent(codec)
    assert kinds(frames) == [
        "realtimeInput.activityStart",
        "realtimeInput.audio",
        "realtimeInput.activityEnd",
    ]
    assert audio_of(frames) == SPEECH


def test_commits_not_answered_are_one_turn_and_audio_after_them_waits_for_its_own() -> None:
    codec = online()
    codec.audio(SPEECH)
    codec.commit(respond=False)
    codec.audio(SPEECH[:3200])
    codec.commit(respond=False)
    codec.audio(b"\x01\x00" * 800)  # the next utterance, not committed
    codec.request_response()
    frames = sent(codec)
    assert kinds(frames).count("realtimeInput.activityStart") == 1
    assert audio_of(frames) == SPEECH + SPEECH[:3200]
    codec.commit()  # commit and answer: the held utterance is its own turn
    assert audio_of(sent(codec)) == b"\x01\x00" * 800


def test_clear_drops_what_is_not_committed_and_a_request_with_nothing_is_an_empty_turn() -> None:
    codec = online()
    codec.audio(SPEECH)
    codec.clear()
    codec.commit(respond=False)  # nothing to commit
    codec.request_response()
    assert sent(codec) == [{"clientContent": {"turns": [], "turnComplete": True}}]


def test_a_turn_cut_by_a_lost_connection_goes_whole_to_the_next_one() -> None:
    codec = online()
    codec.audio(SPEECH)
    codec.commit()
    turn = list(codec.outbox)
    codec.outbox.popleft()  # activityStart reached the server; the rest did not
    codec.connection_lost()
    again = [orjson.loads(f) for f in codec.resume(resumed=True)]
    assert [orjson.dumps(f).decode() for f in again[-len(turn) :]] == turn
    assert kinds(again).count("realtimeInput.activityStart") == 1  # whole, and once


def test_a_turn_whose_reply_started_is_not_sent_again() -> None:
    codec = online()
    codec.audio(SPEECH)
    codec.commit()
    sent(codec)
    started = codec.receive(MODEL_SPEAKS)
    assert any(isinstance(event, ev.ResponseStarted) for event in started)
    codec.connection_lost()
    assert "realtimeInput.activityStart" not in kinds(
        [orjson.loads(f) for f in codec.resume(resumed=True)]
    )


def test_server_turns_stream_the_audio_and_a_commit_without_a_reply_waits_for_the_request() -> None:
    codec = online(TurnDetection())
    codec.audio(SPEECH)
    assert kinds(sent(codec)) == ["realtimeInput.audio"]
    codec.commit(respond=False)  # the detector ends the turn, or the request does
    assert sent(codec) == []
    codec.request_response()
    assert sent(codec) == [{"realtimeInput": {"audioStreamEnd": True}}]
    codec.commit()
    assert sent(codec) == [{"realtimeInput": {"audioStreamEnd": True}}]


def test_back_to_server_turns_the_held_audio_goes_up_as_it_is() -> None:
    codec = online()
    codec.audio(SPEECH)
    assert codec.reconfigure(TurnDetection(), None) is True
    assert audio_of(sent(codec)) == SPEECH
    assert codec.reconfigure(TurnDetection(), "auto") is False  # nothing changed
    codec.audio(SPEECH[:640])
    assert kinds(sent(codec)) == ["realtimeInput.audio"]


def setup_of(choice: ToolChoice, turns: TurnDetection = MANUAL) -> types.LiveConnectConfig:
    return wire.live_config(
        mode="voice",
        instructions="Be brief.",
        tools=TOOLS,
        handle=None,
        manual_turns=turns.manual,
        tool_choice=choice,
    )


def declared(config: types.LiveConnectConfig) -> list[str | None]:
    return [f.name for t in config.tools or () for f in t.function_declarations or ()]


def test_the_setup_turns_automatic_activity_detection_off_for_push_to_talk() -> None:
    manual = setup_of("auto").realtime_input_config
    assert manual is not None
    assert manual.automatic_activity_detection is not None
    assert manual.automatic_activity_detection.disabled is True
    assert manual.activity_handling == types.ActivityHandling.NO_INTERRUPTION
    assert setup_of("auto", TurnDetection()).realtime_input_config is None


def test_the_setup_declares_what_tool_choice_leaves_and_asks_for_a_forced_call() -> None:
    assert declared(setup_of("auto")) == ["get_weather", "lookup_order"]
    assert setup_of("auto").system_instruction == "Be brief."
    assert declared(setup_of("none")) == []
    forced = setup_of(ForcedTool("lookup_order"))
    assert declared(forced) == ["lookup_order"]
    assert forced.system_instruction == (
        "Be brief.\n\nAnswer each user turn by calling the function lookup_order."
    )
    required = setup_of("required")
    assert declared(required) == ["get_weather", "lookup_order"]
    assert required.system_instruction == (
        "Be brief.\n\nAnswer each user turn by calling one of your functions."
    )


def test_the_codec_builds_its_setup_from_the_session_choices() -> None:
    codec = online(MANUAL, "none")
    config = codec.live_config(resume=False)
    assert declared(config) == []
    assert config.realtime_input_config is not None
