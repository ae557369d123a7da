"""The client's own function tools (``session.update`` ``session.tools``) as the gateway
session's ``client_tools`` (``docs/protocol.md`` 10.16). Pure.

``client_tools_of`` checks them all before anything changes, as OpenAI's server refuses a whole
update: the protocol's rules for one declaration (a name as the registry's, a JSON Schema of
``"type": "object"``, at most 16 KiB), the list's (at most 32, each name once), and the
session's (``ToolCheck``: no name of a registry tool the user may use, a schema the upstream
can take). A missing or empty ``parameters`` is a tool without arguments. Each refusal is an
``invalid_value`` whose ``param`` names the field (``session.tools[1].name``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gateway.protocol import MAX_CLIENT_TOOLS, ClientToolDeclaration
from gateway.protocol.client_tool_events import declaration_problem, no_parameters
from gateway.session.client_tools import DeclarationProblem

from .errors import CompatError
from .session_config import FunctionTool

__all__ = ["ToolCheck", "client_tools_of"]

ToolCheck = Callable[[Sequence[ClientToolDeclaration]], DeclarationProblem | None]
_WHERE = "session.tools"


def _refused(param: str, problem: str) -> CompatError:
    return CompatError("invalid_value", f"'{param}' {problem}", param=param)


def client_tools_of(
    tools: Sequence[FunctionTool], check: ToolCheck
) -> tuple[ClientToolDeclaration, ...]:
    if len(tools) > MAX_CLIENT_TOOLS:
        raise _refused(_WHERE, f"must hold at most {MAX_CLIENT_TOOLS} tools on this gateway")
    declared: list[ClientToolDeclaration] = []
    seen: set[str] = set()
    for index, tool in enumerate(tools):
        where = f"{_WHERE}[{index}]"
        description = tool.description or ""
        parameters = dict(tool.parameters) if tool.parameters else no_parameters()
        problem = declaration_problem(tool.name, description, parameters)
        if problem is not None:
            part, text = problem
            raise _refused(f"{where}.{part}" if part else where, text)
        if tool.name in seen:
            raise _refused(f"{where}.name", f"'{tool.name}' is declared twice")
        seen.add(tool.name)
        declared.append(
            ClientToolDeclaration(name=tool.name, description=description, parameters=parameters)
        )
    found = check(declared)
    if found is not None:
        raise _refused(found.at(_WHERE), found.message)
    return tuple(declared)
