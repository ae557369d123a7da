"""The fake OpenAI Realtime server's pure parts, without sockets or an event loop.

``FakeSession`` is driven directly: ``handle`` a client event, then ``drain`` pulls every step
of the responses it began, as the async shell would (without waiting).
"""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest

from fakes.openai_realtime.audio import (
    AudioFormat,
    alaw_decode,
    alaw_encode,
    decode_base64_audio,
    ulaw_decode,
    ulaw_encode,
)
from fakes.openai_realtime.config import (
    DEFAULT_INSTRUCTIONS,
    SERVER_VAD_DEFAULTS,
    default_session,
    merge_session_update,
    parse_response_overrides,
)
from fakes.openai_realtime.conversation import Conversation, Entry, parse_client_item
from fakes.openai_realtime.response import CallsPlan, HangPlan, SpeechPlan
from fakes.openai_realtime.routing import (
    LISTENING,
    WAITING_FOR_RESULTS,
    AnswerAudio,
    AnswerNothing,
    AnswerText,
    AnswerToolResults,
    Expire,
    decide,
    parse_tool_output,
    route,
)
from fakes.openai_realtime.session import FakeOptions, FakeSession, expiry_message
from fakes.openai_realtime.wire import (
    Action,
    Begin,
    ClientError,
    Close,
    Halt,
    IdSource,
    Send,
    Step,
)
from transports.local.brain import FAIL_MESSAGE, LocalBrain, ToolCall
from transports.local.speech import plan_speech
from transports.local.tones import silence, tone

PCM = AudioFormat("audio/pcm", 24000)


def sends(actions: list[Action]) -> list[dict[str, Any]]:
    return [action.event for action in actions if isinstance(action, Send)]


def drain(session: FakeSession, actions: list[Action]) -> list[dict[str, Any]]:
    """Every event the actions send, delivering begun responses to their end."""
    events: list[dict[str, Any]] = []
    for action in actions:
        if isinstance(action, Send):
            events.append(action.event)
        elif isinstance(action, Begin):
            while (step := session.next_step(action.response_id)) is not None:
                events += drain(session, list(step.actions))
    return events


def types(events: list[dict[str, Any]]) -> list[str]:
    return [event["type"] for event in events]


def user_text(text: str, **extra: Any) -> dict[str, Any]:
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    return {"type": "conversation.item.create", "item": item, **extra}


def call_output(call_id: str, output: Any) -> dict[str, Any]:
    item = {"type": "function_call_output", "call_id": call_id, "output": output}
    return {"type": "conversation.item.create", "item": item}


def ask(session: FakeSession, text: str, **response: Any) -> list[dict[str, Any]]:
    """Events of a user text message and the response to it."""
    events = sends(session.handle(user_text(text)))
    create: dict[str, Any] = {"type": "response.create"}
    if response:
        create["response"] = response
    return events + drain(session, session.handle(create))


def error_of(actions: list[Action]) -> dict[str, Any]:
    (event,) = sends(actions)
    assert event["type"] == "error"
    error: dict[str, Any] = event["error"]
    return error


# -- session config ------------------------------------------------------------------------


def test_the_default_session_is_the_full_ga_object() -> None:
    session = default_session(session_id="sess_1", model="gpt-realtime", expires_at=1234)
    assert session["object"] == "realtime.session"
    assert session["type"] == "realtime"
    assert session["instructions"] == DEFAULT_INSTRUCTIONS != ""
    assert session["output_modalities"] == ["audio"]
    assert session["audio"]["input"]["format"] == {"type": "audio/pcm", "rate": 24000}
    assert session["audio"]["input"]["turn_detection"] == SERVER_VAD_DEFAULTS
    assert session["audio"]["output"] == {
        "format": {"type": "audio/pcm", "rate": 24000},
        "voice": "alloy",
        "speed": 1.0,
    }
    assert (session["tools"], session["tool_choice"]) == ([], "auto")
    assert (session["max_output_tokens"], session["truncation"]) == ("inf", "auto")
    assert session["tracing"] is None
    assert session["expires_at"] == 1234


def test_an_update_merges_only_the_fields_present() -> None:
    current = default_session(session_id="sess_1", model="gpt-realtime", expires_at=0)
    update = {
        "type": "realtime",
        "instructions": "Be brief.",
        "audio": {
            "input": {"turn_detection": {"type": "server_vad", "silence_duration_ms": 200}},
            "output": {"voice": "marin"},
        },
        "tools": [{"type": "function", "name": "get_weather", "parameters": {}}],
    }
    merged = merge_session_update(current, update, voice_locked=False)
    assert merged["instructions"] == "Be brief."
    assert merged["audio"]["input"]["turn_detection"] == {
        **SERVER_VAD_DEFAULTS,
        "silence_duration_ms": 200,
    }
    assert merged["audio"]["output"]["voice"] == "marin"
    assert merged["audio"]["output"]["format"] == current["audio"]["output"]["format"]
    assert merged["audio"]["input"]["format"] == current["audio"]["input"]["format"]
    assert [tool["name"] for tool in merged["tools"]] == ["get_weather"]
    assert current["instructions"] == DEFAULT_INSTRUCTIONS  # the input is not changed


def test_null_clears_and_a_new_vad_type_starts_from_its_defaults() -> None:
    current = default_session(session_id="sess_1", model="gpt-realtime", expires_at=0)
    transcribed = merge_session_update(
        current,
        {"type": "realtime", "audio": {"input": {"transcription": {"model": "whisper-1"}}}},
        voice_locked=False,
    )
    assert transcribed["audio"]["input"]["transcription"] == {"model": "whisper-1"}
    cleared = merge_session_update(
        transcribed,
        {"type": "realtime", "audio": {"input": {"transcription": None, "turn_detection": None}}},
        voice_locked=False,
    )
    assert cleared["audio"]["input"]["transcription"] is None
    assert cleared["audio"]["input"]["turn_detection"] is None
    semantic = merge_session_update(
        cleared,
        {"type": "realtime", "audio": {"input": {"turn_detection": {"type": "semantic_vad"}}}},
        voice_locked=False,
    )
    assert semantic["audio"]["input"]["turn_detection"] == {
        "type": "semantic_vad",
        "eagerness": "auto",
        "create_response": True,
        "interrupt_response": True,
    }


@pytest.mark.parametrize(
    ("update", "code", "param"),
    [
        ({"instructions": "x"}, "missing_required_parameter", "session.type"),
        ({"type": "transcription"}, "invalid_value", "session.type"),
        ({"type": "realtime", "temperature": 0.8}, "unknown_parameter", "session.temperature"),
        ({"type": "realtime", "modalities": ["text"]}, "unknown_parameter", "session.modalities"),
        (
            {"type": "realtime", "output_modalities": ["audio", "text"]},
            "invalid_value",
            "session.output_modalities",
        ),
        (
            {"type": "realtime", "audio": {"input": {"format": {"type": "pcm16"}}}},
            "invalid_value",
            "session.audio.input.format.type",
        ),
        (
            {
                "type": "realtime",
                "audio": {"output": {"format": {"type": "audio/pcm", "rate": 16000}}},
            },
            "invalid_value",
            "session.audio.output.format.rate",
        ),
        (
            {"type": "realtime", "tools": [{"type": "function", "function": {"name": "f"}}]},
            "missing_required_parameter",
            "session.tools[0].name",
        ),
        ({"type": "realtime", "model": "gpt-4o"}, "invalid_value", "session.model"),
        ({"type": "realtime", "max_output_tokens": 9999}, "invalid_value", None),
    ],
)
def test_invalid_updates_are_rejected(update: dict[str, Any], code: str, param: str | None) -> None:
    current = default_session(session_id="sess_1", model="gpt-realtime", expires_at=0)
    with pytest.raises(ClientError) as caught:
        merge_session_update(current, update, voice_locked=False)
    assert caught.value.code == code
    if param is not None:
        assert caught.value.param == param


def test_missing_session_type_has_the_api_message() -> None:
    current = default_session(session_id="sess_1", model="gpt-realtime", expires_at=0)
    with pytest.raises(ClientError) as caught:
        merge_session_update(current, {"instructions": "x"}, voice_locked=False)
    assert caught.value.message == "Missing required parameter: 'session.type'."


def test_the_voice_is_locked_once_audio_was_output() -> None:
    current = default_session(session_id="sess_1", model="gpt-realtime", expires_at=0)
    change = {"type": "realtime", "audio": {"output": {"voice": "cedar"}}}
    assert merge_session_update(current, change, voice_locked=False)["audio"]["output"][
        "voice"
    ] == ("cedar")
    with pytest.raises(ClientError) as caught:
        merge_session_update(current, change, voice_locked=True)
    assert caught.value.code == "cannot_update_voice"
    same = {"type": "realtime", "audio": {"output": {"voice": "alloy"}}}
    assert merge_session_update(current, same, voice_locked=True)["audio"]["output"]["voice"] == (
        "alloy"
    )


def test_g711_formats_are_accepted() -> None:
    current = default_session(session_id="sess_1", model="gpt-realtime", expires_at=0)
    update = {
        "type": "realtime",
        "audio": {
            "input": {"format": {"type": "audio/pcmu"}},
            "output": {"format": {"type": "audio/pcma"}},
        },
    }
    merged = merge_session_update(current, update, voice_locked=False)
    assert merged["audio"]["input"]["format"] == {"type": "audio/pcmu"}
    assert merged["audio"]["output"]["format"] == {"type": "audio/pcma"}


def test_response_overrides_are_validated() -> None:
    overrides = parse_response_overrides(
        {"output_modalities": ["text"], "conversation": "none", "metadata": {"k": "v"}}
    )
    assert overrides.output_modalities == ["text"]
    assert overrides.out_of_band
    assert overrides.metadata == {"k": "v"}
    with pytest.raises(ClientError) as caught:
        parse_response_overrides({"modalities": ["text"]})
    assert caught.value.param == "response.modalities"
    with pytest.raises(ClientError):
        parse_response_overrides({"conversation": "other"})


# -- conversation and truncation -----------------------------------------------------------


def spoken_entry(conversation: Conversation, text: str) -> Entry:
    """An assistant audio item as a response leaves it: 100 ms per word."""
    entry = Entry(
        {
            "id": conversation.new_item_id(),
            "object": "realtime.item",
            "type": "message",
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_audio", "transcript": text}],
        }
    )
    for word in plan_speech(text, 24000):
        entry.word_starts.append((word.delta, entry.audio_ms))
        for chunk in word.chunks:
            entry.audio += chunk
            entry.audio_ms += 20
    conversation.insert(entry)
    return entry


def test_truncate_cuts_audio_and_transcript_to_the_words_started() -> None:
    conversation = Conversation(IdSource())
    entry = spoken_entry(conversation, "one two three four")
    assert entry.audio_ms == 400
    conversation.truncate(entry.id, 0, 150)
    assert entry.audio_ms == 150
    assert len(entry.audio) == 150 * 48
    assert entry.item["content"][0]["transcript"] == "one two"
    conversation.truncate(entry.id, 0, 100)
    assert entry.item["content"][0]["transcript"] == "one"


def test_truncate_validation_follows_the_api_messages() -> None:
    conversation = Conversation(IdSource())
    entry = spoken_entry(conversation, "one two three")
    user = parse_client_item(user_text("hi")["item"], conversation, PCM)
    conversation.insert(user)
    with pytest.raises(ClientError) as too_long:
        conversation.truncate(entry.id, 0, 400)
    assert too_long.value.message == "Audio content of 300ms is already shorter than 400ms"
    with pytest.raises(ClientError) as not_audio:
        conversation.truncate(user.id, 0, 10)
    assert not_audio.value.message == "Only model output audio messages can be truncated"
    with pytest.raises(ClientError) as unknown:
        conversation.truncate("item_nope", 0, 10)
    assert unknown.value.code == "invalid_value"
    assert unknown.value.param == "item_id"
    silent = spoken_entry(conversation, "")
    with pytest.raises(ClientError) as no_audio:
        conversation.truncate(silent.id, 0, 0)
    assert no_audio.value.code == "unsupported_content_type"
    assert entry.audio_ms == 300  # nothing changed by the failures


def test_client_items_are_validated_like_the_api() -> None:
    conversation = Conversation(IdSource())
    with pytest.raises(ClientError) as unknown_call:
        parse_client_item(call_output("call_9", "{}")["item"], conversation, PCM)
    assert unknown_call.value.code == "invalid_tool_call_id"
    assert unknown_call.value.message == "Tool call ID 'call_9' not found in conversation."
    call = {"type": "function_call", "call_id": "call_9", "name": "f", "arguments": "{}"}
    conversation.insert(parse_client_item(call, conversation, PCM))
    with pytest.raises(ClientError) as not_string:
        parse_client_item(call_output("call_9", {"a": 1})["item"], conversation, PCM)
    assert (not_string.value.code, not_string.value.param) == ("invalid_type", "item.output")
    assert "expected a string, but got an object" in not_string.value.message
    accepted = parse_client_item(call_output("call_9", "{}")["item"], conversation, PCM)
    assert accepted.item["call_id"] == "call_9"
    bad_id = {**call, "call_id": "call 9!"}
    with pytest.raises(ClientError):
        parse_client_item(bad_id, conversation, PCM)
    with pytest.raises(ClientError) as no_type:
        parse_client_item({"role": "user"}, conversation, PCM)
    assert no_type.value.param == "item.type"


def test_items_keep_client_ids_and_insert_after_a_previous_item() -> None:
    conversation = Conversation(IdSource())
    first = parse_client_item({**user_text("a")["item"], "id": "mine"}, conversation, PCM)
    assert conversation.insert(first) is None
    second = parse_client_item(user_text("b")["item"], conversation, PCM)
    assert conversation.insert(second) == "mine"
    third = parse_client_item(user_text("c")["item"], conversation, PCM)
    assert conversation.insert(third, "root") is None
    fourth = parse_client_item(user_text("d")["item"], conversation, PCM)
    assert conversation.insert(fourth, "mine") == "mine"
    assert [item["id"] for item in conversation.items] == [third.id, "mine", fourth.id, second.id]
    with pytest.raises(ClientError):
        conversation.insert(parse_client_item(user_text("e")["item"], conversation, PCM), "x")
    duplicate = parse_client_item({**user_text("a")["item"], "id": "mine"}, conversation, PCM)
    with pytest.raises(ClientError):
        conversation.insert(duplicate)


# -- routing ---------------------------------------------------------------------------------


def test_routing_prefers_tool_outputs_then_user_then_system() -> None:
    conversation = Conversation(IdSource())

    def add(raw: dict[str, Any]) -> Entry:
        entry = parse_client_item(raw, conversation, PCM)
        conversation.insert(entry)
        return entry

    system = add(
        {"type": "message", "role": "system", "content": [{"type": "input_text", "text": "S"}]}
    )
    assert route([system], conversation) == AnswerText("S", "system")
    user = add(user_text("hello")["item"])
    assert route([system, user], conversation) == AnswerText("hello", "user")
    call = add({"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"})
    output = add(call_output("call_1", '{"ok": true}')["item"])
    assert route([user, call, output], conversation) == AnswerToolResults(
        (("call_1", "f", {"ok": True}),)
    )
    assert route([call], conversation) == AnswerNothing()
    audio = Entry(
        {"id": "a", "type": "message", "role": "user", "content": [{"type": "input_audio"}]},
        utterance_ms=420,
    )
    assert route([user, audio], conversation) == AnswerAudio(420)


def test_a_replayed_question_that_led_to_calls_is_answered_from_their_results() -> None:
    """A conversation replayed after a drop that cut the answer to a tool's result: the user's
    question, the call, its output, the part of the answer that was heard. Asked for a
    response, a model answers from the results it has; it does not call the tool again (the
    fake did, and the soak saw one request run twice)."""
    conversation = Conversation(IdSource())

    def add(raw: dict[str, Any]) -> Entry:
        entry = parse_client_item(raw, conversation, PCM)
        conversation.insert(entry)
        return entry

    user = add(user_text('/tool f {"x": 1}')["item"])
    call = add({"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"})
    output = add(call_output("call_1", '{"ok": true}')["item"])
    heard = add(
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Tool results: f="}],
        }
    )
    assert route([user, call, output, heard], conversation) == AnswerToolResults(
        (("call_1", "f", {"ok": True}),)
    )


def test_tool_output_envelopes() -> None:
    assert parse_tool_output('{"temp_c": 21}') == {"temp_c": 21}
    assert parse_tool_output("sunny") == {"output": "sunny"}
    assert parse_tool_output("[1, 2]") == {"output": [1, 2]}


def test_decide_applies_directives_before_the_brain() -> None:
    brain = LocalBrain()
    assert decide(AnswerText("/drop Hi there", "user"), brain) == SpeechPlan(
        "Hi there", drop_after=2
    )
    assert decide(AnswerText("/expire", "user"), brain) == Expire()
    assert decide(AnswerText("/hang", "user"), brain) == HangPlan()
    assert decide(AnswerText("/hang", "system"), brain) == SpeechPlan("You said: /hang")
    assert decide(AnswerText("/slow 250 Hm", "user"), brain) == SpeechPlan("Hm", delay_ms=250)
    assert decide(AnswerNothing(), brain) == SpeechPlan(LISTENING)
    assert decide(AnswerAudio(300), brain) == SpeechPlan("You said: audio:300ms")
    hung = decide(AnswerText('/hangcall f {"a":1}', "user"), brain)
    assert hung == CallsPlan((ToolCall("call_1", "f", '{"a":1}'),), hang=True)


def test_decide_waits_for_every_result_of_a_batch() -> None:
    brain = LocalBrain()
    calls = decide(AnswerText("/tools a {} ;; b {}", "user"), brain)
    assert isinstance(calls, CallsPlan)
    assert [call.call_id for call in calls.calls] == ["call_1", "call_2"]
    first = AnswerToolResults((("call_1", "a", {"x": 1}),))
    assert decide(first, brain) == SpeechPlan(WAITING_FOR_RESULTS)
    second = AnswerToolResults((("call_2", "b", {"y": 2}),))
    assert decide(second, brain) == SpeechPlan('Tool results: a={"x":1}; b={"y":2}')


# -- the session, driven directly ----------------------------------------------------------


def test_an_audio_response_follows_section_6_1() -> None:
    session = FakeSession()
    events = ask(session, "/say Hello there")
    assert types(events) == [
        "conversation.item.added",
        "conversation.item.done",
        "response.created",
        "response.output_item.added",
        "conversation.item.added",
        "response.content_part.added",
        *(["response.output_audio_transcript.delta"] + ["response.output_audio.delta"] * 5) * 2,
        "response.output_audio.done",
        "response.output_audio_transcript.done",
        "response.content_part.done",
        "response.output_item.done",
        "conversation.item.done",
        "response.done",
        "rate_limits.updated",
    ]
    audio = b"".join(
        base64.b64decode(e["delta"]) for e in events if e["type"] == "response.output_audio.delta"
    )
    assert audio == b"".join(c for w in plan_speech("Hello there", 24000) for c in w.chunks)
    done = events[-2]["response"]
    assert done["status"] == "completed"
    assert done["output"][0]["content"] == [{"type": "output_audio", "transcript": "Hello there"}]
    assert session.audio_output_started


def test_text_output_per_session_or_per_response() -> None:
    session = FakeSession()
    events = ask(session, "/say Hi you", output_modalities=["text"])
    assert types(events)[5:] == [
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "conversation.item.done",
        "response.done",
        "rate_limits.updated",
    ]
    assert events[7]["delta"] == " you"
    assert events[8]["text"] == "Hi you"
    assert session.items[-1]["content"] == [{"type": "output_text", "text": "Hi you"}]
    assert not session.audio_output_started


def test_a_cancel_mid_call_leaves_an_incomplete_call_whose_output_is_accepted() -> None:
    session = FakeSession(FakeOptions(arg_fragment=2))
    session.handle(user_text('/tool get_weather {"city":"Paris"}'))
    actions = session.handle({"type": "response.create"})
    (begin,) = [a for a in actions if isinstance(a, Begin)]
    seen: list[dict[str, Any]] = []
    while "response.function_call_arguments.delta" not in types(seen):
        step = session.next_step(begin.response_id)
        assert step is not None
        seen += sends(list(step.actions))
    cancelled = session.handle({"type": "response.cancel"})
    assert Halt(begin.response_id) in cancelled
    closing = sends(cancelled)
    assert types(closing) == [
        "response.function_call_arguments.done",
        "conversation.item.done",
        "response.output_item.done",
        "response.done",
        "rate_limits.updated",
    ]
    assert closing[0]["arguments"] == '{"'
    assert closing[2]["item"]["status"] == "incomplete"
    assert closing[3]["response"]["status_details"] == {
        "type": "cancelled",
        "reason": "client_cancelled",
    }
    assert session.next_step(begin.response_id) is None
    added = session.handle(call_output("call_1", "{}"))
    assert types(sends(added)) == ["conversation.item.added", "conversation.item.done"]


def test_brain_failures_and_fake_directives() -> None:
    failing = FakeSession()
    failing.handle(user_text("/fail"))
    assert failing.handle({"type": "response.create"}) == [Close(1011, FAIL_MESSAGE)]
    assert failing.closed
    assert failing.handle({"type": "response.create"}) == []

    session = FakeSession()
    events = ask(session, "/error quota gone")
    assert types(events)[2:] == ["response.created", "response.done", "rate_limits.updated"]
    assert events[3]["response"]["status"] == "failed"
    assert events[3]["response"]["status_details"] == {
        "type": "failed",
        "error": {"type": "server_error", "code": "server_error", "message": "quota gone"},
    }

    slow = FakeSession()
    slow.handle(user_text("/slow 250 ok"))
    (begin,) = [a for a in slow.handle({"type": "response.create"}) if isinstance(a, Begin)]
    assert slow.next_step(begin.response_id) == Step(wait_s=0.25)

    expiring = FakeSession(FakeOptions(max_duration_s=90))
    expiring.handle(user_text("/expire"))
    actions = expiring.handle({"type": "response.create"})
    assert actions[-1] == Close(1001, "Your session hit the maximum duration of 1.5 minutes.")
    assert error_of(actions[:-1])["code"] == "session_expired"


def test_hang_waits_for_a_cancel() -> None:
    session = FakeSession()
    session.handle(user_text("/hang"))
    (begin,) = [a for a in session.handle({"type": "response.create"}) if isinstance(a, Begin)]
    assert session.next_step(begin.response_id) == Step(hang=True)
    busy = session.handle({"type": "response.create", "event_id": "evt_2"})
    assert error_of(busy)["code"] == "conversation_already_has_active_response"
    assert error_of(busy)["event_id"] == "evt_2"
    done = sends(session.handle({"type": "response.cancel"}))
    assert types(done) == ["response.done", "rate_limits.updated"]
    assert done[0]["response"]["output"] == []
    again = error_of(session.handle({"type": "response.cancel"}))
    assert again["code"] == "response_cancel_not_active"


def test_a_rejected_update_changes_nothing_and_echoes_the_event_id() -> None:
    session = FakeSession()
    before = copy.deepcopy(session.config)
    actions = session.handle(
        {"type": "session.update", "event_id": "evt_9", "session": {"instructions": "x"}}
    )
    assert error_of(actions) == {
        "type": "invalid_request_error",
        "code": "missing_required_parameter",
        "message": "Missing required parameter: 'session.type'.",
        "param": "session.type",
        "event_id": "evt_9",
    }
    assert session.config == before


def test_unknown_and_malformed_client_events() -> None:
    session = FakeSession()
    assert error_of(session.handle({"type": "nope"}))["param"] == "type"
    assert error_of(session.handle({"event_id": "e"}))["code"] == "missing_required_parameter"
    assert error_of(session.handle([1, 2]))["type"] == "invalid_request_error"
    assert error_of(session.invalid_frame("bad"))["code"] == "invalid_json"


def test_server_vad_commits_transcribes_and_answers() -> None:
    session = FakeSession()
    session.handle(
        {
            "type": "session.update",
            "session": {
                "type": "realtime",
                "audio": {
                    "input": {
                        "transcription": {"model": "gpt-4o-mini-transcribe"},
                        "turn_detection": {
                            "type": "server_vad",
                            "prefix_padding_ms": 100,
                            "silence_duration_ms": 200,
                        },
                    }
                },
            },
        }
    )
    pcm = silence(200, 24000) + tone(440, 300, 24000) + silence(200, 24000)
    append = {"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm).decode()}
    events = drain(session, session.handle(append))
    assert types(events)[:7] == [
        "input_audio_buffer.speech_started",
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
        "conversation.item.added",
        "conversation.item.done",
        "conversation.item.input_audio_transcription.delta",
        "conversation.item.input_audio_transcription.completed",
    ]
    started, stopped, committed, added = events[:4]
    assert started["audio_start_ms"] == 100  # speech at 200 ms, minus 100 ms of padding
    assert stopped["audio_end_ms"] == 700
    assert started["item_id"] == stopped["item_id"] == committed["item_id"] == added["item"]["id"]
    assert added["item"]["content"] == [{"type": "input_audio", "transcript": None}]
    assert events[6]["transcript"] == "audio:300ms"
    assert session.items[0]["content"][0]["transcript"] == "audio:300ms"
    assert events[7]["type"] == "response.created"
    assert events[-2]["response"]["output"][0]["content"][0]["transcript"] == (
        "You said: audio:300ms"
    )


def test_vad_without_create_response_only_commits() -> None:
    session = FakeSession()
    session.handle(
        {
            "type": "session.update",
            "session": {
                "type": "realtime",
                "audio": {
                    "input": {"turn_detection": {"type": "server_vad", "create_response": False}}
                },
            },
        }
    )
    pcm = tone(440, 200, 24000) + silence(600, 24000)
    append = {"type": "input_audio_buffer.append", "audio": base64.b64encode(pcm).decode()}
    events = drain(session, session.handle(append))
    assert "response.created" not in types(events)
    assert types(events)[-1] == "conversation.item.done"


def test_manual_commit_and_the_empty_buffer() -> None:
    session = FakeSession()
    session.handle(
        {
            "type": "session.update",
            "session": {"type": "realtime", "audio": {"input": {"turn_detection": None}}},
        }
    )
    half = base64.b64encode(silence(50, 24000)).decode()
    session.handle({"type": "input_audio_buffer.append", "audio": half})
    error = error_of(session.handle({"type": "input_audio_buffer.commit", "event_id": "c1"}))
    assert error["code"] == "input_audio_buffer_commit_empty"
    assert error["message"] == (
        "Error committing input audio buffer: buffer too small. Expected at least 100ms of audio, "
        "but buffer only has 50.00ms of audio."
    )
    assert error["event_id"] == "c1"
    session.handle({"type": "input_audio_buffer.append", "audio": half})
    events = drain(session, session.handle({"type": "input_audio_buffer.commit"}))
    assert types(events) == [
        "input_audio_buffer.committed",
        "conversation.item.added",
        "conversation.item.done",
    ]
    bad = error_of(session.handle({"type": "input_audio_buffer.append", "audio": "@@not b64"}))
    assert (bad["code"], bad["param"]) == ("invalid_value", "audio")


def test_echo_mode_repeats_the_audio_text_after_one_preamble() -> None:
    session = FakeSession(FakeOptions(echo=True))
    first = sends(session.handle({"type": "input_audio_buffer.append", "audio": "AAAA"}))
    assert types(first) == [
        "response.created",
        "response.output_item.added",
        "conversation.item.added",
        "response.content_part.added",
        "response.output_audio.delta",
    ]
    second = sends(session.handle({"type": "input_audio_buffer.append", "audio": "not even b64"}))
    assert types(second) == ["response.output_audio.delta"]
    assert second[0]["delta"] == "not even b64"
    assert second[0]["response_id"] == first[0]["response"]["id"]
    assert session.active_response_id is None  # text turns still work
    assert "response.done" in types(ask(session, "hello"))


def test_g711_output_and_input() -> None:
    session = FakeSession()
    session.handle(
        {
            "type": "session.update",
            "session": {
                "type": "realtime",
                "audio": {
                    "input": {"format": {"type": "audio/pcmu"}},
                    "output": {"format": {"type": "audio/pcmu"}},
                },
            },
        }
    )
    events = ask(session, "/say hi")
    deltas = [base64.b64decode(e["delta"]) for e in events if e["type"].endswith("audio.delta")]
    assert [len(d) for d in deltas] == [160] * 5  # 20 ms at 8 kHz, one byte a sample
    speech = ulaw_encode(tone(440, 300, 8000) + silence(600, 8000))
    append = {"type": "input_audio_buffer.append", "audio": base64.b64encode(speech).decode()}
    heard = drain(session, session.handle(append))
    assert heard[-2]["response"]["output"][0]["content"][0]["transcript"] == (
        "You said: audio:300ms"
    )


# -- small parts ---------------------------------------------------------------------------


def test_g711_round_trips_within_its_quantisation() -> None:
    pcm = tone(440, 20, 8000, amplitude=0.5)
    for encode, decode in ((ulaw_encode, ulaw_decode), (alaw_encode, alaw_decode)):
        coded = encode(pcm)
        assert len(coded) == len(pcm) // 2
        back = decode(coded)
        for original, restored in zip(
            memoryview(pcm).cast("h"), memoryview(back).cast("h"), strict=True
        ):
            assert abs(original - restored) <= max(16, abs(original) // 16)
    assert ulaw_encode(b"\x00\x00") == b"\xff"
    assert alaw_encode(b"\x00\x00") == b"\xd5"


def test_base64_is_decoded_strictly() -> None:
    assert decode_base64_audio("AAAA") == b"\x00\x00\x00"
    assert decode_base64_audio("AA A") is None
    assert decode_base64_audio(12) is None


def test_options_and_the_expiry_message() -> None:
    assert expiry_message(3600) == "Your session hit the maximum duration of 60 minutes."
    assert expiry_message(0.3) == "Your session hit the maximum duration of 0.005 minutes."
    with pytest.raises(ValueError, match="arg_fragment"):
        FakeOptions(arg_fragment=0)
    with pytest.raises(ValueError, match="pace"):
        FakeOptions(pace=-1)
