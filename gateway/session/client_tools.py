"""The tools a session's client declared and runs itself, as plain data. Pure: times are given.

- ``declarations_problem``: what is wrong with a list of declarations once the session knows
  where it runs (a name of one of the registry's tools, a schema that is not JSON Schema, or
  that the upstream cannot express); the protocol already checked each one's shape.
- ``model_declarations``: the declarations the upstream is given, in the registry's shapes
  (``gateway.registry.provider_schemas``), so a provider sees them exactly like its own tools.
- ``ClientToolBook``: the calls of those tools that wait for the client's answer, each with its
  deadline, and the calls closed lately (so that a late or second answer is told why it came
  too late, not just that its id is unknown).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from gateway.protocol import ClientToolDeclaration
from gateway.providers import PROVIDERS
from gateway.registry.provider_schemas import provider_schemas
from gateway.toolrun.arguments import MAX_BYTES, ArgumentError, measure_arguments
from transports.base import ToolDeclaration

__all__ = [
    "DEFAULT_CLIENT_TOOL_TIMEOUT_S",
    "ClientToolBook",
    "DeclarationProblem",
    "WaitingCall",
    "arguments_text",
    "declarations_problem",
    "model_declarations",
]

DEFAULT_CLIENT_TOOL_TIMEOUT_S = 60.0
# Closed calls remembered for the error a late answer gets (older ones are just unknown).
_CLOSED_KEPT = 256


@dataclass(frozen=True, slots=True)
class DeclarationProblem:
    index: int
    field: str  # of the declaration: "name" or "parameters"
    message: str

    def at(self, prefix: str) -> str:
        """Where it is, under ``prefix`` (``client_tools``; ``session.tools`` on the compatible
        endpoint)."""
        return f"{prefix}[{self.index}].{self.field}"


def declarations_problem(
    tools: Sequence[ClientToolDeclaration], registry_tools: Iterable[str], provider: str | None
) -> DeclarationProblem | None:
    """The first problem of ``tools`` in a session whose user may use ``registry_tools``, on
    ``provider`` (None: not known yet, the limits of its declarations are not checked)."""
    taken = frozenset(registry_tools)
    record = PROVIDERS.get(provider)
    dialect = None if record is None else record.dialect
    for index, tool in enumerate(tools):
        if tool.name in taken:
            return DeclarationProblem(
                index,
                "name",
                f"'{tool.name}' is the name of one of the gateway's tools; name yours otherwise",
            )
        try:
            Draft202012Validator.check_schema(tool.parameters)
        except SchemaError as exc:
            return DeclarationProblem(
                index, "parameters", f"is not a valid JSON Schema: {exc.message}"
            )
        if dialect is not None:
            unsupported = dialect.unsupported(dict(tool.parameters))
            if unsupported:
                return DeclarationProblem(
                    index,
                    "parameters",
                    f"holds what {dialect.title} cannot express: {', '.join(unsupported)}",
                )
    return None


def model_declarations(tools: Sequence[ClientToolDeclaration]) -> list[ToolDeclaration]:
    return [
        ToolDeclaration(
            tool.name,
            tool.description,
            provider_schemas(tool.name, tool.description, dict(tool.parameters), False),
        )
        for tool in tools
    ]


def arguments_text(raw: str | bytes | Mapping[str, Any] | None) -> str:
    """A call's arguments as the client is shown them: the model's JSON text untouched (an
    object, as Gemini gives it, written as JSON). ``ArgumentError`` when they are larger or
    deeper than any tool's arguments may be (10.4)."""
    if raw is None:
        return "{}"
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8", "replace")
    if isinstance(raw, str):
        if len(raw) > MAX_BYTES:
            raise ArgumentError(f"arguments are larger than {MAX_BYTES} bytes")
        return raw
    measure_arguments(raw)
    return orjson.dumps(dict(raw)).decode()


@dataclass(frozen=True, slots=True)
class WaitingCall:
    call_id: str
    name: str
    response_id: str
    arguments: str
    asked_at: float  # monotonic seconds
    deadline: float


class ClientToolBook:
    def __init__(
        self,
        tools: Sequence[ClientToolDeclaration] = (),
        timeout_s: float = DEFAULT_CLIENT_TOOL_TIMEOUT_S,
    ) -> None:
        self.tools = tuple(tools)
        self.timeout_s = timeout_s
        self._names = frozenset(tool.name for tool in self.tools)
        self._waiting: dict[str, WaitingCall] = {}
        self._closed: OrderedDict[str, str] = OrderedDict()  # call id → why, in words

    def declares(self, name: str) -> bool:
        return name in self._names

    def is_waiting(self, call_id: str) -> bool:
        return call_id in self._waiting

    def waiting(self) -> list[WaitingCall]:
        """The calls waiting for an answer, oldest first."""
        return list(self._waiting.values())

    def ask(
        self, call_id: str, name: str, response_id: str, arguments: str, now: float
    ) -> WaitingCall:
        call = WaitingCall(call_id, name, response_id, arguments, now, now + self.timeout_s)
        self._waiting[call_id] = call
        return call

    def answer(self, call_id: str) -> WaitingCall | str:
        """The call the client answers (closed now), or why no call waits on that id."""
        call = self._waiting.pop(call_id, None)
        if call is None:
            why = self._closed.get(call_id)
            if why is None:
                return f"no call of a client tool with id '{call_id}' is waiting for an answer"
            return f"call '{call_id}' {why}"
        self._close(call_id, "was answered already")
        return call

    def due(self, now: float) -> list[WaitingCall]:
        """The calls whose deadline has passed (closed now)."""
        expired = [call for call in self._waiting.values() if call.deadline <= now]
        for call in expired:
            del self._waiting[call.call_id]
            self._close(
                call.call_id,
                f"was not answered within {self.timeout_s:g} s: the model was told it timed out",
            )
        return expired

    def cancel(self, call_id: str, why: str) -> WaitingCall | None:
        """Close a waiting call that needs no answer any more (None: none waits on that id)."""
        call = self._waiting.pop(call_id, None)
        if call is not None:
            self._close(call_id, why)
        return call

    def _close(self, call_id: str, why: str) -> None:
        self._closed[call_id] = why
        while len(self._closed) > _CLOSED_KEPT:
            self._closed.popitem(last=False)
