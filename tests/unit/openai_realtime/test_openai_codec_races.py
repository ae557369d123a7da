"""RealtimeCodec in the races a review found: ordering, cancels, reconnects, replay.

Pure: server events as dicts, frames read from ``outbox``.
"""

from __future__ import annotations

import orjson
from realtime_kit import (
    audio,
    call_events,
    created,
    done,
    feed,
    online,
    replayed,
    replayed_items,
    result,
    sent,
    text,
    transcript,
    types,
)

from transports import events as ev
from transports.openai_realtime.replay import Entry, ReplayLog

# -- codec: response bookkeeping ------------------------------------------------------------------


def test_a_done_for_a_response_never_created_is_not_forwarded() -> None:
    codec = online()
    feed(codec, created("resp_1"))
    out = feed(codec, done("resp_other"))
    # The session never got response.started for resp_other: the client would get a
    # response.done out of nowhere (docs/protocol.md 6: started precedes done).
    assert not [e for e in out if isinstance(e, ev.ResponseDone)]
    assert codec.active_response_id == "resp_1"


def test_a_response_superseded_by_a_new_one_ends_once() -> None:
    codec = online()
    out = feed(codec, created("resp_a"), created("resp_b"), done("resp_a"), done("resp_b"))
    ends = [e.response_id for e in out if isinstance(e, ev.ResponseDone)]
    assert ends.count("resp_a") == 1


def test_a_cancel_while_the_response_is_being_created_still_cancels_it() -> None:
    codec = online("text")
    codec.user_text("tell me a long story")
    assert types(sent(codec)) == ["conversation.item.create", "response.create"]
    codec.cancel()  # the client's response.cancel, before response.created came back
    sent(codec)  # a cancel sent now would reach the server before the response exists
    feed(codec, created("resp_1"))
    cancels = [f for f in sent(codec) if f["type"] == "response.cancel"]
    assert [f.get("response_id", "resp_1") for f in cancels] == ["resp_1"]


def test_the_follow_up_is_not_lost_when_a_vad_response_was_already_running() -> None:
    codec = online()
    feed(codec, created("resp_1"), *call_events("resp_1", "call_a"), done("resp_1"))
    codec.tool_results([result("call_a")])
    frames = sent(codec, keep_ids=True)
    assert types(frames) == ["conversation.item.create", "response.create"]
    request_id = frames[1]["event_id"]
    # Meanwhile the user spoke: server VAD created resp_vad *before* our output item reached
    # the conversation, so resp_vad answers the speech without the tool result; our
    # response.create is refused (the `error` event echoes its event id:
    # https://platform.openai.com/docs/api-reference/realtime-server-events).
    refused = {
        "type": "error",
        "error": {
            "code": "conversation_already_has_active_response",
            "message": "busy",
            "event_id": request_id,
        },
    }
    output_added = {
        "type": "conversation.item.added",
        "item": {"id": "item_o", "type": "function_call_output", "call_id": "call_a"},
    }
    feed(codec, created("resp_vad"), output_added, refused, done("resp_vad"))
    # The model is asked again once resp_vad is over.
    assert types(sent(codec)) == ["response.create"]


def test_no_second_follow_up_when_the_running_response_saw_the_outputs() -> None:
    codec = online()
    feed(codec, created("resp_1"), *call_events("resp_1", "call_a"), done("resp_1"))
    codec.tool_results([result("call_a")])
    request_id = sent(codec, keep_ids=True)[1]["event_id"]
    output_added = {
        "type": "conversation.item.added",
        "item": {"id": "item_o", "type": "function_call_output", "call_id": "call_a"},
    }
    refused = {
        "type": "error",
        "error": {"code": "conversation_already_has_active_response", "event_id": request_id},
    }
    # The output reached the conversation first; the VAD response that started after it
    # answers the tool result and the speech together.
    feed(codec, output_added, created("resp_vad"), refused, done("resp_vad"))
    assert sent(codec) == []


def test_a_refused_response_create_does_not_block_later_ones() -> None:
    codec = online("text")
    codec.user_text("hello")
    request_id = sent(codec, keep_ids=True)[1]["event_id"]
    feed(
        codec,
        {
            "type": "error",
            "error": {"code": "invalid_value", "message": "no", "event_id": request_id},
        },
    )
    codec.user_text("again")
    assert types(sent(codec)) == ["conversation.item.create", "response.create"]


# -- codec: barge-in and truncation -------------------------------------------------------------


def test_a_truncate_sent_before_the_response_ends_also_cuts_the_replayed_reply() -> None:
    codec = online()
    words = [f"w{n} " for n in range(10)]
    feed(codec, created("resp_1"), audio("resp_1", "item_a", 1000))
    feed(codec, *[transcript("resp_1", "item_a", w) for w in words])
    feed(codec, {"type": "input_audio_buffer.speech_started"})
    # The session truncates at once on speech.started (Session._barge_in), so before
    # the server's response.done for the cancelled reply.
    codec.truncate("resp_1", 200)
    assert sent(codec)[0]["audio_end_ms"] == 200
    feed(codec, done("resp_1", "cancelled", "turn_detected"))
    (assistant,) = [i for i in replayed_items(codec) if i.get("role") == "assistant"]
    # The server cut its item to what was heard; a new session must get the same.
    assert assistant["content"][0]["text"] == "w0 w1"


def test_a_reply_the_client_cancelled_is_not_requested_again_after_a_reconnect() -> None:
    codec = online("text")
    codec.user_text("tell me a long story")
    sent(codec)
    feed(codec, created("resp_1"))
    codec.cancel()
    assert types(sent(codec)) == ["response.cancel"]
    # The socket drops before response.done (cancelled) arrives.
    assert "response.create" not in types(replayed(codec))


def test_a_reply_the_user_barged_in_on_is_not_requested_again_after_a_reconnect() -> None:
    codec = online()
    feed(
        codec,
        created("resp_1"),
        audio("resp_1", "item_a", 100),
        {"type": "input_audio_buffer.speech_started"},
    )
    # The user is talking; VAD answers them on the new connection. Re-asking would make the
    # model start the interrupted answer again over the user.
    assert "response.create" not in types(replayed(codec))


# -- codec: push-to-talk while offline ---------------------------------------------------------


def test_a_commit_while_reconnecting_commits_the_buffered_audio_on_the_new_session() -> None:
    codec = online()
    codec.connection_lost()
    codec.audio(b"\x01\x00" * 24 * 300)  # 300 ms said during the reconnect
    codec.commit()  # push-to-talk release
    frames = types([orjson.loads(f) for f in codec.resume()])
    assert frames == [
        "input_audio_buffer.append",
        "input_audio_buffer.commit",
        "response.create",
    ]


# -- codec and replay log: the replayed conversation ------------------------------------------


def test_the_replay_keeps_the_conversation_order_when_text_supersedes_an_answer() -> None:
    codec = online("text")
    codec.user_text("first question")
    sent(codec)
    feed(codec, created("resp_1"), text("resp_1", "item_a1", "Half an answer"))
    codec.user_text("second question")  # cancels resp_1, adds the new item
    feed(codec, done("resp_1", "cancelled", "client_cancelled"))
    # On the server, resp_1's item (added at output_item.added) precedes the second question.
    order = [i["content"][0]["text"] for i in replayed_items(codec)]
    assert order == ["first question", "Half an answer", "second question"]


def test_the_verbatim_window_never_holds_an_output_without_its_call() -> None:
    log = ReplayLog(recent_items=4)
    log.add(Entry("user", "weather in Paris and Rome?"))
    log.add(Entry("call", '{"city":"Paris"}', call_id="call_a", name="get_weather"))
    log.add(Entry("call", '{"city":"Rome"}', call_id="call_b", name="get_weather"))
    log.add(Entry("output", '{"ok":true}', call_id="call_a"))
    log.add(Entry("output", '{"ok":true}', call_id="call_b"))
    log.add(Entry("assistant", "Sunny in both."))
    items = log.items()
    calls = {i["call_id"] for i in items if i["type"] == "function_call"}
    outputs = {i["call_id"] for i in items if i["type"] == "function_call_output"}
    # call_a is in the summary, its output verbatim: the server answers invalid_tool_call_id
    # and the output is lost from the new session.
    assert outputs <= calls
