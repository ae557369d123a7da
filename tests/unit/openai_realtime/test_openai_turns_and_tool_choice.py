"""The OpenAI Realtime codec with the session's turn detection and tool choice: both passed
through in ``session.update``, a commit that only commits, ``response.create`` asked for, and
the reply to tool results never forced to call again. No sockets."""

from __future__ import annotations

from realtime_kit import call_events, created, done, online, result, sent, types

from transports.base import ForcedTool, TurnDetection

DETECTOR = {"type": "semantic_vad", "eagerness": "low"}


def session_of(codec: object) -> dict[str, object]:
    frames = [f for f in sent(codec) if f["type"] == "session.update"]  # type: ignore[arg-type]
    return frames[-1]["session"]  # type: ignore[no-any-return]


def test_manual_turns_turn_the_servers_detector_off_and_tool_choice_goes_as_given() -> None:
    codec = online(turn_detection=TurnDetection(manual=True), tool_choice=ForcedTool("get_weather"))
    codec.outbox.append(codec.session_update())
    session = session_of(codec)
    assert session["audio"]["input"]["turn_detection"] is None  # type: ignore[index]
    assert session["tool_choice"] == {"type": "function", "name": "get_weather"}


def test_a_detector_of_the_client_goes_as_given_and_the_gateway_still_answers() -> None:
    codec = online(turn_detection=TurnDetection(settings=DETECTOR), tool_choice="none")
    codec.outbox.append(codec.session_update())
    session = session_of(codec)
    assert session["audio"]["input"]["turn_detection"] == {  # type: ignore[index]
        **DETECTOR,
        "create_response": True,
        "interrupt_response": True,
    }
    assert session["tool_choice"] == "none"
    default = online()
    default.outbox.append(default.session_update())
    detection = session_of(default)["audio"]["input"]["turn_detection"]  # type: ignore[index]
    assert detection == {"type": "server_vad", "create_response": True, "interrupt_response": True}


def test_a_commit_without_a_reply_only_commits_and_the_request_asks() -> None:
    codec = online(turn_detection=TurnDetection(manual=True))
    codec.audio(b"\x01\x00" * 2400 * 3)  # 150 ms
    codec.commit(respond=False)
    assert types(sent(codec))[-1] == "input_audio_buffer.commit"
    codec.request_response()
    assert types(sent(codec)) == ["response.create"]


def test_offline_a_commit_without_a_reply_is_replayed_without_one() -> None:
    codec = online(turn_detection=TurnDetection(manual=True))
    codec.audio(b"\x01\x00" * 2400 * 3)
    sent(codec)
    codec.connection_lost()
    codec.commit(respond=False)
    frames = codec.resume()
    assert '"input_audio_buffer.commit"' in frames[-1]
    assert not [f for f in frames if '"response.create"' in f]


def test_the_reply_to_tool_results_is_not_forced_to_call_again() -> None:
    codec = online(tool_choice="required")
    codec.user_text("weather?")
    assert sent(codec, keep_ids=True)[-1].get("response") is None  # the session's choice
    for event in (created("resp_1"), *call_events("resp_1", "call_1"), done("resp_1")):
        codec.receive(event)
    codec.tool_results([result("call_1")])
    follow_up = sent(codec)[-1]
    assert follow_up == {"type": "response.create", "response": {"tool_choice": "auto"}}


def test_auto_and_none_need_no_override_and_an_update_resends_the_session() -> None:
    codec = online(tool_choice="none")
    codec.user_text("hi")
    for event in (created("resp_1"), *call_events("resp_1", "call_1"), done("resp_1")):
        codec.receive(event)
    sent(codec)
    codec.tool_results([result("call_1")])
    assert sent(codec) == [
        {"type": "conversation.item.create", "item": sent_output("call_1")},
        {"type": "response.create"},
    ]
    codec.update(turn_detection=TurnDetection(manual=True), tool_choice="auto")
    session = session_of(codec)
    assert session["audio"]["input"]["turn_detection"] is None  # type: ignore[index]
    assert session["tool_choice"] == "auto"
    assert codec.config.tool_choice == "auto"  # what a new connection is configured with


def sent_output(call_id: str) -> dict[str, object]:
    return {
        "type": "function_call_output",
        "call_id": call_id,
        "output": '{"ok":true,"data":{"temp_c":21}}',
    }
