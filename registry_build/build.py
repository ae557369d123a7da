"""Discover tool folders, validate them all, and assemble the deterministic artifact.

Every problem of every tool is collected as a ``BuildError`` (file and reason) rather than raised,
so one run shows them all. The artifact is a pure function of the tool files, except
``buildTimestamp``; ``version`` is ``1.0.<first 8 hex of the content hash>``.

A folder is a Python tool (``handler.py``) or an HTTP tool (an ``http`` section in
``schema.json``, no ``handler.py``). Every entry records its absolute ``folderPath``;
``handlerPath`` is null for an HTTP tool, whose entry holds its ``http`` section with every
default made explicit. Neither path counts in ``version``.
"""

from __future__ import annotations

import hashlib
import subprocess
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from gateway.registry.format import HANDLER_FILE, REQUIRED_FILES, source_hash
from registry_build.adapters import (
    CONFIRMATION_ID_PROPERTY,
    describe_for_model,
    gemini_unsupported_keywords,
    needs_confirmation,
    provider_schemas,
)
from registry_build.checks import check_doc, check_handler_source, check_summary
from registry_build.http_checks import check_http_section, normalized_http_section
from registry_build.metaschema import TOOL_METADATA_SCHEMA

__all__ = [
    "BUILTIN_TOOLS_DIR",
    "REQUIRED_FILES",
    "BuildError",
    "BuildResult",
    "build_registry",
    "serialize_artifact",
    "source_hash",
]

# Built-in tools that every registry has, whatever folders it is built from.
BUILTIN_TOOLS_DIR = Path(__file__).resolve().parent / "builtin"

_METADATA_VALIDATOR = Draft202012Validator(TOOL_METADATA_SCHEMA)
_PATH_KEYS = frozenset({"folderPath", "handlerPath"})


@dataclass(frozen=True, slots=True)
class BuildError:
    path: Path
    reason: str
    tool: str | None = None

    def __str__(self) -> str:
        where = f"[{self.tool}] " if self.tool else ""
        try:
            shown = self.path.relative_to(Path.cwd())
        except ValueError:
            shown = self.path
        return f"{shown}: {where}{self.reason}"


@dataclass(slots=True)
class BuildResult:
    artifact: dict[str, Any] | None
    errors: list[BuildError] = field(default_factory=list)
    tool_count: int = 0


def _tool_folders(roots: list[Path]) -> list[Path]:
    folders: list[Path] = []
    for root in roots:
        folders.extend(
            p
            for p in sorted(root.iterdir())
            if p.is_dir() and not p.name.startswith(("_", ".")) and p.name != "__pycache__"
        )
    return folders


def _json_error_path(error: Any) -> str:
    return "/".join(str(p) for p in error.absolute_path) or "(top level)"


def _load_tool(folder: Path) -> tuple[dict[str, Any] | None, list[BuildError]]:
    """Validate one folder; return its artifact entry, or None with every error found."""
    name = folder.name
    errors: list[BuildError] = []

    def fail(file: str, reason: str) -> None:
        errors.append(BuildError(folder / file, reason, name))

    missing = [f for f in REQUIRED_FILES if not (folder / f).is_file()]
    for file in missing:
        fail(file, f"missing required file {file}")

    meta: dict[str, Any] | None = None
    if "schema.json" not in missing:
        try:
            loaded = orjson.loads((folder / "schema.json").read_bytes())
        except orjson.JSONDecodeError as exc:
            fail("schema.json", f"invalid JSON: {exc}")
        else:
            if isinstance(loaded, dict):
                meta = loaded
            else:
                fail("schema.json", "must hold a JSON object")
    has_handler = (folder / HANDLER_FILE).is_file()
    if meta is not None:
        for reason in _check_metadata(name, meta):
            fail("schema.json", reason)
        if "http" in meta:
            for reason in check_http_section(meta):
                fail("schema.json", reason)
            if has_handler:
                fail(
                    HANDLER_FILE,
                    "an HTTP tool (an http section in schema.json) must not have a handler.py: "
                    "keep one of them",
                )
        elif not has_handler:
            fail(
                HANDLER_FILE,
                "missing required file handler.py (or an http section in schema.json, for an "
                "HTTP tool)",
            )

    summary = ""
    if "doc_summary.md" not in missing:
        summary = (folder / "doc_summary.md").read_text(encoding="utf-8").strip()
        for reason in check_summary(summary):
            fail("doc_summary.md", reason)
    documentation = ""
    if "doc.md" not in missing:
        documentation = (folder / "doc.md").read_text(encoding="utf-8")
        for reason in check_doc(documentation):
            fail("doc.md", reason)
    if has_handler:
        for reason in check_handler_source((folder / HANDLER_FILE).read_text(encoding="utf-8")):
            fail(HANDLER_FILE, reason)

    if errors or meta is None:
        return None, errors
    return _entry(folder, meta, summary, documentation), []


def _check_metadata(folder_name: str, meta: dict[str, Any]) -> list[str]:
    problems = [
        f"{_json_error_path(e)}: {e.message}"
        for e in sorted(_METADATA_VALIDATOR.iter_errors(meta), key=lambda e: list(e.path))
    ]
    tool_id = meta.get("toolId")
    if isinstance(tool_id, str) and tool_id != folder_name:
        problems.append(f"toolId '{tool_id}' must equal the folder name '{folder_name}'")
    params = meta.get("parameters")
    if isinstance(params, dict):
        problems.extend(_check_parameters(params))
    sensitivity = meta.get("sensitivity")
    if sensitivity in ("high", "critical") and not meta.get("intentKeywords"):
        problems.append(f"a {sensitivity} tool needs non-empty intentKeywords (explicit intent)")
    if meta.get("cacheTtlS") is not None and not _is_idempotent(meta):
        problems.append("cacheTtlS is only allowed for idempotent tools")
    if meta.get("category") == "retrieval" and meta.get("idempotent") is False:
        problems.append("retrieval tools are idempotent: idempotent must not be false")
    if isinstance(tool_id, str) and tool_id in (meta.get("dependsOn") or []):
        problems.append("dependsOn must not name the tool itself")
    return problems


def _check_parameters(params: dict[str, Any]) -> list[str]:
    meta_errors = list(Draft202012Validator(Draft202012Validator.META_SCHEMA).iter_errors(params))
    if meta_errors:
        worst = best_match(meta_errors)
        return [
            f"parameters is not a valid JSON Schema (2020-12): "
            f"{_json_error_path(worst)}: {worst.message}"
        ]
    problems = []
    if params.get("type") != "object":
        problems.append('parameters must be a JSON Schema with "type": "object"')
    if CONFIRMATION_ID_PROPERTY in (params.get("properties") or {}):
        problems.append(f"parameters must not declare '{CONFIRMATION_ID_PROPERTY}' (it is added)")
    problems.extend(
        f"gemini cannot express {keyword}" for keyword in gemini_unsupported_keywords(params)
    )
    return problems


def _is_idempotent(meta: dict[str, Any]) -> bool:
    return bool(meta.get("idempotent", meta.get("category") == "retrieval"))


def _entry(folder: Path, meta: dict[str, Any], summary: str, documentation: str) -> dict[str, Any]:
    tool_id = meta["toolId"]
    description = describe_for_model(summary, list(meta.get("safetyRules", [])))
    entry: dict[str, Any] = {
        # Defaults made explicit, so the runtime never guesses.
        "timeoutMs": None,
        "intentKeywords": [],
        "permissions": [],
        "cacheTtlS": None,
        "dependsOn": [],
        "safetyRules": [],
        "secretArguments": [],
        **meta,
        "idempotent": _is_idempotent(meta),
        "jsonSchema": meta["parameters"],
        "summary": summary,
        "description": description,
        "documentation": documentation,
        "folderPath": str(folder.resolve()),
        "handlerPath": None if "http" in meta else str((folder / HANDLER_FILE).resolve()),
        "sourceHash": source_hash(folder),
        "providerSchemas": provider_schemas(
            tool_id, description, meta["parameters"], needs_confirmation(meta)
        ),
    }
    del entry["parameters"]
    if "http" in meta:
        entry["http"] = normalized_http_section(meta["http"])
    return entry


def _git_commit(roots: list[Path]) -> str:
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=roots[0],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 else "unknown"


def _content_version(tools: list[dict[str, Any]]) -> str:
    # The paths depend on where the checkout lives; the version depends on content only.
    portable = [{k: v for k, v in t.items() if k not in _PATH_KEYS} for t in tools]
    digest = hashlib.sha256(orjson.dumps(portable, option=orjson.OPT_SORT_KEYS)).hexdigest()
    return f"1.0.{digest[:8]}"


def build_registry(
    roots: list[Path], *, include_builtin: bool = True, now: datetime | None = None
) -> BuildResult:
    errors: list[BuildError] = []
    for root in roots:
        if not root.is_dir():
            errors.append(BuildError(root, "tools folder does not exist"))
    if errors:
        return BuildResult(None, errors)
    search = ([BUILTIN_TOOLS_DIR] if include_builtin else []) + roots
    entries: dict[str, dict[str, Any]] = {}
    origin: dict[str, Path] = {}
    for folder in _tool_folders(search):
        entry, tool_errors = _load_tool(folder)
        errors.extend(tool_errors)
        if folder.name in origin:
            errors.append(
                BuildError(
                    folder / "schema.json",
                    f"duplicate toolId '{folder.name}' (also defined in {origin[folder.name]})",
                    folder.name,
                )
            )
            continue
        origin[folder.name] = folder
        if entry is not None:
            entries[folder.name] = entry
    for tool_id, entry in entries.items():
        for dep in entry["dependsOn"]:
            if dep not in origin:
                errors.append(
                    BuildError(
                        origin[tool_id] / "schema.json",
                        f"dependsOn names unknown tool '{dep}'",
                        tool_id,
                    )
                )
    errors.extend(_dependency_cycles(entries, origin))
    if errors:
        return BuildResult(None, errors, len(origin))
    tools = [entries[k] for k in sorted(entries)]
    artifact = {
        "version": _content_version(tools),
        "gitCommit": _git_commit(roots),
        "buildTimestamp": (now or datetime.now(UTC)).isoformat(timespec="seconds"),
        "tools": tools,
    }
    return BuildResult(artifact, [], len(tools))


def _dependency_cycles(
    entries: dict[str, dict[str, Any]], origin: dict[str, Path]
) -> list[BuildError]:
    """A dependsOn cycle would deadlock a batch; refuse it at build time."""
    errors: list[BuildError] = []
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done

    def visit(tool_id: str, path: list[str]) -> None:
        state[tool_id] = 1
        for dep in entries.get(tool_id, {}).get("dependsOn", []):
            if state.get(dep) == 1:
                cycle = " -> ".join([*path[path.index(dep) :], dep])
                errors.append(
                    BuildError(
                        origin[tool_id] / "schema.json", f"dependsOn cycle: {cycle}", tool_id
                    )
                )
            elif dep in entries and state.get(dep) is None:
                visit(dep, [*path, dep])
        state[tool_id] = 2

    for tool_id in sorted(entries):
        if state.get(tool_id) is None:
            visit(tool_id, [tool_id])
    return errors


def serialize_artifact(artifact: dict[str, Any]) -> bytes:
    return orjson.dumps(artifact, option=orjson.OPT_SORT_KEYS | orjson.OPT_INDENT_2) + b"\n"
