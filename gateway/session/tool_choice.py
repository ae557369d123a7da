"""Whether a session's ``tool_choice`` can be applied (``docs/protocol.md`` 10.18). Pure.

A forced tool must be one the model is offered: a registry tool the user's roles allow (within
the session's ``tools``), or one of the client's own tools. ``required`` and a forced tool need
the model's own function calling: a chat session in a text dialect (``inline``, ``json``) can
offer tools but not force a call.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from gateway.providers import PROVIDERS
from gateway.registry import Registry
from transports.base import ForcedTool, ToolChoice

__all__ = ["offered_tools", "tool_choice_problem"]


def offered_tools(
    registry: Registry,
    roles: Iterable[str],
    enabled: Iterable[str] | None,
    client_tools: Iterable[Mapping[str, Any]],
) -> set[str]:
    """The names of the tools the model is offered."""
    names = {spec.tool_id for spec in registry.visible_to(roles, enabled)}
    names.update(str(tool.get("name")) for tool in client_tools)
    return names


def tool_choice_problem(
    choice: ToolChoice, offered: set[str], provider: str, tool_dialect: str | None
) -> str | None:
    """What stands in the way of ``choice`` (a sentence naming the field), or None."""
    if choice in ("auto", "none"):
        return None
    record = PROVIDERS.get(provider)
    if record is not None and tool_dialect in record.tool_dialects:
        what = "naming a tool" if isinstance(choice, ForcedTool) else f"'{choice}'"
        return (
            f"'tool_choice' {what} needs the model's own function calling, not the "
            f"{tool_dialect} tool dialect"
        )
    if isinstance(choice, ForcedTool) and choice.name not in offered:
        return f"'tool_choice.name': no tool named {choice.name!r} is offered to the model"
    return None
