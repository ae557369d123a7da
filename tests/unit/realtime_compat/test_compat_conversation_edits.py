"""What the server answers itself: item create / delete / retrieve, the input buffer's commit
and clear, ``response.create`` while one is active, the client's own tool calls, and the
gateway's errors and session end as GA ``error`` events."""

from __future__ import annotations

from typing import Any

import pytest
from compat_kit import (
    SPEECH_STARTED,
    done,
    frame,
    pcm,
    sdk_parse,
    sdk_parse_all,
    started,
    transcript_delta,
    translator,
    typed,
    types,
)

from gateway.edges.realtime.client_wire import (
    ItemCreate,
    ItemDelete,
    ItemRetrieve,
    ResponseCreate,
    ResponseParams,
    decode_client_event,
)
from gateway.edges.realtime.errors import CompatError
from gateway.edges.realtime.server_wire import close_code
from gateway.edges.realtime.translate import Translator


def create(item: dict[str, Any], **extra: Any) -> ItemCreate:
    event = decode_client_event(frame({"type": "conversation.item.create", "item": item, **extra}))
    assert isinstance(event, ItemCreate)
    return event


def user_text(text: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": text}],
        **extra,
    }


def refused(call: Any, *args: Any) -> CompatError:
    with pytest.raises(CompatError) as caught:
        call(*args)
    return caught.value


def test_items_chain_and_previous_item_id_places_them() -> None:
    compat = translator()
    first = compat.create_item(create(user_text("one", id="item_a")))
    second = compat.create_item(create(user_text("two", id="item_b")))
    assert second[0]["previous_item_id"] == "item_a"
    front = compat.create_item(create(user_text("zero"), previous_item_id="root"))
    assert front[0]["previous_item_id"] is None
    middle = compat.create_item(create(user_text("half"), previous_item_id="item_a"))
    assert middle[0]["previous_item_id"] == "item_a"
    sdk_parse_all(first + second + front + middle)


def test_a_duplicate_id_or_unknown_previous_item_is_refused() -> None:
    compat = translator()
    compat.create_item(create(user_text("one", id="item_a")))
    duplicate = refused(compat.create_item, create(user_text("again", id="item_a"), event_id="e1"))
    assert (duplicate.code, duplicate.param, duplicate.event_id) == (
        "invalid_value",
        "item.id",
        "e1",
    )
    assert duplicate.message == "Item with item_id 'item_a' already exists."
    orphan = refused(compat.create_item, create(user_text("x"), previous_item_id="item_zz"))
    assert orphan.param == "previous_item_id"


def test_delete_and_retrieve() -> None:
    compat = translator()
    compat.create_item(create(user_text("one", id="item_a")))
    (retrieved,) = compat.retrieve_item(ItemRetrieve(item_id="item_a"))
    assert retrieved["item"]["content"] == [{"type": "input_text", "text": "one"}]
    sdk_parse(retrieved)
    (deleted,) = compat.delete_item(ItemDelete(item_id="item_a"))
    assert deleted["item_id"] == "item_a"
    sdk_parse(deleted)
    gone = refused(compat.delete_item, ItemDelete(item_id="item_a", event_id="e2"))
    assert (gone.code, gone.param, gone.event_id) == ("invalid_value", "item_id", "e2")
    assert gone.message == "Item with item_id 'item_a' not found in the conversation."
    assert refused(compat.retrieve_item, ItemRetrieve(item_id="item_a")).param == "item_id"


def test_a_retrieved_user_audio_item_carries_its_transcript() -> None:
    compat = translator(transcription={"model": "whisper-1"})
    user = compat.on_event(SPEECH_STARTED)[0]["item_id"]
    compat.on_event(typed({"type": "transcript.done", "role": "user", "text": "hello"}))
    (retrieved,) = compat.retrieve_item(ItemRetrieve(item_id=user))
    assert retrieved["item"]["content"] == [{"type": "input_audio", "transcript": "hello"}]


def test_a_manual_commit_is_echoed_once() -> None:
    compat = translator()
    compat.input_appended(len(pcm(250)))
    events = compat.commit_input("e3")
    assert types(events) == [
        "input_audio_buffer.committed",
        "conversation.item.added",
        "conversation.item.done",
    ]
    sdk_parse_all(events)
    # The gateway's reply to our audio.commit follows: no second commit of that turn.
    assert types(compat.on_event(started())) == ["response.created"]


def test_a_commit_of_less_than_100_ms_is_refused_with_openais_message() -> None:
    compat = translator()
    compat.input_appended(len(pcm(40)))
    error = refused(compat.commit_input, "e4")
    assert (error.code, error.event_id) == ("input_audio_buffer_commit_empty", "e4")
    assert error.message == (
        "Error committing input audio buffer: buffer too small. Expected at least 100ms of "
        "audio, but buffer only has 40.00ms of audio."
    )


def test_clear_empties_the_buffer() -> None:
    compat = translator()
    compat.input_appended(len(pcm(500)))
    (cleared,) = compat.clear_input()
    assert cleared["type"] == "input_audio_buffer.cleared"
    sdk_parse(cleared)
    assert refused(compat.commit_input).code == "input_audio_buffer_commit_empty"


def test_a_second_response_create_while_one_is_active_is_refused() -> None:
    compat = translator()
    response_id = compat.on_event(started())[0]["response"]["id"]
    error = refused(compat.request_response, ResponseCreate(event_id="e5"))
    assert error.code == "conversation_already_has_active_response"
    assert error.message == (
        f"Conversation already has an active response in progress: {response_id}. Wait until "
        "the response is finished before creating a new one."
    )
    compat.request_response(ResponseCreate(response=ResponseParams(out_of_band=True)))
    aside = compat.on_event(started("r2"))[0]["response"]
    assert aside["conversation_id"] is None  # out of band: not in the conversation
    compat.on_event(done())
    compat.on_event(done(response_id="r2"))
    compat.request_response(ResponseCreate())


def test_an_out_of_band_reply_stays_out_of_the_conversation() -> None:
    compat = translator()
    compat.request_response(ResponseCreate(response=ResponseParams(out_of_band=True)))
    events = compat.on_event(started())
    events += compat.on_event(transcript_delta("One moment."))
    events += compat.on_event(done("completed", "One moment."))
    assert "conversation.item.added" not in types(events)
    assert "conversation.item.done" not in types(events)
    assert len(compat.items) == 0
    sdk_parse_all(events)


def client_call(compat: Translator) -> list[dict[str, Any]]:
    events = compat.on_event(started())
    events += compat.on_event(transcript_delta("Checking."))
    events += compat.on_event(
        typed(
            {
                "type": "client_tool.requested",
                "response_id": "r1",
                "call_id": "call_X",
                "name": "get_weather",
                "arguments": '{"city":"Paris"}',
            }
        )
    )
    events += compat.on_event(done("completed", "Checking."))
    return events


def test_a_client_tool_call_is_a_function_call_output_item() -> None:
    events = client_call(translator())
    sdk_parse_all(events)
    call = events[
        events.index(next(e for e in events if e["type"] == "conversation.item.done")) + 1 :
    ]
    assert types(call)[:7] == [
        "response.output_item.added",
        "conversation.item.added",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "conversation.item.done",
        "response.output_item.done",
        "response.done",
    ]
    assert call[0]["output_index"] == 1  # after the spoken preamble
    assert call[3]["arguments"] == '{"city":"Paris"}'
    assert call[3]["name"] == "get_weather"
    final = call[5]["item"]
    assert (final["type"], final["status"], final["call_id"]) == (
        "function_call",
        "completed",
        "call_X",
    )
    assert [item["type"] for item in call[6]["response"]["output"]] == ["message", "function_call"]


def test_only_a_call_the_model_made_may_be_answered() -> None:
    compat = translator()
    output = {"type": "function_call_output", "call_id": "call_X", "output": '{"temp_c":21}'}
    error = refused(compat.create_item, create(output, event_id="e6"))
    assert (error.code, error.param, error.event_id) == (
        "invalid_tool_call_id",
        "item.call_id",
        "e6",
    )
    assert error.message == "Tool call ID 'call_X' not found in conversation."
    client_call(compat)
    echoed = compat.create_item(create(output))
    assert echoed[0]["item"]["output"] == '{"temp_c":21}'
    sdk_parse_all(echoed)


def test_a_gateway_error_becomes_a_ga_error_with_the_client_event_id() -> None:
    compat = translator()
    (event,) = compat.on_event(
        typed(
            {
                "type": "error",
                "code": "invalid_event",
                "message": "text.send: 'text' must be 1 to 16000 characters",
                "retryable": False,
                "fatal": False,
                "event_id": "evt_c9",
            }
        )
    )
    assert event["error"] == {
        "type": "invalid_request_error",
        "code": "invalid_event",
        "message": "text.send: 'text' must be 1 to 16000 characters",
        "param": None,
        "event_id": "evt_c9",
    }
    sdk_parse(event)


def test_an_upstream_error_fails_the_response_with_its_message() -> None:
    compat = translator()
    compat.on_event(started())
    (error,) = compat.on_event(
        typed(
            {"type": "error", "code": "upstream_error", "message": "the model reported an error: x"}
        )
    )
    assert error["error"]["type"] == "server_error"
    (failed,) = compat.on_event(done("failed"))
    assert failed["response"]["status"] == "failed"
    assert failed["response"]["status_details"]["error"]["message"] == (
        "the model reported an error: x"
    )
    sdk_parse_all([error, failed])


@pytest.mark.parametrize(
    ("reason", "code", "close"),
    [
        ("client", None, 1000),
        ("intent", None, 1000),
        ("idle_timeout", "idle_timeout", 1000),
        ("max_duration", "session_expired", 1001),
        ("shutdown", "server_shutdown", 1001),
        ("upstream_failed", "upstream_failed", 1011),
        ("error", "internal", 1011),
    ],
)
def test_the_end_of_a_session_is_told_then_closed(
    reason: str, code: str | None, close: int
) -> None:
    events = translator().on_event(
        typed({"type": "session.ended", "reason": reason, "detail": "why"})
    )
    assert [event["error"]["code"] for event in events] == ([] if code is None else [code])
    for event in events:
        assert event["error"]["message"] == "why"
        sdk_parse(event)
    assert close_code(reason) == close


def test_an_assistant_item_deleted_while_it_streams_ends_without_its_conversation_echo() -> None:
    compat = translator()
    events = compat.on_event(started()) + compat.on_event(transcript_delta("Hi"))
    item_id = events[1]["item"]["id"]
    compat.delete_item(ItemDelete(item_id=item_id))
    closing = compat.on_event(done("completed", "Hi"))
    assert "conversation.item.done" not in types(closing)
    assert closing[-1]["response"]["output"][0]["id"] == item_id
    sdk_parse_all(closing)
