"""The client's own tools on the compatible endpoint, pure: ``session.tools`` made into the
session's ``client_tools`` (each refusal an ``invalid_value`` naming the field), and the
translator's book of the calls it showed as ``function_call`` items: each takes one output,
and a call the gateway gave up on is an ``error`` that says why."""

from __future__ import annotations

from typing import Any

import pytest
from compat_kit import done, frame, sdk_parse_all, started, translator, typed

from gateway.edges.realtime.client_items import FunctionCallOutput
from gateway.edges.realtime.client_tools import client_tools_of
from gateway.edges.realtime.client_wire import ItemCreate, decode_client_event
from gateway.edges.realtime.errors import CompatError
from gateway.edges.realtime.session_config import FunctionTool
from gateway.edges.realtime.translate import Translator
from gateway.protocol import ClientToolDeclaration
from gateway.session.client_tools import DeclarationProblem

PARAMETERS: dict[str, Any] = {"type": "object", "properties": {"order": {"type": "string"}}}


def accept_all(_: Any) -> None:
    return None


def refused(tools: list[FunctionTool], check: Any = accept_all) -> CompatError:
    with pytest.raises(CompatError) as caught:
        client_tools_of(tools, check)
    return caught.value


def test_function_tools_become_the_sessions_client_tools() -> None:
    tools = [
        FunctionTool(name="lookup_order", description="An order.", parameters=PARAMETERS),
        FunctionTool(name="ring_bell"),
        FunctionTool(name="wave", parameters={}),  # as some clients write "no arguments"
    ]
    declared = client_tools_of(tools, accept_all)
    assert declared[0] == ClientToolDeclaration(
        name="lookup_order", description="An order.", parameters=PARAMETERS
    )
    nothing = {"type": "object", "properties": {}}
    assert [(d.description, d.parameters) for d in declared[1:]] == [("", nothing)] * 2


@pytest.mark.parametrize(
    ("tools", "param"),
    [
        ([FunctionTool(name="Lookup")], "session.tools[0].name"),
        (
            [FunctionTool(name="ab"), FunctionTool(name="cd", parameters={"type": "array"})],
            "session.tools[1].parameters",
        ),
        ([FunctionTool(name="ab"), FunctionTool(name="ab")], "session.tools[1].name"),
        ([FunctionTool(name=f"tool_{n}") for n in range(33)], "session.tools"),
    ],
)
def test_a_tool_that_breaks_a_rule_is_invalid_value_naming_the_field(
    tools: list[FunctionTool], param: str
) -> None:
    error = refused(tools)
    assert (error.code, error.param, error.type) == (
        "invalid_value",
        param,
        "invalid_request_error",
    )
    assert error.message.startswith(f"'{param}' ")


def test_the_sessions_own_check_names_the_field_too() -> None:
    def clash(declared: Any) -> DeclarationProblem:
        assert [d.name for d in declared] == ["lookup_order", "get_current_time"]
        return DeclarationProblem(1, "name", "'get_current_time' is taken")

    tools = [FunctionTool(name="lookup_order"), FunctionTool(name="get_current_time")]
    error = refused(tools, clash)
    assert (error.param, error.message) == (
        "session.tools[1].name",
        "'session.tools[1].name' 'get_current_time' is taken",
    )


def asked(compat: Translator, call_id: str = "call_X") -> None:
    events = compat.on_event(started())
    events += compat.on_event(
        typed(
            {
                "type": "client_tool.requested",
                "response_id": "r1",
                "call_id": call_id,
                "name": "lookup_order",
                "arguments": "{}",
            }
        )
    )
    events += compat.on_event(done("completed", ""))
    sdk_parse_all(events)


def output(call_id: str = "call_X") -> ItemCreate:
    item = {"type": "function_call_output", "call_id": call_id, "output": "shipped"}
    event = decode_client_event(frame({"type": "conversation.item.create", "item": item}))
    assert isinstance(event, ItemCreate)
    assert isinstance(event.item, FunctionCallOutput)
    return event


def test_a_call_takes_one_output() -> None:
    compat = translator()
    asked(compat)
    sdk_parse_all(compat.create_item(output()))
    with pytest.raises(CompatError) as caught:
        compat.create_item(output())
    assert (caught.value.code, caught.value.message) == (
        "invalid_tool_call_id",
        "Tool call ID 'call_X' was answered already.",
    )


@pytest.mark.parametrize(
    ("reason", "code", "why"),
    [
        ("timeout", "client_tool_timeout", "was not answered in time"),
        ("cancelled", "client_tool_cancelled", "was cancelled by the model"),
    ],
)
def test_a_call_the_gateway_gave_up_on_is_an_error_and_takes_no_output(
    reason: str, code: str, why: str
) -> None:
    compat = translator()
    asked(compat)
    cancelled = {
        "type": "client_tool.cancelled",
        "call_id": "call_X",
        "name": "lookup_order",
        "reason": reason,
    }
    (event,) = compat.on_event(typed(cancelled))
    sdk_parse_all([event])
    assert event["error"]["code"] == code
    assert event["error"]["message"].startswith(f"The call 'call_X' of 'lookup_order' {why}")
    with pytest.raises(CompatError) as caught:
        compat.create_item(output())
    assert caught.value.message == f"Tool call ID 'call_X' {why}."
    assert compat.on_event(typed({**cancelled, "call_id": "call_never_made"})) == []
