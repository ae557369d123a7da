"""Every bundled tool folder follows the contract of docs/tools.md sections 1 and 2.

These checks mirror the registry build (which owns the authoritative version), so that a broken
tool is caught by the tool's own tests too, with the tool's name in the failure. A Python tool has
the four files; an HTTP tool (an ``http`` section in ``schema.json``) has the three without
``handler.py``.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from tools._core import ToolFailure, normalize_envelope

REPO = Path(__file__).resolve().parents[2]
TOOLS_DIR = REPO / "tools"
BUILTIN_DIR = REPO / "registry_build" / "builtin"
EXPECTED_TOOLS = {
    "calendar_create_event",
    "care_api_get_appointments",
    "care_api_reschedule_appointment",
    "create_care_log",
    "end_voice_session",
    "get_current_time",
    "get_tool_doc",
    "ignore_user",
    "kb_get",
    "kb_search",
    "log_medication",
    "remember_for_next_turn",
}
FOLDERS = {
    p.name: p
    for root in (TOOLS_DIR, BUILTIN_DIR)
    for p in root.iterdir()
    if p.is_dir() and p.name[0] not in "_."
}
TOOL_IDS = sorted(FOLDERS)
HTTP_TOOL_IDS = sorted(
    tool_id
    for tool_id in TOOL_IDS
    if "http" in json.loads((FOLDERS[tool_id] / "schema.json").read_text())
)
HANDLER_TOOL_IDS = sorted(set(TOOL_IDS) - set(HTTP_TOOL_IDS))
REQUIRED_FILES = {"schema.json", "doc_summary.md", "doc.md", "handler.py"}
HTTP_TOOL_FILES = REQUIRED_FILES - {"handler.py"}
DOC_SECTIONS = ("Summary", "Parameters", "Returns", "Errors", "Examples")

# The keywords Gemini's function declarations accept inside "parameters".
GEMINI_KEYWORDS = frozenset(
    {
        "type", "format", "title", "description", "nullable", "enum", "properties", "required",
        "items", "minItems", "maxItems", "minimum", "maximum", "minLength", "maxLength",
        "pattern", "minProperties", "maxProperties", "anyOf", "default", "examples",
        "additionalProperties", "$defs", "$ref", "propertyOrdering",
    }
)  # fmt: skip

# The top-level contract of schema.json, as stated for the project's meta-schema.
METADATA_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": [
        "toolId", "category", "sensitivity", "requiresConfirmation", "modes",
        "resultAllowlist", "parameters",
    ],
    "properties": {
        "toolId": {"type": "string", "pattern": "^[a-z][a-z0-9_]{1,63}$"},
        "category": {"enum": ["retrieval", "action", "utility"]},
        "sensitivity": {"enum": ["low", "medium", "high", "critical"]},
        "requiresConfirmation": {"type": "boolean"},
        "modes": {
            "type": "array", "minItems": 1, "uniqueItems": True,
            "items": {"enum": ["voice", "text"]},
        },
        "timeoutMs": {"type": "integer", "minimum": 1},
        "resultAllowlist": {
            "type": "array", "items": {"type": "string", "pattern": r"^\w+(\.\w+)*$"},
        },
        "intentKeywords": {"type": "array", "items": {"type": "string", "minLength": 1}},
        "permissions": {"type": "array", "items": {"type": "string", "minLength": 1}},
        "idempotent": {"type": "boolean"},
        "cacheTtlS": {"type": "integer", "minimum": 1},
        "dependsOn": {"type": "array", "items": {"type": "string"}},
        "safetyRules": {"type": "array", "items": {"type": "string", "minLength": 1}},
        "parameters": {"type": "object"},
        "http": {
            "type": "object", "required": ["method", "path", "baseUrlEnv"],
            "properties": {
                "method": {"enum": ["GET", "POST", "PUT", "PATCH", "DELETE"]},
                "path": {"type": "string", "pattern": "^/"},
                "baseUrlEnv": {"type": "string", "pattern": "^[A-Z][A-Z0-9_]*$"},
            },
        },
    },
}  # fmt: skip

ALLOWED_HANDLER_IMPORTS = re.compile(r"^(tools\._core|tools\._kb|tools\._support)(\.|$)")


def read_schema(tool_id: str) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((FOLDERS[tool_id] / "schema.json").read_text())
    return schema


def doc_sections(tool_id: str) -> dict[str, str]:
    text = (FOLDERS[tool_id] / "doc.md").read_text()
    parts = re.split(r"^## (.+)$", text, flags=re.MULTILINE)
    return {parts[i].strip(): parts[i + 1].strip() for i in range(1, len(parts), 2)}


def example_blocks(tool_id: str) -> list[Any]:
    examples = doc_sections(tool_id)["Examples"]
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)\n```", examples, re.S)]


def iter_subschemas(schema: Any) -> list[dict[str, Any]]:
    """The schema and every schema nested in it (not the names inside "properties")."""
    if not isinstance(schema, dict):
        return []
    found = [schema]
    for name in ("properties", "$defs"):
        for sub in schema.get(name, {}).values():
            found += iter_subschemas(sub)
    for name in ("items", "additionalProperties"):
        found += iter_subschemas(schema.get(name))
    for sub in schema.get("anyOf", []):
        found += iter_subschemas(sub)
    return found


def test_all_expected_tools_exist() -> None:
    assert set(TOOL_IDS) >= EXPECTED_TOOLS
    assert set(HTTP_TOOL_IDS) >= {"care_api_get_appointments", "care_api_reschedule_appointment"}


@pytest.mark.parametrize("tool_id", TOOL_IDS)
def test_folder_has_exactly_its_files(tool_id: str) -> None:
    names = {p.name for p in FOLDERS[tool_id].iterdir() if p.name != "__pycache__"}
    assert names == (HTTP_TOOL_FILES if tool_id in HTTP_TOOL_IDS else REQUIRED_FILES)


@pytest.mark.parametrize("tool_id", HTTP_TOOL_IDS)
def test_http_tools_send_every_argument_once_and_have_a_deadline(tool_id: str) -> None:
    schema = read_schema(tool_id)
    http = schema["http"]
    in_path = re.findall(r"\{([^{}]+)\}", http["path"])
    sent = [*in_path, *http.get("query", []), *http.get("body", [])]
    assert sorted(sent) == sorted(schema["parameters"]["properties"])
    assert set(in_path) <= set(schema["parameters"]["required"])
    assert schema["timeoutMs"] <= 3000  # within the voice budget's hard timeout
    assert not (http["method"] in ("GET", "DELETE") and http.get("body"))


@pytest.mark.parametrize("tool_id", TOOL_IDS)
def test_metadata_follows_the_contract(tool_id: str) -> None:
    schema = read_schema(tool_id)
    Draft202012Validator(METADATA_SCHEMA).validate(schema)
    assert schema["toolId"] == tool_id
    if schema["sensitivity"] in ("high", "critical"):
        assert schema.get("intentKeywords"), "high/critical tools need intentKeywords"
    if schema["sensitivity"] == "critical":
        assert schema["requiresConfirmation"] is True
    if "cacheTtlS" in schema:
        assert schema.get("idempotent") is True, "only idempotent tools may be cached"
    if schema["category"] == "retrieval":
        assert schema.get("idempotent") is True
    assert set(schema.get("dependsOn", [])) <= set(TOOL_IDS) - {tool_id}


@pytest.mark.parametrize("tool_id", TOOL_IDS)
def test_parameters_are_a_valid_gemini_compatible_schema(tool_id: str) -> None:
    parameters = read_schema(tool_id)["parameters"]
    Draft202012Validator.check_schema(parameters)
    assert parameters["type"] == "object"
    assert parameters["additionalProperties"] is False
    assert set(parameters["required"]) <= set(parameters["properties"])
    assert "confirmation_id" not in parameters["properties"]
    for sub in iter_subschemas(parameters):
        assert set(sub) <= GEMINI_KEYWORDS, f"unsupported keywords {set(sub) - GEMINI_KEYWORDS}"
        assert all(isinstance(value, str) for value in sub.get("enum", []))
    for name, prop in parameters["properties"].items():
        assert prop.get("description"), f"parameter {name} has no description"


@pytest.mark.parametrize("tool_id", TOOL_IDS)
def test_doc_summary_has_two_to_four_lines(tool_id: str) -> None:
    text = (FOLDERS[tool_id] / "doc_summary.md").read_text()
    lines = [line for line in text.splitlines() if line.strip()]
    assert 2 <= len(lines) <= 4


@pytest.mark.parametrize("tool_id", TOOL_IDS)
def test_doc_has_every_section_filled(tool_id: str) -> None:
    text = (FOLDERS[tool_id] / "doc.md").read_text()
    assert text.startswith(f"# {tool_id}\n")
    sections = doc_sections(tool_id)
    for section in DOC_SECTIONS:
        assert sections.get(section), f"section {section} missing or empty"
    for name in read_schema(tool_id)["parameters"]["properties"]:
        assert f"`{name}`" in sections["Parameters"], f"parameter {name} undocumented"


@pytest.mark.parametrize("tool_id", TOOL_IDS)
def test_doc_examples_are_valid_calls_and_envelopes(tool_id: str) -> None:
    schema = read_schema(tool_id)
    validator = Draft202012Validator(schema["parameters"])
    blocks = example_blocks(tool_id)
    calls = [block for block in blocks if "ok" not in block]
    envelopes = [normalize_envelope(block) for block in blocks if "ok" in block]
    assert calls
    assert envelopes
    for call in calls:
        validator.validate(call)
    successes = [envelope for envelope in envelopes if envelope.ok]
    assert successes
    for envelope in successes:
        for path in schema["resultAllowlist"]:
            assert path.split(".")[0] in envelope.data
    errors_doc = doc_sections(tool_id)["Errors"]
    for envelope in envelopes:
        if not envelope.ok:
            assert isinstance(envelope.error, ToolFailure)
            assert envelope.error.type.value in errors_doc


@pytest.mark.parametrize("tool_id", HANDLER_TOOL_IDS)
def test_handler_defines_execute_with_two_parameters(tool_id: str) -> None:
    tree = ast.parse((FOLDERS[tool_id] / "handler.py").read_text())
    execute = [
        node
        for node in tree.body
        if isinstance(node, ast.AsyncFunctionDef) and node.name == "execute"
    ]
    assert len(execute) == 1
    arguments = execute[0].args
    assert [arg.arg for arg in arguments.args] == ["args", "ctx"]
    assert not arguments.posonlyargs
    assert not arguments.kwonlyargs
    assert arguments.vararg is None
    assert arguments.kwarg is None


@pytest.mark.parametrize("tool_id", HANDLER_TOOL_IDS)
def test_handler_imports_only_the_tool_runtime(tool_id: str) -> None:
    tree = ast.parse((FOLDERS[tool_id] / "handler.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules = [node.module or ""]
        else:
            continue
        for module in modules:
            assert module.split(".")[0] != "gateway", module
            if module.split(".")[0] == "tools":
                assert ALLOWED_HANDLER_IMPORTS.match(module), module
