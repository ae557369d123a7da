"""The client-tools extension of the protocol (docs/protocol.md 10.16): declarations in
``session.start``, ``client_tool.output`` from the client, ``client_tool.requested`` and
``client_tool.cancelled`` from the gateway; every rule is an ``invalid_event`` naming the field."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gateway.protocol import (
    MAX_CLIENT_TOOL_BYTES,
    MAX_CLIENT_TOOL_OUTPUT_BYTES,
    MAX_CLIENT_TOOLS,
    ClientToolCancelled,
    ClientToolDeclaration,
    ClientToolOutput,
    ClientToolRequested,
    ErrorCode,
    JsonClientEvent,
    Mode,
    ProtocolError,
    SessionStart,
    decode_text,
    encode,
    encode_client_event,
)

LOOKUP = {
    "name": "lookup_order",
    "description": "Look an order up by its number.",
    "parameters": {"type": "object", "properties": {"order": {"type": "string"}}},
}


def decode(message: dict[str, Any]) -> JsonClientEvent:
    return decode_text(orjson.dumps(message))


def start(*tools: Any) -> dict[str, Any]:
    return {"type": "session.start", "mode": "text", "event_id": "s1", "client_tools": list(tools)}


def refused(message: dict[str, Any]) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        decode(message)
    return caught.value


def test_declarations_are_decoded_and_written_back_the_same() -> None:
    event = decode(start(LOOKUP, {"name": "ring_bell"}))
    assert isinstance(event, SessionStart)
    lookup, bell = event.client_tools
    assert lookup == ClientToolDeclaration(**LOOKUP)
    # Without description or parameters: an empty description, a tool that takes nothing.
    assert (bell.description, bell.parameters) == ("", {"type": "object", "properties": {}})
    assert decode_text(encode_client_event(event)) == event


def test_without_client_tools_there_are_none() -> None:
    event = decode({"type": "session.start", "mode": "text"})
    assert isinstance(event, SessionStart)
    assert event.client_tools == ()
    assert "client_tools" not in orjson.loads(encode_client_event(event))


@pytest.mark.parametrize(
    ("tool", "field"),
    [
        ({"name": "Lookup"}, "client_tools[0].name"),  # the registry's names: lower case
        ({"name": "x"}, "client_tools[0].name"),
        ({"name": "look-up"}, "client_tools[0].name"),
        ({"description": "no name"}, "client_tools[0].name"),
        ({"name": "lookup", "description": 5}, "client_tools[0].description"),
        ({"name": "lookup", "parameters": []}, "client_tools[0].parameters"),
        ({"name": "lookup", "parameters": {"type": "string"}}, "client_tools[0].parameters"),
        ("lookup", "client_tools[0]"),
    ],
)
def test_a_declaration_that_breaks_a_rule_names_its_field(tool: Any, field: str) -> None:
    error = refused(start(tool))
    assert error.code is ErrorCode.INVALID_EVENT
    assert error.message.startswith(f"session.start: '{field}' ")
    assert error.event_id == "s1"


def test_a_declaration_larger_than_the_limit_is_refused() -> None:
    big = {"type": "object", "description": "x" * MAX_CLIENT_TOOL_BYTES}
    error = refused(start(LOOKUP, {"name": "big_tool", "parameters": big}))
    assert error.message.startswith("session.start: 'client_tools[1]' must be at most 16384 bytes")


def test_the_list_is_bounded_and_names_are_unique() -> None:
    many = [{"name": f"tool_{n}"} for n in range(MAX_CLIENT_TOOLS + 1)]
    assert "at most 32 tools" in refused(start(*many)).message
    assert decode(start(*many[:MAX_CLIENT_TOOLS]))  # exactly the limit is fine
    twice = refused(start(LOOKUP, {"name": "ring_bell"}, {"name": "lookup_order"}))
    assert twice.message == (
        "session.start: 'client_tools[2].name' 'lookup_order' is declared twice"
    )


def test_a_declaration_built_directly_checks_itself() -> None:
    with pytest.raises(ProtocolError, match=r"client_tools\.name"):
        ClientToolDeclaration(name="Nope")
    with pytest.raises(ProtocolError, match="declared twice"):
        SessionStart(mode=Mode.TEXT, client_tools=(ClientToolDeclaration(name="ab"),) * 2)


def test_client_tools_cannot_change_in_session_update() -> None:
    error = refused({"type": "session.update", "mode": "text", "client_tools": [LOOKUP]})
    assert error.code is ErrorCode.INVALID_EVENT
    assert error.message.startswith("session.update: 'client_tools' can only be declared in")


def test_client_tool_output_round_trip_and_its_rules() -> None:
    message = {"type": "client_tool.output", "call_id": "call_1", "output": '{"a":1}'}
    event = decode({**message, "event_id": "o1"})
    assert event == ClientToolOutput(call_id="call_1", output='{"a":1}', event_id="o1")
    assert decode_text(encode_client_event(event)) == event
    assert decode({**message, "output": ""}) == ClientToolOutput(call_id="call_1", output="")
    for bad, field in [
        ({**message, "call_id": ""}, "call_id"),
        ({"type": "client_tool.output", "output": "x"}, "call_id"),
        ({"type": "client_tool.output", "call_id": "c"}, "output"),
        ({**message, "output": {"a": 1}}, "output"),
    ]:
        assert f"client_tool.output: '{field}'" in refused(bad).message


def test_an_output_over_the_limit_is_refused_and_says_the_limit() -> None:
    output = "é" * (MAX_CLIENT_TOOL_OUTPUT_BYTES // 2 + 1)  # two bytes each in UTF-8
    error = refused({"type": "client_tool.output", "call_id": "c", "output": output})
    assert error.message == (
        "client_tool.output: 'output' must be at most 131072 bytes of UTF-8, not 131074"
    )


def test_server_events_carry_exactly_their_fields() -> None:
    requested = ClientToolRequested(
        response_id="r1", call_id="c1", name="lookup_order", arguments='{"order":"A1"}'
    )
    assert orjson.loads(encode(requested)) == {
        "type": "client_tool.requested",
        "response_id": "r1",
        "call_id": "c1",
        "name": "lookup_order",
        "arguments": '{"order":"A1"}',
    }
    cancelled = ClientToolCancelled(call_id="c1", name="lookup_order", reason="timeout")
    assert orjson.loads(encode(cancelled)) == {
        "type": "client_tool.cancelled",
        "call_id": "c1",
        "name": "lookup_order",
        "reason": "timeout",
    }
