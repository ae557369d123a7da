"""The fake Gemini Live server's pure parts, without sockets or an event loop.

``FakeGeminiSession`` is driven directly: ``handle`` a client message, then ``drain`` pulls every
step of the generations it began, as the async shell would (without waiting).
"""

from __future__ import annotations

import base64
import ipaddress
from pathlib import Path
from typing import Any

import orjson
import pytest
from cryptography import x509

from fakes.gemini_live.audio_input import AudioInput, SpeechStarted, UtteranceEnded, pcm_rate
from fakes.gemini_live.memory import SessionStore
from fakes.gemini_live.messages import (
    echo_frame,
    echo_frames,
    model_audio,
    usage_metadata,
)
from fakes.gemini_live.options import FakeGeminiOptions
from fakes.gemini_live.routing import (
    LISTENING,
    CallsPlan,
    FailPlan,
    GoAwayPlan,
    NothingInput,
    TextInput,
    UtteranceInput,
    decide,
    envelope_of,
    tool_args,
)
from fakes.gemini_live.session import FakeGeminiSession, Phase
from fakes.gemini_live.setup import apply_context_update, parse_setup
from fakes.gemini_live.speech import HangPlan, SpeechPlan, SpeechRun
from fakes.gemini_live.tls import ensure_certificate
from fakes.gemini_live.tools import Answer, ToolBatch, forget_calls, issue_calls
from fakes.gemini_live.wire import (
    Action,
    Begin,
    Close,
    CloseAfter,
    Halt,
    ProtocolError,
    Send,
    SendRaw,
    camel_case,
    client_message,
    decode_base64,
    duration_text,
    fit_reason,
    normalise,
    parse_int,
)
from transports.local.brain import BAD_JSON_ARGUMENTS, LocalBrain, ToolCall
from transports.local.speech import plan_speech
from transports.local.tones import silence, tone

TEXT_SETUP = {
    "setup": {
        "model": "models/gemini-live-2.5-flash-preview",
        "generationConfig": {"responseModalities": ["TEXT"]},
    }
}
RESUMABLE = {"setup": {**TEXT_SETUP["setup"], "sessionResumption": {}}}


def say(text: str, *, turn_complete: bool = True) -> dict[str, Any]:
    turn = {"role": "user", "parts": [{"text": text}]}
    return {"clientContent": {"turns": [turn], "turnComplete": turn_complete}}


def drain(session: FakeGeminiSession, actions: list[Action]) -> list[dict[str, Any]]:
    """Every message the actions send, delivering begun generations until they end or hang."""
    messages: list[dict[str, Any]] = []
    for action in actions:
        if isinstance(action, Send):
            messages.append(action.message)
        elif isinstance(action, SendRaw):
            messages.append(orjson.loads(action.frame))
        elif isinstance(action, Begin):
            while (step := session.next_step(action.generation)) is not None:
                messages += drain(session, list(step.actions))
                if step.hang:
                    break
    return messages


def describe(messages: list[dict[str, Any]]) -> list[str]:
    out = []
    for message in messages:
        if "serverContent" in message:
            out.append("+".join(message["serverContent"]))
        elif "sessionResumptionUpdate" in message:
            resumable = message["sessionResumptionUpdate"]["resumable"]
            out.append("handle" if resumable else "not-resumable")
        else:
            out.append(next(iter(message)))
    return out


def text_of(messages: list[dict[str, Any]]) -> str:
    return "".join(
        part["text"]
        for m in messages
        if "modelTurn" in m.get("serverContent", {})
        for part in m["serverContent"]["modelTurn"]["parts"]
    )


def started(options: FakeGeminiOptions | None = None, setup: Any = None) -> FakeGeminiSession:
    session = FakeGeminiSession(options)
    assert drain(session, session.handle(setup or TEXT_SETUP)) == [{"setupComplete": {}}]
    return session


def closes(actions: list[Action]) -> list[tuple[int, str]]:
    return [(a.code, a.reason) for a in actions if isinstance(a, Close)]


# -- wire -------------------------------------------------------------------------------------


def test_names_are_normalised_but_data_keys_are_not() -> None:
    raw = {
        "tool_response": {
            "function_responses": [
                {"id": "1", "response": {"snake_key": {"inner_key": 1}}, "will_continue": True}
            ]
        },
        "setup": {
            "tools": [
                {
                    "function_declarations": [
                        {
                            "parameters": {
                                "properties": {
                                    "first_name": {"max_length": 3, "any_of": [{"min_length": 1}]}
                                },
                                "defs": {"my_def": {"type": "STRING"}},
                                "default": {"keep_me": 1},
                                "example": {"keep_me": 2},
                            },
                            "parameters_json_schema": {"additional_properties": False},
                            "response_json_schema": {"some_key": 1},
                        }
                    ]
                }
            ]
        },
        "client_content": {"turns": [{"parts": [{"function_call": {"args": {"a_b": 1}}}]}]},
    }
    assert normalise(raw) == {
        "toolResponse": {
            "functionResponses": [
                {"id": "1", "response": {"snake_key": {"inner_key": 1}}, "willContinue": True}
            ]
        },
        "setup": {
            "tools": [
                {
                    "functionDeclarations": [
                        {
                            "parameters": {
                                "properties": {
                                    "first_name": {"maxLength": 3, "anyOf": [{"minLength": 1}]}
                                },
                                "defs": {"my_def": {"type": "STRING"}},
                                "default": {"keep_me": 1},
                                "example": {"keep_me": 2},
                            },
                            "parametersJsonSchema": {"additional_properties": False},
                            "responseJsonSchema": {"some_key": 1},
                        }
                    ]
                }
            ]
        },
        "clientContent": {"turns": [{"parts": [{"functionCall": {"args": {"a_b": 1}}}]}]},
    }
    assert camel_case("prebuilt_voice_config") == "prebuiltVoiceConfig"
    assert camel_case("alreadyCamel") == "alreadyCamel"
    assert camel_case("_private") == "_private"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (base64.b64encode(b"\xff\xd8\xff\xfe").decode(), b"\xff\xd8\xff\xfe"),
        ("_9j_", b"\xff\xd8\xff"),  # URL-safe, as the SDK sends
        ("_9j__g", b"\xff\xd8\xff\xfe"),  # URL-safe without padding
        ("AQI", b"\x01\x02"),
        ("", b""),
        ("***", None),
        ("A", None),
        (42, None),
        ('AQ"}', None),
    ],
)
def test_base64_in_both_alphabets(text: Any, expected: bytes | None) -> None:
    assert decode_base64(text) == expected


def test_small_wire_helpers() -> None:
    assert [parse_int(v) for v in (25600, "25600", " 7 ", 3.0, "x", True, None)] == [
        25600,
        25600,
        7,
        3,
        None,
        None,
        None,
    ]
    assert [duration_text(s) for s in (1.0, 0.5, 9.5, 60, -1)] == [
        "1s",
        "0.5s",
        "9.5s",
        "60s",
        "0s",
    ]
    long = "é" * 100
    assert len(fit_reason(long).encode()) <= 123
    assert fit_reason(long).endswith("...")
    assert fit_reason("short") == "short"
    with pytest.raises(ValueError, match="123 bytes"):
        Close(1011, "x" * 124)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ([], "Expected an object"),
        ({}, "exactly one of"),
        ({"setup": {}, "clientContent": {}}, "exactly one of"),
        ({"server_content": {}}, 'Unknown name "serverContent"'),
    ],
)
def test_a_client_message_has_exactly_one_known_field(raw: Any, reason: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        client_message(raw)
    assert caught.value.code == 1007
    assert reason in caught.value.reason
    assert client_message({"realtime_input": {"text": "x"}}) == ("realtimeInput", {"text": "x"})


def test_echo_frames_are_the_json_of_model_audio() -> None:
    data = base64.b64encode(b"\x01\x02\x03").decode()
    assert orjson.loads(echo_frame(data)) == model_audio(data)
    big = "A" * 2_000_000
    pieces = [orjson.loads(f) for f in echo_frames(big)]
    assert [
        len(p["serverContent"]["modelTurn"]["parts"][0]["inlineData"]["data"]) for p in pieces
    ] == [
        960_000,
        960_000,
        80_000,
    ]
    usage = usage_metadata(prompt_text=3, prompt_audio=0, response=5, response_modality="AUDIO")
    assert usage == {
        "promptTokenCount": 3,
        "responseTokenCount": 5,
        "totalTokenCount": 8,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 3}],
        "responseTokensDetails": [{"modality": "AUDIO", "tokenCount": 5}],
    }


# -- setup ------------------------------------------------------------------------------------


def test_setup_defaults_and_options() -> None:
    plain = parse_setup({"model": "models/gemini-live-2.5-flash-preview"})
    assert (plain.modality, plain.resumption, plain.handle) == ("AUDIO", False, None)
    assert (plain.automatic_activity, plain.interrupts, plain.silence_duration_ms) == (
        True,
        True,
        None,
    )
    assert (plain.input_transcription, plain.output_transcription) == (False, False)
    assert plain.model_id == "gemini-live-2.5-flash-preview"
    full = parse_setup(
        normalise(
            {
                "model": "models/m",
                "generation_config": {"response_modalities": ["text"]},
                "session_resumption": {"handle": "h1"},
                "input_audio_transcription": {},
                "output_audio_transcription": {},
                "realtime_input_config": {
                    "automatic_activity_detection": {
                        "disabled": True,
                        "silence_duration_ms": "250",
                    },
                    "activity_handling": "NO_INTERRUPTION",
                },
                "tools": [{"function_declarations": [{"name": "a"}, {"name": "b"}]}],
            }
        )
    )
    assert (full.modality, full.resumption, full.handle) == ("TEXT", True, "h1")
    assert (full.automatic_activity, full.interrupts, full.silence_duration_ms) == (
        False,
        False,
        250,
    )
    assert (full.input_transcription, full.output_transcription) == (True, True)
    assert full.function_names == ("a", "b")
    assert parse_setup({"model": "models/m", "sessionResumption": {"handle": ""}}).handle is None


@pytest.mark.parametrize(
    ("setup", "reason"),
    [
        ({}, "setup.model must be"),
        ({"model": "gemini-2.0"}, "setup.model must be"),
        ({"model": "models/"}, "setup.model must be"),
        ({"model": "models/m", "generationConfig": {"responseModalities": []}}, "Exactly one"),
        ({"model": "models/m", "generationConfig": {"responseModalities": ["IMAGE"]}}, "IMAGE"),
        (
            {
                "model": "models/gemini-2.5-flash-native-audio-preview-12-2025",
                "generationConfig": {"responseModalities": ["TEXT"]},
            },
            "gemini-2.5-flash-native-audio-preview-12-2025 does not support TEXT",
        ),
        ({"model": "models/m", "generationConfig": []}, "Expected an object"),
    ],
)
def test_bad_setups_are_refused_with_1007(setup: dict[str, Any], reason: str) -> None:
    with pytest.raises(ProtocolError) as caught:
        parse_setup(setup)
    assert caught.value.code == 1007
    assert reason in caught.value.reason


def test_a_context_update_replaces_instructions_and_tools() -> None:
    setup = {"model": "models/m", "tools": [{"functionDeclarations": [{"name": "a"}]}]}
    update = {"systemInstruction": {"parts": [{"text": "new"}]}, "tools": {"tools": []}}
    assert apply_context_update(setup, update) == {
        "model": "models/m",
        "tools": [],
        "systemInstruction": {"parts": [{"text": "new"}]},
    }
    assert setup["tools"]  # not changed in place


# -- routing, tools, memory --------------------------------------------------------------------


def test_arguments_and_envelopes() -> None:
    assert tool_args('{"city":"Paris"}') == {"city": "Paris"}
    assert tool_args(BAD_JSON_ARGUMENTS) == {"x": None}
    assert tool_args("[1, 2]") == {"value": [1, 2]}
    assert envelope_of({"output": {"temp": 1}}) == {"temp": 1}
    assert envelope_of({"output": "sunny"}) == {"output": "sunny"}
    assert envelope_of({"output": {"a": 1}, "extra": 2}) == {"output": {"a": 1}, "extra": 2}
    assert envelope_of({"error": "boom"}) == {"error": "boom"}


def test_directives_come_before_the_brain() -> None:
    brain = LocalBrain()
    assert decide(TextInput("/drop Hi there"), brain) == SpeechPlan("Hi there", drop_after=2)
    assert decide(TextInput("/goaway"), brain) == GoAwayPlan(1.0)
    assert decide(TextInput("/hang"), brain) == HangPlan()
    assert decide(TextInput("/fail"), brain) == FailPlan(1011, "Internal error occurred")
    assert decide(TextInput("/error quota"), brain) == FailPlan(1011, "quota")
    assert decide(TextInput("/slow 5 hi"), brain) == SpeechPlan("hi", delay_ms=5)
    assert decide(UtteranceInput(420), brain) == SpeechPlan("You said: audio:420ms")
    assert decide(NothingInput(), brain) == SpeechPlan(LISTENING)
    calls = decide(TextInput("/tool f {}"), brain)
    assert isinstance(calls, CallsPlan)
    assert calls.calls == (ToolCall("call_1", "f", "{}"),)


def test_a_tool_batch_collects_answers_in_any_order() -> None:
    store = SessionStore()
    memory = store.new_session()
    batch = ToolBatch(
        issue_calls(memory.counters, [ToolCall("call_1", "a", "{}"), ToolCall("call_2", "b", "x")])
    )
    assert batch.ids == ("function-call-1", "function-call-2")
    assert batch.wire()[1] == {"id": "function-call-2", "name": "b", "args": {"x": None}}
    assert batch.answer("function-call-2", {"output": {"n": 2}})[0] is Answer.ACCEPTED
    assert not batch.complete
    assert batch.unanswered == ["function-call-1"]
    assert batch.answer("function-call-2", {})[0] is Answer.REPEATED
    assert batch.answer("function-call-9", {})[0] is Answer.UNKNOWN
    assert batch.answer(None, {})[0] is Answer.UNKNOWN
    assert batch.answer("function-call-1", {"error": "no"})[0] is Answer.ACCEPTED
    assert batch.complete
    assert batch.results() == [("call_1", "a", {"error": "no"}), ("call_2", "b", {"n": 2})]

    history: list[dict[str, Any]] = [
        {"role": "model", "parts": [{"functionCall": {"id": "function-call-1"}}]},
        {"role": "model", "parts": [{"text": "hi"}, {"functionCall": {"id": "function-call-2"}}]},
    ]
    forget_calls(history, {"function-call-1", "function-call-2"})
    assert history == [{"role": "model", "parts": [{"text": "hi"}]}]


def test_handles_restore_snapshots_and_ids_stay_unique() -> None:
    store = SessionStore()
    memory = store.new_session()
    memory.history.append({"role": "user", "parts": [{"text": "one"}]})
    memory.brain.reply_to_text("/tool f {}")
    first = store.issue(memory)
    memory.history.append({"role": "user", "parts": [{"text": "after"}]})
    second = store.issue(memory)
    assert first != second
    assert set(store.handles) == {first, second}
    restored = store.restore(first)
    assert restored is not None
    assert restored.history == [{"role": "user", "parts": [{"text": "one"}]}]
    assert restored.brain is not memory.brain
    assert restored.brain.open_call_ids == ("call_1",)
    restored.history.append({"role": "user", "parts": [{"text": "changed"}]})
    again = store.restore(first)
    assert again is not None
    assert len(again.history) == 1  # one handle resumes twice, from the same point
    assert memory.counters.next_call_id() == "function-call-1"
    assert again.counters.next_call_id() == "function-call-2"  # shared by the session
    assert store.restore("unknown") is None
    assert store.new_session().number == 2
    assert store.handles[first].session == 1


# -- audio input and speech ------------------------------------------------------------------


def test_server_vad_and_manual_activity() -> None:
    assert [pcm_rate(m) for m in ("audio/pcm;rate=24000", "audio/pcm", "audio/wav", None)] == [
        24000,
        16000,
        None,
        None,
    ]
    vad = AudioInput(silence_duration_ms=200)
    events = vad.feed(tone(440.0, 300, 16000) + silence(250, 16000))
    assert events == [SpeechStarted(), UtteranceEnded(300)]
    assert vad.heard_ms == 550
    assert vad.feed(tone(440.0, 200, 24000), 24000) == [SpeechStarted()]
    assert vad.speaking
    assert vad.stream_end() == [UtteranceEnded(200)]
    assert vad.stream_end() == []

    manual = AudioInput(automatic=False)
    assert manual.feed(tone(440.0, 100, 16000)) == []
    assert manual.activity_end() is None
    manual.activity_start()
    assert manual.in_activity
    manual.feed(silence(120, 16000))
    assert manual.activity_end() == UtteranceEnded(120)
    assert not manual.in_activity


def test_speech_runs_step_by_step() -> None:
    run = SpeechRun(SpeechPlan("Hi there"), modality="AUDIO", output_transcription=True)
    steps = []
    while (step := run.next_step()) is not None:
        steps.append(step)
    assert len(steps) == 10  # 5 chunks of 20 ms per word
    assert {step.audio_s for step in steps} == {0.02}
    first = [a.message for a in steps[0].actions if isinstance(a, Send)]
    assert first[0] == {"serverContent": {"outputTranscription": {"text": "Hi"}}}
    chunk = first[1]["serverContent"]["modelTurn"]["parts"][0]["inlineData"]["data"]
    assert base64.b64decode(chunk) == plan_speech("Hi", 24000)[0].chunks[0]
    assert (run.spoken, run.audio_ms, run.response_tokens) == ("Hi there", 200, 6)

    text = SpeechRun(SpeechPlan("a b c", delay_ms=30), modality="TEXT", output_transcription=True)
    wait = text.next_step()
    assert wait is not None
    assert wait.wait_s == 0.03
    words = [text.next_step() for _ in range(3)]
    assert [w.actions[0].message for w in words if w and isinstance(w.actions[0], Send)] == [
        {"serverContent": {"modelTurn": {"role": "model", "parts": [{"text": t}]}}}
        for t in ("a", " b", " c")
    ]
    assert text.next_step() is None

    drop = SpeechRun(SpeechPlan("a b", drop_after=2), modality="TEXT", output_transcription=False)
    assert drop.next_step() is not None
    last = drop.next_step()
    assert last is not None
    assert closes(list(last.actions)) == [(1011, "Internal error occurred")]

    hang = SpeechRun(HangPlan(), modality="AUDIO", output_transcription=False)
    step = hang.next_step()
    assert step is not None
    assert step.hang
    hang.halt()
    assert hang.next_step() is None


# -- the session ------------------------------------------------------------------------------


def test_setup_must_come_first_and_only_first() -> None:
    session = FakeGeminiSession()
    assert closes(session.handle(say("hi"))) == [
        (1007, "The first message must be setup, got clientContent.")
    ]
    assert session.closed
    assert session.handle(TEXT_SETUP) == []  # closed: nothing more
    session = started()
    assert closes(session.handle(TEXT_SETUP)) == [
        (1007, "setup must be the first message, and only the first.")
    ]
    hung = FakeGeminiSession(FakeGeminiOptions(setup_complete=False))
    assert hung.handle(TEXT_SETUP) == []
    assert hung.phase is Phase.SETUP_HANG
    assert hung.handle(say("hi")) == []
    assert hung.ignored == ["clientContent before setupComplete"]


def test_a_text_turn_and_its_resumption_updates() -> None:
    session = started(setup=RESUMABLE)
    messages = drain(session, session.handle(say("hello")))
    assert describe(messages) == [
        "not-resumable",
        "modelTurn",
        "modelTurn",
        "modelTurn",
        "generationComplete",
        "turnComplete",
        "handle",
    ]
    assert text_of(messages) == "You said: hello"
    assert messages[-1]["sessionResumptionUpdate"]["newHandle"] in session.store.handles
    assert session.phase is Phase.IDLE
    assert session.history == [
        {"role": "user", "parts": [{"text": "hello"}]},
        {"role": "model", "parts": [{"text": "You said: hello"}]},
    ]
    # turnComplete false only buffers; the next turnComplete answers the newest user text
    assert session.handle(say("first", turn_complete=False)) == []
    assert session.handle(say("second", turn_complete=False)) == []
    answer = drain(session, session.handle({"clientContent": {"turnComplete": True}}))
    assert text_of(answer) == "You said: second"
    listening = drain(session, session.handle({"clientContent": {"turnComplete": True}}))
    assert text_of(listening) == LISTENING


def test_tools_hold_the_turn_and_barge_in_cancels_them() -> None:
    declared = [{"functionDeclarations": [{"name": "a"}, {"name": "b"}]}]
    session = started(setup={"setup": {**TEXT_SETUP["setup"], "tools": declared}})
    asked = drain(session, session.handle(say('/tools a {} ;; b {"n":1}')))
    assert asked == [
        {
            "toolCall": {
                "functionCalls": [
                    {"id": "function-call-1", "name": "a", "args": {}},
                    {"id": "function-call-2", "name": "b", "args": {"n": 1}},
                ]
            }
        }
    ]
    assert session.phase is Phase.TOOLS_PENDING
    response = {"id": "function-call-2", "name": "b", "response": {"output": {"ok": 1}}}
    assert session.handle({"toolResponse": {"functionResponses": [response]}}) == []
    assert session.phase is Phase.TOOLS_PENDING
    actions = session.handle(say("stop"))
    messages = drain(session, actions)
    assert describe(messages)[:3] == ["interrupted", "toolCallCancellation", "turnComplete"]
    assert messages[1] == {"toolCallCancellation": {"ids": ["function-call-1"]}}
    assert text_of(messages) == "You said: stop"
    assert all(
        "functionCall" not in part or part["functionCall"]["id"] != "function-call-1"
        for turn in session.history
        for part in turn["parts"]
    )
    late = {"id": "function-call-1", "name": "a", "response": {}}
    assert session.handle({"toolResponse": {"functionResponses": [late]}}) == []
    assert session.ignored == ["toolResponse for unknown or cancelled id 'function-call-1'"]

    strict = started(FakeGeminiOptions(strict_tool_ids=True))
    assert closes(strict.handle({"toolResponse": {"functionResponses": [late]}})) == [
        (1008, "Requested entity was not found")
    ]
    bad = started()
    drain(bad, bad.handle(say("/tool a {}")))
    not_object = {"id": "function-call-1", "name": "a", "response": [1]}
    assert closes(bad.handle({"toolResponse": {"functionResponses": [not_object]}}))[0][0] == 1007


def test_an_interrupted_generation_is_halted_first() -> None:
    session = started(setup={"setup": {"model": "models/m", "sessionResumption": {}}})
    begun = session.handle(say("/say one two three four"))
    generation = session.generation
    assert isinstance(begun[-1], Begin)
    first = session.next_step(generation)
    assert first is not None
    cut = session.handle({"realtimeInput": {"text": "wait"}})
    assert cut[0] == Halt(generation)
    messages = drain(session, cut)
    assert describe(messages)[:4] == ["interrupted", "turnComplete", "handle", "not-resumable"]
    assert session.next_step(generation) is None
    assert session.history[1] == {"role": "model", "parts": [{"text": "one"}]}
    assert session.history[2] == {"role": "user", "parts": [{"text": "wait"}]}


def test_without_interruption_the_newest_input_waits() -> None:
    setup = {"setup": {**TEXT_SETUP["setup"], "realtimeInputConfig": {}}}
    session = started(FakeGeminiOptions(interrupt_on_speech=False), setup)
    begun = session.handle(say("/say busy"))
    assert session.handle({"realtimeInput": {"text": "one"}}) == []
    assert session.handle({"realtimeInput": {"text": "two"}}) == []
    messages = drain(session, begun)
    assert "interrupted" not in describe(messages)
    assert text_of(messages) == "busyYou said: two"


def test_resumption_restores_and_unknown_handles_close_1008() -> None:
    store = SessionStore()
    first = FakeGeminiSession(store=store)
    drain(first, first.handle(RESUMABLE))
    messages = drain(first, first.handle(say("remember me")))
    handle = messages[-1]["sessionResumptionUpdate"]["newHandle"]
    second = FakeGeminiSession(store=store)
    resumed = {"setup": {**RESUMABLE["setup"], "sessionResumption": {"handle": handle}}}
    opened = drain(second, second.handle(resumed))
    assert describe(opened) == ["setupComplete", "handle"]
    assert second.resumed_from == handle
    assert second.history == first.history
    third = FakeGeminiSession(store=store)
    unknown = {"setup": {**RESUMABLE["setup"], "sessionResumption": {"handle": "nope"}}}
    assert closes(third.handle(unknown)) == [(1008, "Session not found")]


def test_go_away_and_closes() -> None:
    waiting = FakeGeminiSession()
    assert waiting.go_away(2.0) == [CloseAfter(2.0, 1001, "Connection lifetime reached (goAway).")]
    session = started()
    actions = session.go_away(0.5)
    assert actions[0] == Send({"goAway": {"timeLeft": "0.5s"}})
    assert isinstance(actions[1], CloseAfter)
    assert session.close(1001, "bye") == [Close(1001, "bye")]
    assert session.close(1001, "again") == []
    assert session.go_away(1.0) == []
    directive = started()
    messages = drain(directive, directive.handle(say("/goaway")))
    assert describe(messages) == ["goAway", "generationComplete", "turnComplete"]


def test_echo_sends_the_same_text_back_raw() -> None:
    session = started(FakeGeminiOptions(echo=True))
    data = base64.urlsafe_b64encode(tone(440.0, 100, 16000)).decode()
    audio = {"realtimeInput": {"audio": {"mimeType": "audio/pcm;rate=16000", "data": data}}}
    actions = session.handle(audio)
    assert actions == [SendRaw(echo_frame(data))]
    assert session.phase is Phase.IDLE  # loud audio, yet no VAD
    bad = {"realtimeInput": {"audio": {"data": 'x"y'}}}
    assert closes(session.handle(bad))[0][0] == 1007


def test_realtime_input_has_one_field_and_ignores_what_it_does_not_use() -> None:
    session = started()
    assert session.handle({"realtimeInput": {"video": {"data": "AAAA"}}}) == []
    assert (
        session.handle({"realtimeInput": {"audio": {"mimeType": "audio/x", "data": "AAAA"}}}) == []
    )
    assert session.handle({"realtimeInput": {"audioStreamEnd": True}}) == []
    assert session.handle({"contextUpdate": {"systemInstruction": {"parts": []}}}) == []
    assert session.setup["systemInstruction"] == {"parts": []}
    assert session.ignored == ["realtimeInput.video", "audio of type 'audio/x'"]
    two = {"realtimeInput": {"text": "a", "audioStreamEnd": True}}
    assert closes(session.handle(two))[0][0] == 1007


# -- TLS --------------------------------------------------------------------------------------


def test_the_certificate_is_made_once_and_remade_when_broken(tmp_path: Path) -> None:
    pair = ensure_certificate(tmp_path / "certs")
    cert_pem = pair.cert_file.read_bytes()
    cert = x509.load_pem_x509_certificate(cert_pem)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.IPAddress) == [ipaddress.IPv4Address("127.0.0.1")]
    assert names.get_values_for_type(x509.DNSName) == ["localhost"]
    assert pair.key_file.stat().st_mode & 0o777 == 0o600
    assert ensure_certificate(tmp_path / "certs").cert_file.read_bytes() == cert_pem  # reused
    pair.key_file.write_text("not a key")
    remade = ensure_certificate(tmp_path / "certs")
    assert remade.cert_file.read_bytes() != cert_pem
    assert sorted(p.name for p in (tmp_path / "certs").iterdir()) == ["cert.pem", "key.pem"]
