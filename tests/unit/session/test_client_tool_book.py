"""The pure parts of a session's client tools (``gateway.session.client_tools``): what a
declaration may not be once the session knows where it runs, how the model is told of them, the
arguments the client is shown, and the book of calls waiting for the client's answer."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.protocol import ClientToolDeclaration
from gateway.registry.provider_schemas import provider_schemas
from gateway.session.client_tools import (
    ClientToolBook,
    arguments_text,
    declarations_problem,
    model_declarations,
)
from gateway.toolrun import ArgumentError

PARAMETERS: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {"order": {"type": ["string", "null"]}},
    "required": ["order"],
    "additionalProperties": False,
}
LOOKUP = ClientToolDeclaration(name="lookup_order", description="An order.", parameters=PARAMETERS)
BELL = ClientToolDeclaration(name="ring_bell")


def test_sound_declarations_have_no_problem_on_any_provider() -> None:
    for provider in ("openai", "gemini", "chat", "local", None):
        assert declarations_problem([LOOKUP, BELL], ["get_current_time"], provider) is None


def test_the_name_of_a_registry_tool_the_user_may_use_is_taken() -> None:
    problem = declarations_problem([BELL, LOOKUP], ["lookup_order", "echo"], "openai")
    assert problem is not None
    assert (problem.at("client_tools"), problem.at("session.tools")) == (
        "client_tools[1].name",
        "session.tools[1].name",
    )
    assert problem.message.startswith("'lookup_order' is the name of one of the gateway's tools")


def test_parameters_must_be_json_schema() -> None:
    broken = ClientToolDeclaration(
        name="broken", parameters={"type": "object", "properties": {"a": {"type": 5}}}
    )
    problem = declarations_problem([broken], [], "openai")
    assert problem is not None
    assert problem.at("client_tools") == "client_tools[0].parameters"
    assert problem.message.startswith("is not a valid JSON Schema: ")


def test_a_schema_gemini_cannot_express_is_refused_on_gemini_only() -> None:
    rich = ClientToolDeclaration(
        name="rich", parameters={"type": "object", "patternProperties": {"^x": {}}}
    )
    problem = declarations_problem([rich], [], "gemini")
    assert problem is not None
    assert problem.message == (
        "holds what Gemini cannot express: keyword 'patternProperties' at parameters"
    )
    assert declarations_problem([rich], [], "openai") is None


def test_the_model_is_told_of_them_in_the_registrys_own_shapes() -> None:
    (declared,) = model_declarations([LOOKUP])
    assert (declared.name, declared.description, declared.background) == (
        "lookup_order",
        "An order.",
        False,
    )
    assert declared.provider_schemas == provider_schemas(
        "lookup_order", "An order.", PARAMETERS, False
    )
    realtime = declared.provider_schemas["openaiRealtime"]
    assert "$schema" not in realtime["parameters"]  # annotations stripped, as for the registry
    assert "confirmation_id" not in realtime["parameters"]["properties"]
    assert declared.provider_schemas["geminiSchema"]["parameters"]["properties"]["order"] == {
        "type": "STRING",
        "nullable": True,
    }


def test_arguments_are_shown_as_the_model_wrote_them() -> None:
    assert arguments_text('{"order": "A1"}') == '{"order": "A1"}'
    assert arguments_text("not json") == "not json"  # the client's tool, the client's problem
    assert arguments_text(None) == "{}"
    assert arguments_text(b'{"a":1}') == '{"a":1}'
    assert arguments_text({"order": "A1", "n": [1, 2]}) == '{"order":"A1","n":[1,2]}'


def test_arguments_beyond_every_calls_limits_are_refused() -> None:
    deep: dict[str, Any] = {}
    for _ in range(40):
        deep = {"x": deep}
    with pytest.raises(ArgumentError, match="nested deeper than 32"):
        arguments_text(deep)
    with pytest.raises(ArgumentError, match="larger than"):
        arguments_text("x" * (128 * 1024 + 1))


def test_a_call_is_answered_once() -> None:
    book = ClientToolBook([LOOKUP], timeout_s=60)
    assert book.declares("lookup_order")
    assert not book.declares("ring_bell")
    asked = book.ask("c1", "lookup_order", "r1", "{}", now=10.0)
    assert (asked.asked_at, asked.deadline) == (10.0, 70.0)
    assert book.is_waiting("c1")
    assert book.answer("c1") == asked
    assert not book.is_waiting("c1")
    assert book.answer("c1") == "call 'c1' was answered already"
    assert book.answer("c9") == ("no call of a client tool with id 'c9' is waiting for an answer")


def test_a_call_expires_at_its_deadline_and_says_so_to_a_late_answer() -> None:
    book = ClientToolBook([LOOKUP], timeout_s=2)
    book.ask("c1", "lookup_order", "r1", "{}", now=0.0)
    book.ask("c2", "lookup_order", "r1", "{}", now=1.0)
    assert book.due(1.999) == []
    (expired,) = book.due(2.0)
    assert expired.call_id == "c1"
    assert [call.call_id for call in book.waiting()] == ["c2"]
    assert book.answer("c1") == (
        "call 'c1' was not answered within 2 s: the model was told it timed out"
    )


def test_a_cancelled_call_needs_no_answer() -> None:
    book = ClientToolBook([LOOKUP])
    book.ask("c1", "lookup_order", "r1", "{}", now=0.0)
    assert book.cancel("c1", "was cancelled by the model") is not None
    assert book.cancel("c1", "again") is None
    assert book.answer("c1") == "call 'c1' was cancelled by the model"
    assert book.waiting() == []


def test_the_book_remembers_a_bounded_number_of_closed_calls() -> None:
    book = ClientToolBook([LOOKUP])
    for n in range(300):
        book.ask(f"c{n}", "lookup_order", "r1", "{}", now=0.0)
        book.answer(f"c{n}")
    assert book.answer("c299") == "call 'c299' was answered already"
    assert "is waiting for an answer" in str(book.answer("c0"))  # forgotten: just unknown
