"""What the registry artifact and the gateway agree on, used at build time and at run time: the
rule for a tool's name, the files of a tool folder and their hash (a stale artifact is caught by
comparing it), and the subset of JSON Schema that Gemini can express (the build refuses the rest;
the runtime compiles a fast validator for schemas inside it).

A tool folder always has ``REQUIRED_FILES``; its behaviour comes from exactly one of
``handler.py`` (a Python handler) or an ``http`` section in ``schema.json`` (an HTTP tool, run by
``gateway.http_tools``).

``registry_build`` imports these from here: the product never imports build-time code.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "ANNOTATIONS",
    "GEMINI_KEYWORDS",
    "HANDLER_FILE",
    "REQUIRED_FILES",
    "TOOL_FILES",
    "TOOL_ID_PATTERN",
    "gemini_unsupported_keywords",
    "source_hash",
]

# A tool's name, as the registry's tools and the tools a client declares must spell it.
TOOL_ID_PATTERN = r"^[a-z][a-z0-9_]{1,63}$"
REQUIRED_FILES = ("schema.json", "doc_summary.md", "doc.md")
HANDLER_FILE = "handler.py"  # absent from an HTTP tool's folder
TOOL_FILES = (*REQUIRED_FILES, HANDLER_FILE)

# Keywords of types.Schema (google-genai), in JSON Schema spelling; `$schema`, `$id` and
# `$comment` are annotations that are stripped before anything is sent.
GEMINI_KEYWORDS = frozenset(
    {
        "type",
        "format",
        "title",
        "description",
        "nullable",
        "enum",
        "properties",
        "required",
        "items",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "pattern",
        "minProperties",
        "maxProperties",
        "anyOf",
        "default",
        "example",
        "examples",
        "additionalProperties",
        "$defs",
        "$ref",
        "propertyOrdering",
    }
)
ANNOTATIONS = frozenset({"$schema", "$id", "$comment"})


def source_hash(folder: Path) -> str:
    """Hash of a tool's files; the loader compares it to detect a stale artifact.

    A missing ``handler.py`` is hashed as absent (not as empty), so adding one to an HTTP tool's
    folder, or removing one, makes the artifact stale too. A missing required file raises
    ``OSError``."""
    digest = hashlib.sha256()
    for name in TOOL_FILES:
        path = folder / name
        if name == HANDLER_FILE and not path.exists():
            digest.update(name.encode() + b"\1")  # "\1": no file, unlike "\0" + its bytes
            continue
        digest.update(name.encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def _subschemas(schema: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema nested in ``schema`` with its dotted path (property names are not keywords)."""
    yield path, schema
    for name, sub in (schema.get("properties") or {}).items():
        if isinstance(sub, dict):
            yield from _subschemas(sub, f"{path}.properties.{name}")
    for name, sub in (schema.get("$defs") or {}).items():
        if isinstance(sub, dict):
            yield from _subschemas(sub, f"{path}.$defs.{name}")
    items = schema.get("items")
    if isinstance(items, dict):
        yield from _subschemas(items, f"{path}.items")
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        yield from _subschemas(extra, f"{path}.additionalProperties")
    for index, sub in enumerate(schema.get("anyOf") or []):
        if isinstance(sub, dict):
            yield from _subschemas(sub, f"{path}.anyOf[{index}]")


def gemini_unsupported_keywords(parameters: dict[str, Any]) -> list[str]:
    """``"keyword at path"`` for every keyword Gemini's schema cannot express."""
    problems: list[str] = []
    for path, schema in _subschemas(parameters, "parameters"):
        for key in schema:
            if key in ANNOTATIONS:
                continue
            if key not in GEMINI_KEYWORDS:
                problems.append(f"keyword '{key}' at {path}")
        enum = schema.get("enum")
        if isinstance(enum, list) and not all(isinstance(v, str) for v in enum):
            problems.append(f"keyword 'enum' with non-string values at {path}")
    return problems
