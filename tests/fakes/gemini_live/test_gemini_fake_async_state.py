"""Asynchronous (NON_BLOCKING) function calling on the pure ``FakeGeminiSession``, step by step.

Where timing could matter over a socket (a result that comes while a word is being said, a
barge-in while results wait), the session is driven directly: ``handle`` a message, then pull
the steps of the generations it began (``deliver``), as the async shell would.
"""

from __future__ import annotations

from typing import Any

from fakes.gemini_live.options import FakeGeminiOptions
from fakes.gemini_live.session import FakeGeminiSession, Phase
from fakes.gemini_live.wire import Action, Begin, Close, Send

TEXT_SETUP: dict[str, Any] = {
    "model": "models/gemini-live-2.5-flash-preview",
    "generationConfig": {"responseModalities": ["TEXT"]},
    "tools": [
        {
            "functionDeclarations": [
                {"name": "slow", "behavior": "NON_BLOCKING"},
                {"name": "fast", "behavior": "BLOCKING"},
            ]
        }
    ],
}
ACK = "I've started slow; I'll tell you when it's done."


def describe(messages: list[dict[str, Any]]) -> list[str]:
    """The ``serverContent`` fields (consecutive ``modelTurn``s once), else the top-level key."""
    out: list[str] = []
    for message in messages:
        name = "+".join(message["serverContent"]) if "serverContent" in message else ""
        name = name or next(iter(message))
        if name != "modelTurn" or out[-1:] != [name]:
            out.append(name)
    return out


def texts(messages: list[dict[str, Any]]) -> str:
    return "".join(
        part["text"]
        for m in messages
        if "modelTurn" in m.get("serverContent", {})
        for part in m["serverContent"]["modelTurn"]["parts"]
    )


def sent(actions: list[Action]) -> list[dict[str, Any]]:
    return [action.message for action in actions if isinstance(action, Send)]


def deliver(session: FakeGeminiSession, actions: list[Action]) -> list[dict[str, Any]]:
    """Every message of the actions, delivering the generations they begin to their end."""
    messages = []
    for action in actions:
        if isinstance(action, Send):
            messages.append(action.message)
        elif isinstance(action, Begin):
            while (step := session.next_step(action.generation)) is not None:
                messages += deliver(session, list(step.actions))
    return messages


def response(call_id: str, **extra: Any) -> dict[str, Any]:
    entry = {"id": call_id, "name": "slow", "response": {"output": {"r": 1}}, **extra}
    return {"toolResponse": {"functionResponses": [entry]}}


def test_a_result_due_while_speaking_waits_for_every_word() -> None:
    session = FakeGeminiSession()
    assert sent(session.handle({"setup": TEXT_SETUP})) == [{"setupComplete": {}}]
    actions = session.handle({"realtimeInput": {"text": "/tool slow {}"}})
    assert sent(actions)[0]["toolCall"]["functionCalls"][0]["id"] == "function-call-1"
    begun = actions[-1]
    assert isinstance(begun, Begin)
    first = session.next_step(begun.generation)  # one word said
    assert first is not None
    assert session.handle(response("function-call-1")) == []  # WHEN_IDLE: waits
    assert session.handle(response("function-call-9")) == []  # unknown: never generates
    assert session.due == [("call_1", "slow", {"r": 1})]
    rest = deliver(session, [begun])
    assert describe(rest) == [
        "modelTurn",
        "generationComplete",
        "turnComplete",
        "modelTurn",
        "generationComplete",
        "turnComplete",
    ]
    said = texts(sent(list(first.actions)) + rest)
    assert said == ACK + 'Tool results: slow={"r":1}'
    assert session.due == []
    assert session.ignored == ["toolResponse for unknown or cancelled id 'function-call-9'"]


def test_a_barge_in_keeps_the_results_due_and_an_interrupt_keeps_waiting_input() -> None:
    session = FakeGeminiSession()
    session.handle({"setup": TEXT_SETUP})
    deliver(session, session.handle({"realtimeInput": {"text": "/tools slow {} ;; slow {}"}}))
    assert list(session.open_calls) == ["function-call-1", "function-call-2"]
    hang = session.handle({"realtimeInput": {"text": "/hang"}})
    assert isinstance(hang[-1], Begin)
    assert session.handle(response("function-call-1")) == []  # WHEN_IDLE: the turn hangs on
    cut = deliver(session, session.handle({"realtimeInput": {"text": "hi"}}))
    assert describe(cut) == [
        "interrupted",
        "turnComplete",
        "modelTurn",
        "generationComplete",
        "turnComplete",
        "modelTurn",
        "generationComplete",
        "turnComplete",
    ]
    assert texts(cut) == 'You said: hiTool results: slow={"r":1}'
    assert list(session.open_calls) == ["function-call-2"]  # never cancelled

    quiet = FakeGeminiSession(FakeGeminiOptions(interrupt_on_speech=False))
    quiet.handle({"setup": TEXT_SETUP})  # a user input waits for the turn to end
    deliver(quiet, quiet.handle({"realtimeInput": {"text": "/tool slow {}"}}))
    assert isinstance(quiet.handle({"realtimeInput": {"text": "/hang"}})[-1], Begin)
    assert quiet.handle({"realtimeInput": {"text": "waiting"}}) == []
    cut = deliver(quiet, quiet.handle(response("function-call-1", scheduling="INTERRUPT")))
    assert describe(cut)[:2] == ["interrupted", "turnComplete"]
    assert texts(cut) == 'Tool results: slow={"r":1}You said: waiting'
    assert list(quiet.open_calls) == []


def test_a_context_update_checks_and_replaces_the_behaviors() -> None:
    session = FakeGeminiSession()
    session.handle({"setup": TEXT_SETUP})
    update = {"tools": {"tools": [{"functionDeclarations": [{"name": "slow"}]}]}}
    session.handle({"contextUpdate": update})
    assert session.config is not None
    assert session.config.non_blocking == frozenset()
    asked = deliver(session, session.handle({"realtimeInput": {"text": "/tool slow {}"}}))
    assert session.phase is Phase.TOOLS_PENDING  # slow is no longer declared NON_BLOCKING
    assert describe(asked) == ["toolCall"]
    bad = {"tools": {"tools": [{"functionDeclarations": [{"name": "x", "behavior": "ASYNC"}]}]}}
    closes = [a for a in session.handle({"contextUpdate": bad}) if isinstance(a, Close)]
    assert [(c.code, c.reason) for c in closes] == [
        (
            1007,
            "Invalid value at 'context_update.tools.tools[0].function_declarations[0].behavior' "
            "(Behavior), 'ASYNC'",
        )
    ]
