"""The protocol's extension for tools the client declares and runs itself (``docs/protocol.md``
10.16). The gateway offers them to the model beside the registry's tools and runs none of them:

- ``session.start.client_tools``: ``[{name, description, parameters}]``; at most
  ``MAX_CLIENT_TOOLS``, each at most ``MAX_CLIENT_TOOL_BYTES`` as JSON, named as the registry
  names its tools (``TOOL_ID_PATTERN``), no name twice; ``parameters`` a JSON Schema of
  ``"type": "object"`` (absent: no parameters). The session checks the rest (no clash with a
  registry tool, a schema the upstream can take).
- ``client_tool.requested`` (gateway → client): the model called one of them; ``arguments`` is
  the JSON text of the arguments, as the model wrote it (as OpenAI's ``function_call`` has it).
- ``client_tool.output`` (client → gateway): the answer, a string of at most
  ``MAX_CLIENT_TOOL_OUTPUT_BYTES`` UTF-8 bytes; the model gets it as the call's result.
- ``client_tool.cancelled`` (gateway → client): no answer is wanted any more: ``timeout`` (none
  came in time; the model was told the call timed out) or ``cancelled`` (the model cancelled
  the call, e.g. the user talked over it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import orjson

from gateway.registry.format import TOOL_ID_PATTERN

from ._field_checks import invalid_field, require_non_empty, with_event_id
from .json_types import JsonObject

__all__ = [
    "MAX_CLIENT_TOOLS",
    "MAX_CLIENT_TOOL_BYTES",
    "MAX_CLIENT_TOOL_OUTPUT_BYTES",
    "ClientToolCancelled",
    "ClientToolDeclaration",
    "ClientToolOutput",
    "ClientToolRequested",
    "check_client_tools",
    "declaration_problem",
    "no_parameters",
]

MAX_CLIENT_TOOLS = 32
MAX_CLIENT_TOOL_BYTES = 16 * 1024
MAX_CLIENT_TOOL_OUTPUT_BYTES = 128 * 1024
_NAME = re.compile(TOOL_ID_PATTERN)
_START = "session.start"


def no_parameters() -> JsonObject:
    """The parameters of a tool that takes none."""
    return {"type": "object", "properties": {}}


def declaration_problem(name: Any, description: Any, parameters: Any) -> tuple[str, str] | None:
    """``(field, problem)`` for a declaration that breaks the rules above, else None."""
    if not isinstance(name, str) or not _NAME.match(name):
        return "name", (
            "must be 2 to 64 lower-case letters, digits or underscores, starting with a letter "
            "(as the registry names its tools)"
        )
    if not isinstance(description, str):
        return "description", "must be a string"
    if not isinstance(parameters, dict) or parameters.get("type") != "object":
        return "parameters", 'must be a JSON Schema object with "type": "object"'
    try:
        size = len(orjson.dumps([name, description, parameters]))
    except orjson.JSONEncodeError:  # nested deeper than any schema needs
        return "parameters", "is nested too deeply"
    if size > MAX_CLIENT_TOOL_BYTES:
        return "", f"must be at most {MAX_CLIENT_TOOL_BYTES} bytes as JSON, not {size}"
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientToolDeclaration:
    """One tool of the client's own, as ``session.start.client_tools`` declares it."""

    name: str
    description: str = ""
    parameters: JsonObject = field(default_factory=no_parameters)

    def __post_init__(self) -> None:
        problem = declaration_problem(self.name, self.description, self.parameters)
        if problem is not None:
            where, text = problem
            raise invalid_field(_START, f"client_tools.{where}".rstrip("."), text)

    def to_dict(self) -> JsonObject:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


def check_client_tools(
    tools: tuple[ClientToolDeclaration, ...], event_id: str | None
) -> tuple[ClientToolDeclaration, ...]:
    """The whole list's rules: how many, and no name twice."""
    tools = tuple(tools)
    if len(tools) > MAX_CLIENT_TOOLS:
        raise invalid_field(
            _START, "client_tools", f"must hold at most {MAX_CLIENT_TOOLS} tools", event_id
        )
    seen: set[str] = set()
    for index, tool in enumerate(tools):
        if tool.name in seen:
            raise invalid_field(
                _START, f"client_tools[{index}].name", f"'{tool.name}' is declared twice", event_id
            )
        seen.add(tool.name)
    return tools


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientToolOutput:
    """``client_tool.output``: the client's answer to a ``client_tool.requested``."""

    TYPE: ClassVar[str] = "client_tool.output"

    call_id: str
    output: str
    event_id: str | None = None

    def __post_init__(self) -> None:
        require_non_empty(
            self.call_id, event_type=self.TYPE, field_name="call_id", event_id=self.event_id
        )
        if not isinstance(self.output, str):
            raise invalid_field(self.TYPE, "output", "must be a string", self.event_id)
        size = len(self.output.encode("utf-8", "surrogatepass"))
        if size > MAX_CLIENT_TOOL_OUTPUT_BYTES:
            raise invalid_field(
                self.TYPE,
                "output",
                f"must be at most {MAX_CLIENT_TOOL_OUTPUT_BYTES} bytes of UTF-8, not {size}",
                self.event_id,
            )

    def to_dict(self) -> JsonObject:
        body: JsonObject = {"type": self.TYPE, "call_id": self.call_id, "output": self.output}
        return with_event_id(body, self.event_id)


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientToolRequested:
    TYPE: ClassVar[str] = "client_tool.requested"

    response_id: str
    call_id: str
    name: str
    arguments: str  # JSON text, as the model wrote it

    def to_dict(self) -> JsonObject:
        return {
            "type": self.TYPE,
            "response_id": self.response_id,
            "call_id": self.call_id,
            "name": self.name,
            "arguments": self.arguments,
        }


CancelReason = Literal["timeout", "cancelled"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientToolCancelled:
    TYPE: ClassVar[str] = "client_tool.cancelled"

    call_id: str
    name: str
    reason: CancelReason

    def to_dict(self) -> JsonObject:
        return {
            "type": self.TYPE,
            "call_id": self.call_id,
            "name": self.name,
            "reason": self.reason,
        }
