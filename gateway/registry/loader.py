"""Load the built artifact once: check freshness, import handlers, compile validators.

A session pins the ``Registry`` object it started with; loading again makes a new object, so a
session never sees a tool change under it.
"""

from __future__ import annotations

import importlib.util
import inspect
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson

from gateway.errors import RegistryInvalidError, RegistryMissingError, RegistryStaleError
from gateway.registry.format import source_hash
from gateway.registry.spec import Handler, ToolSpec
from gateway.registry.validation import compile_validator

__all__ = ["BUILD_COMMAND", "Registry", "load_registry"]

BUILD_COMMAND = "python -m registry_build --tools tools --out build/tool_registry.json"


class Registry:
    """An immutable set of tools of one artifact version; also a ``ToolCatalog`` for handlers."""

    def __init__(self, version: str, git_commit: str, tools: Iterable[ToolSpec]) -> None:
        self.version = version
        self.git_commit = git_commit
        self._tools: dict[str, ToolSpec] = {t.tool_id: t for t in tools}

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
    folder = Path(entry["handlerPath"]).parent
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


def load_registry(path: Path, *, check_fresh: bool = True) -> Registry:
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
    for entry in entries:
        if check_fresh:
            _check_fresh(entry)
        handler = _import_handler(entry["toolId"], version, Path(entry["handlerPath"]))
        specs.append(ToolSpec.from_entry(entry, handler, compile_validator(entry["jsonSchema"])))
    return Registry(version, artifact.get("gitCommit", "unknown"), specs)
