"""The OpenAI Realtime fake follows ``tool_choice`` as the API does: the session's, or one
response's own (``response.create.response.tool_choice``) — ``none`` calls nothing, ``required``
calls a tool, a named function is the call. Pure (``FakeSession``)."""

from __future__ import annotations

from typing import Any

from fakes.openai_realtime.session import FakeSession
from fakes.openai_realtime.wire import Action, Begin, Send

TOOLS = [
    {"type": "function", "name": "get_weather", "parameters": {"type": "object"}},
    {"type": "function", "name": "lookup_order", "parameters": {"type": "object"}},
]


def drain(session: FakeSession, actions: list[Action]) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for action in actions:
        if isinstance(action, Send):
            events.append(action.event)
        elif isinstance(action, Begin):
            while (step := session.next_step(action.response_id)) is not None:
                events += drain(session, list(step.actions))
    return events


def configured(choice: Any) -> FakeSession:
    session = FakeSession()
    update = {"type": "realtime", "output_modalities": ["text"], "tools": TOOLS}
    session.handle({"type": "session.update", "session": {**update, "tool_choice": choice}})
    return session


def ask(session: FakeSession, text: str, response: dict[str, Any] | None = None) -> list[Any]:
    """A user message and a response; the calls the response made, as (name, arguments)."""
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}
    drain(session, session.handle({"type": "conversation.item.create", "item": item}))
    create: dict[str, Any] = {"type": "response.create"}
    if response is not None:
        create["response"] = response
    events = drain(session, session.handle(create))
    (done,) = [event for event in events if event["type"] == "response.done"]
    return [
        (item["name"], item["arguments"])
        for item in done["response"]["output"]
        if item["type"] == "function_call"
    ]


def test_none_calls_nothing_even_when_asked_to() -> None:
    assert ask(configured("none"), "/tool get_weather {}") == []


def test_required_calls_the_first_function_for_a_prompt_that_calls_none() -> None:
    assert ask(configured("required"), "hello") == [("get_weather", "{}")]


def test_a_named_function_is_the_call() -> None:
    forced = configured({"type": "function", "name": "lookup_order"})
    assert ask(forced, "/tool get_weather {}") == [("lookup_order", "{}")]


def test_one_response_may_choose_otherwise_than_the_session() -> None:
    session = configured("required")
    assert ask(session, "hello", {"tool_choice": "auto"}) == []
    assert ask(session, "/tool get_weather {}", {"tool_choice": "none"}) == []
    assert ask(session, "hello") == [("get_weather", "{}")]
