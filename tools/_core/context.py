"""What a handler knows about the call it serves."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import structlog

__all__ = ["ToolCatalog", "ToolContext"]


class ToolCatalog(Protocol):
    """Read-only view of the session's pinned registry, for tools about tools (get_tool_doc)."""

    def tool_ids(self) -> list[str]: ...

    def documentation(self, tool_id: str) -> str | None: ...


@dataclass(frozen=True, slots=True)
class ToolContext:
    session_id: str
    user_id: str
    roles: tuple[str, ...]
    mode: Literal["voice", "text"]
    call_id: str
    tool_id: str
    # Where tools keep their files (the calendar's SQLite database, caches).
    data_dir: Path
    registry_version: str = ""
    # The user's own bearer token, for handlers that call an internal API on their behalf.
    auth_token: str | None = field(default=None, repr=False)
    tenant: str | None = None
    catalog: ToolCatalog | None = None
    logger: Any = field(default_factory=lambda: structlog.get_logger("tool"))
    # With tracing on, the call's trace (``gateway.observability.tracing.ToolTrace``): child
    # spans of the handler's own work, and the ``traceparent`` for the APIs it calls. None off.
    trace: Any = None
