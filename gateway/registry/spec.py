"""A tool as the runtime knows it: the artifact entry, typed, plus its handler and validator.

A Python tool's handler is its ``handler.py``'s ``execute`` (``handler_path``); an HTTP tool's is
made from its ``http`` section (``http``; ``handler_path`` is None). A tool the registry cannot
offer here (an HTTP tool whose environment variables are missing) is an ``UnavailableTool``.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from gateway.http_tools.section import HttpToolSection
from gateway.registry.validation import ArgumentValidator

__all__ = ["Handler", "ToolSpec", "UnavailableTool"]

Handler = Callable[[dict[str, Any], Any], Coroutine[Any, Any, Any]]
Category = Literal["retrieval", "action", "utility"]
Execution = Literal["blocking", "background"]
Delivery = Literal["interrupt", "when_idle", "silent"]
Sensitivity = Literal["low", "medium", "high", "critical"]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    tool_id: str
    category: Category
    sensitivity: Sensitivity
    requires_confirmation: bool
    modes: frozenset[str]
    timeout_ms: int | None
    result_allowlist: tuple[str, ...]
    intent_keywords: tuple[str, ...]
    permissions: frozenset[str]
    idempotent: bool
    cache_ttl_s: int | None
    depends_on: tuple[str, ...]
    safety_rules: tuple[str, ...]
    secret_arguments: tuple[str, ...]
    execution: Execution
    delivery: Delivery
    json_schema: Mapping[str, Any]
    provider_schemas: Mapping[str, Any]
    summary: str
    description: str
    documentation: str
    handler_path: str | None  # None: an HTTP tool
    handler: Handler
    validator: ArgumentValidator
    http: HttpToolSection | None = None  # an HTTP tool's request

    @property
    def background(self) -> bool:
        return self.execution == "background"

    @property
    def needs_confirmation(self) -> bool:
        """Critical tools always need the client's own confirmation."""
        return self.requires_confirmation or self.sensitivity == "critical"

    def allowed_for(self, roles: frozenset[str] | set[str] | tuple[str, ...]) -> bool:
        return not self.permissions or bool(self.permissions.intersection(roles))

    @classmethod
    def from_entry(
        cls,
        entry: Mapping[str, Any],
        handler: Handler,
        validator: ArgumentValidator,
        http: HttpToolSection | None = None,
    ) -> ToolSpec:
        return cls(
            tool_id=entry["toolId"],
            category=entry["category"],
            sensitivity=entry["sensitivity"],
            requires_confirmation=bool(entry["requiresConfirmation"]),
            modes=frozenset(entry["modes"]),
            timeout_ms=entry.get("timeoutMs"),
            result_allowlist=tuple(entry["resultAllowlist"]),
            intent_keywords=tuple(k.lower() for k in entry.get("intentKeywords") or ()),
            permissions=frozenset(entry.get("permissions") or ()),
            idempotent=bool(entry.get("idempotent")),
            cache_ttl_s=entry.get("cacheTtlS"),
            depends_on=tuple(entry.get("dependsOn") or ()),
            safety_rules=tuple(entry.get("safetyRules") or ()),
            secret_arguments=tuple(entry.get("secretArguments") or ()),
            execution=entry.get("execution", "blocking"),
            delivery=entry.get("delivery", "when_idle"),
            json_schema=entry["jsonSchema"],
            provider_schemas=entry["providerSchemas"],
            summary=entry["summary"],
            description=entry.get("description", entry["summary"]),
            documentation=entry["documentation"],
            handler_path=entry.get("handlerPath"),
            handler=handler,
            validator=validator,
            http=http,
        )


@dataclass(frozen=True, slots=True)
class UnavailableTool:
    """A tool of the artifact that this process cannot run, and why (never offered to a model;
    listed by ``python -m gateway check``)."""

    tool_id: str
    category: Category
    sensitivity: Sensitivity
    modes: frozenset[str]
    reason: str
