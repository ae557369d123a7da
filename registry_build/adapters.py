"""Provider declarations from one tool's metadata and parameters schema.

OpenAI Realtime takes a flat ``{type, name, description, parameters}``; Chat Completions nests it
under ``function``; Gemini Live takes ``parametersJsonSchema``, and some Gemini models only take
the older ``types.Schema`` form (upper-case types, ``nullable``). Gemini understands a subset of
JSON Schema, so a keyword outside that subset is a build error rather than a surprise at runtime.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

__all__ = [
    "CONFIRMATION_ID_PROPERTY",
    "describe_for_model",
    "gemini_unsupported_keywords",
    "needs_confirmation",
    "provider_schemas",
    "with_confirmation_id",
]

CONFIRMATION_ID_PROPERTY = "confirmation_id"

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
_ANNOTATIONS = frozenset({"$schema", "$id", "$comment"})


def needs_confirmation(meta: dict[str, Any]) -> bool:
    return bool(meta.get("requiresConfirmation")) or meta.get("sensitivity") == "critical"


def describe_for_model(summary: str, safety_rules: list[str]) -> str:
    if not safety_rules:
        return summary
    rules = " ".join(f"Safety: {rule.strip()}" for rule in safety_rules)
    return f"{summary}\n{rules}"


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
            if key in _ANNOTATIONS:
                continue
            if key not in GEMINI_KEYWORDS:
                problems.append(f"keyword '{key}' at {path}")
        enum = schema.get("enum")
        if isinstance(enum, list) and not all(isinstance(v, str) for v in enum):
            problems.append(f"keyword 'enum' with non-string values at {path}")
    return problems


def with_confirmation_id(parameters: dict[str, Any]) -> dict[str, Any]:
    """The declared parameters plus the optional ``confirmation_id`` a model passes back."""
    out = copy.deepcopy(parameters)
    properties = out.setdefault("properties", {})
    properties[CONFIRMATION_ID_PROPERTY] = {
        "type": "string",
        "description": (
            "Only when calling again after the user said yes: the confirmationId of the "
            "CONFIRMATION_REQUIRED result, with the same arguments as before."
        ),
    }
    return out


def _strip_annotations(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _strip_annotations(v) for k, v in schema.items() if k not in _ANNOTATIONS}
    if isinstance(schema, list):
        return [_strip_annotations(v) for v in schema]
    return schema


def _to_gemini_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """JSON Schema → the ``types.Schema`` dict form: upper-case types, nullable unions."""
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type":
            types = value if isinstance(value, list) else [value]
            concrete = [t for t in types if t != "null"]
            if len(concrete) < len(types):
                out["nullable"] = True
            if len(concrete) == 1:
                out["type"] = str(concrete[0]).upper()
            elif concrete:
                out["anyOf"] = [{"type": str(t).upper()} for t in concrete]
        elif key == "properties":
            out["properties"] = {n: _to_gemini_schema(s) for n, s in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, dict):
            out[key] = _to_gemini_schema(value)
        elif key == "anyOf":
            out["anyOf"] = [_to_gemini_schema(s) for s in value]
        elif key == "$defs":
            out["defs"] = {n: _to_gemini_schema(s) for n, s in value.items()}
        elif key == "$ref":
            out["ref"] = value
        elif key == "examples":
            if value:
                out["example"] = value[0]
        else:
            out[key] = value
    return out


def provider_schemas(
    tool_id: str, description: str, parameters: dict[str, Any], confirmable: bool
) -> dict[str, Any]:
    declared = _strip_annotations(parameters)
    if confirmable:
        declared = with_confirmation_id(declared)
    return {
        "openaiRealtime": {
            "type": "function",
            "name": tool_id,
            "description": description,
            "parameters": declared,
        },
        "openaiChat": {
            "type": "function",
            "function": {"name": tool_id, "description": description, "parameters": declared},
        },
        "gemini": {
            "name": tool_id,
            "description": description,
            "parametersJsonSchema": declared,
        },
        "geminiSchema": {
            "name": tool_id,
            "description": description,
            "parameters": _to_gemini_schema(declared),
        },
    }
