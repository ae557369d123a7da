"""Load the built artifact once: check freshness, import handlers, compile validators.

A session pins the ``Registry`` object it started with; loading again makes a new object, so a
session never sees a tool change under it.

An HTTP tool gets a handler made from its ``http`` section (``gateway.http_tools``), nothing is
imported. Its base URL (and service token) come from the environment as it is when the registry
is loaded; without them the tool is unavailable: the registry keeps it aside
(``Registry.unavailable``) and never offers it, looks it up or runs it.
"""

from __future__ import annotations

import importlib.util
import inspect
import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

from gateway.errors import RegistryInvalidError, RegistryMissingError, RegistryStaleError
from gateway.http_tools.executor import HttpToolHandler
from gateway.http_tools.section import EndpointUnavailable, HttpToolSection, resolve_endpoint
from gateway.registry.format import source_hash
from gateway.registry.spec import Handler, ToolSpec, UnavailableTool
from gateway.registry.validation import compile_validator

__all__ = ["BUILD_COMMAND", "Registry", "load_registry"]

BUILD_COMMAND = "python -m registry_build --tools tools --out build/tool_registry.json"


class Registry:
    """An immutable set of tools of one artifact version; also a ``ToolCatalog`` for handlers."""

    def __init__(
        self,
        version: str,
        git_commit: str,
        tools: Iterable[ToolSpec],
        unavailable: Iterable[UnavailableTool] = (),
    ) -> None:
        self.version = version
        self.git_commit = git_commit
        self._tools: dict[str, ToolSpec] = {t.tool_id: t for t in tools}
        # Kept apart: no lookup, listing or visibility below ever sees them.
        self._unavailable = tuple(unavailable)

    def __contains__(self, tool_id: object) -> bool:
        return tool_id in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def get(self, tool_id: str) -> ToolSpec | None:
        return self._tools.get(tool_id)

    def tools(self) -> list[ToolSpec]:
        return list(self._tools.values())

    def tool_ids(self) -> list[str]:
        return list(self._tools)

    def unavailable(self) -> list[UnavailableTool]:
        """The artifact's tools this process cannot run, with the reason of each."""
        return list(self._unavailable)

    def documentation(self, tool_id: str) -> str | None:
        spec = self._tools.get(tool_id)
        return spec.documentation if spec else None

    def visible_to(
        self, roles: Iterable[str], enabled: Iterable[str] | None = None
    ) -> list[ToolSpec]:
        """The tools a user's roles allow, narrowed by the session's ``tools`` filter."""
        role_set = frozenset(roles)
        wanted = None if enabled is None else set(enabled)
        return [
            spec
            for spec in self._tools.values()
            if spec.allowed_for(role_set) and (wanted is None or spec.tool_id in wanted)
        ]

    def model_instructions(
        self, instructions: str, roles: Iterable[str], enabled: Iterable[str] | None = None
    ) -> str:
        """The session's instructions plus each visible tool's summary and safety rules."""
        tools = "\n".join(
            f"- {s.tool_id}: {s.description}" for s in self.visible_to(roles, enabled)
        )
        return f"{instructions}\n\nTools you may call:\n{tools}" if tools else instructions


def _import_handler(tool_id: str, version: str, path: Path) -> Handler:
    # A unique module name per version: a reload never clobbers the module an older pinned
    # registry still runs.
    module_name = f"gateway_tools.{tool_id}_{version.replace('.', '_')}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise RegistryInvalidError(f"tool {tool_id}: cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    # Registered first, as importlib's recipe does: dataclasses and pickling look it up there.
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[module_name]
        raise RegistryInvalidError(
            f"tool {tool_id}: importing {path} failed: {type(exc).__name__}: {exc}"
        ) from exc
    execute = getattr(module, "execute", None)
    if execute is None or not inspect.iscoroutinefunction(execute):
        raise RegistryInvalidError(f"tool {tool_id}: {path} has no 'async def execute'")
    handler: Handler = execute
    return handler


def _check_fresh(entry: Mapping[str, Any]) -> None:
    folder = Path(entry.get("folderPath") or Path(entry["handlerPath"]).parent)
    try:
        current = source_hash(folder)
    except OSError as exc:
        raise RegistryStaleError(
            f"tool {entry['toolId']}: its files are gone or unreadable ({exc.strerror}); "
            f"rebuild with: {BUILD_COMMAND}"
        ) from exc
    if current != entry.get("sourceHash"):
        raise RegistryStaleError(
            f"tool {entry['toolId']} changed since the registry was built; "
            f"rebuild with: {BUILD_COMMAND}"
        )


def _http_handler(
    entry: Mapping[str, Any], environ: Mapping[str, str]
) -> HttpToolHandler | EndpointUnavailable:
    """An HTTP tool's handler, or why this environment cannot give it one."""
    tool_id = entry["toolId"]
    try:
        section = HttpToolSection.from_artifact(entry["http"])
    except ValueError as exc:
        raise RegistryInvalidError(f"tool {tool_id}: {exc}") from exc
    timeout_ms = entry.get("timeoutMs")
    if not isinstance(timeout_ms, int) or timeout_ms < 1:
        raise RegistryInvalidError(f"tool {tool_id}: an HTTP tool needs timeoutMs")
    endpoint = resolve_endpoint(section, environ)
    if isinstance(endpoint, EndpointUnavailable):
        return endpoint
    return HttpToolHandler(tool_id, section, endpoint, timeout_ms)


def load_registry(
    path: Path, *, check_fresh: bool = True, environ: Mapping[str, str] | None = None
) -> Registry:
    """Load the artifact at ``path``; HTTP tools read ``environ`` (default: ``os.environ``)."""
    env = os.environ if environ is None else environ
    if not path.is_file():
        raise RegistryMissingError(
            f"no tool registry at {path}; build it with: {BUILD_COMMAND} "
            "(or set GATEWAY_REGISTRY to the artifact's path)"
        )
    try:
        artifact = orjson.loads(path.read_bytes())
        version = artifact["version"]
        entries = artifact["tools"]
    except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
        raise RegistryInvalidError(f"{path} is not a tool registry artifact: {exc}") from exc
    specs = []
    unavailable = []
    for entry in entries:
        if check_fresh:
            _check_fresh(entry)
        validator = compile_validator(entry["jsonSchema"])
        if entry.get("http") is None:
            handler = _import_handler(entry["toolId"], version, Path(entry["handlerPath"]))
            specs.append(ToolSpec.from_entry(entry, handler, validator))
            continue
        made = _http_handler(entry, env)
        if isinstance(made, EndpointUnavailable):
            unavailable.append(
                UnavailableTool(
                    entry["toolId"],
                    entry["category"],
                    entry["sensitivity"],
                    frozenset(entry["modes"]),
                    made.reason,
                )
            )
            continue
        specs.append(ToolSpec.from_entry(entry, made.execute, validator, made.section))
    return Registry(version, artifact.get("gitCommit", "unknown"), specs, unavailable)
