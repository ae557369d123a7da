"""The build: every mistake reported at once, deterministic artifacts, provider adapters."""

from __future__ import annotations

import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import orjson
import pytest

from registry_build import build_registry
from registry_build.build import serialize_artifact

REPO = Path(__file__).resolve().parents[3]
BROKEN = REPO / "tests" / "fixtures" / "broken_tools"
BROKEN_EXTRA = REPO / "tests" / "fixtures" / "broken_tools_extra"
RUNNER_TOOLS = REPO / "tests" / "fixtures" / "runner_tools"

# Each broken fixture folder and a fragment its error must contain.
EXPECTED_ERRORS = {
    "bad_json": ("schema.json", "invalid JSON"),
    "missing_doc": ("doc.md", "missing required file doc.md"),
    "missing_section": ("doc.md", "missing the section '## Errors'"),
    "no_execute": ("handler.py", "defines no top-level 'async def execute"),
    "sync_execute": ("handler.py", "must be 'async def'"),
    "bad_tool_id": ("schema.json", "'Bad-Id' does not match"),
    "no_allowlist": ("schema.json", "'resultAllowlist' is a required property"),
    "unknown_category": ("schema.json", "'query' is not one of"),
    "invalid_json_schema": ("schema.json", "not a valid JSON Schema"),
    "gemini_oneof": ("schema.json", "gemini cannot express keyword 'oneOf'"),
    "get_tool_doc": ("schema.json", "duplicate toolId 'get_tool_doc'"),
    "critical_no_keywords": ("schema.json", "needs non-empty intentKeywords"),
    "declares_confirmation_id": ("schema.json", "must not declare 'confirmation_id'"),
    "handler_syntax_error": ("handler.py", "does not parse"),
    "three_params": ("handler.py", "exactly two parameters"),
    "long_summary": ("doc_summary.md", "5 non-empty lines"),
    "unknown_dependency": ("schema.json", "unknown tool 'no_such_tool'"),
    "schema_not_object": ("schema.json", "must hold a JSON object"),
}


def test_every_mistake_is_reported_in_one_run() -> None:
    result = build_registry([BROKEN, BROKEN_EXTRA])
    assert result.artifact is None
    messages = [str(e) for e in result.errors]
    for folder, (file, fragment) in EXPECTED_ERRORS.items():
        hits = [m for m in messages if f"/{folder}/{file}" in m and fragment in m]
        assert hits, f"no error for {folder}/{file} containing {fragment!r}: {messages}"
    # The same tool id in two --tools folders.
    assert any("broken_tools_extra/good_tool" in m and "duplicate toolId" in m for m in messages)
    # The one good tool among them produced no error of its own.
    assert not any("/broken_tools/good_tool/" in m for m in messages)
    assert len({m.split(":")[0].split("/broken_tools/")[-1].split("/")[0] for m in messages}) >= 11


def test_cli_prints_all_errors_and_exits_non_zero(tmp_path: Path) -> None:
    out = tmp_path / "artifact.json"
    done = subprocess.run(
        [sys.executable, "-m", "registry_build", "--tools", str(BROKEN), "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 1
    assert "registry build failed" in done.stderr
    for folder in EXPECTED_ERRORS:
        assert f"/{folder}/" in done.stderr
    assert not out.exists()


def test_cli_builds_the_project_tools(tmp_path: Path) -> None:
    out = tmp_path / "reg.json"
    done = subprocess.run(
        [sys.executable, "-m", "registry_build", "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    artifact = orjson.loads(out.read_bytes())
    ids = {t["toolId"] for t in artifact["tools"]}
    assert "get_tool_doc" in ids  # the built-in is always there
    assert artifact["version"].startswith("1.0.")


def test_two_builds_are_byte_identical_but_for_the_timestamp(tmp_path: Path) -> None:
    tree = tmp_path / "tools"
    shutil.copytree(RUNNER_TOOLS, tree)
    first = build_registry([tree], now=datetime(2026, 1, 1, tzinfo=UTC)).artifact
    second = build_registry([tree], now=datetime(2026, 6, 1, tzinfo=UTC)).artifact
    assert first is not None
    assert second is not None
    assert first["buildTimestamp"] != second["buildTimestamp"]
    second["buildTimestamp"] = first["buildTimestamp"]
    assert serialize_artifact(first) == serialize_artifact(second)


def test_version_follows_content(tmp_path: Path) -> None:
    tree = tmp_path / "tools"
    shutil.copytree(RUNNER_TOOLS, tree)
    before = build_registry([tree]).artifact
    doc = tree / "echo" / "doc_summary.md"
    doc.write_text("Echoes the text back, changed.\n")
    after = build_registry([tree]).artifact
    assert before is not None
    assert after is not None
    assert before["version"] != after["version"]
    assert after["version"].startswith("1.0.")
    assert len(after["version"]) == len("1.0.") + 8


def test_artifact_shape_and_provider_schemas() -> None:
    artifact = build_registry([RUNNER_TOOLS]).artifact
    assert artifact is not None
    assert set(artifact) == {"version", "gitCommit", "buildTimestamp", "tools"}
    echo = next(t for t in artifact["tools"] if t["toolId"] == "echo")
    for key in ("toolId", "category", "sensitivity", "requiresConfirmation", "modes"):
        assert key in echo
    assert "parameters" not in echo
    assert echo["jsonSchema"]["required"] == ["text"]
    assert Path(echo["handlerPath"]).is_absolute()
    realtime = echo["providerSchemas"]["openaiRealtime"]
    assert realtime["type"] == "function"
    assert realtime["name"] == "echo"
    assert realtime["parameters"] == echo["jsonSchema"]
    chat = echo["providerSchemas"]["openaiChat"]
    assert chat == {
        "type": "function",
        "function": {
            "name": "echo",
            "description": realtime["description"],
            "parameters": echo["jsonSchema"],
        },
    }
    gemini = echo["providerSchemas"]["gemini"]
    assert gemini["parametersJsonSchema"] == echo["jsonSchema"]
    legacy = echo["providerSchemas"]["geminiSchema"]["parameters"]
    assert legacy["type"] == "OBJECT"
    assert legacy["properties"]["count"]["type"] == "INTEGER"


def test_confirmable_tools_get_an_optional_confirmation_id() -> None:
    artifact = build_registry([REPO / "tools"]).artifact
    assert artifact is not None
    by_id = {t["toolId"]: t for t in artifact["tools"]}
    for tool in by_id.values():
        declared = tool["providerSchemas"]["openaiRealtime"]["parameters"]
        confirmable = tool["requiresConfirmation"] or tool["sensitivity"] == "critical"
        assert ("confirmation_id" in declared.get("properties", {})) == confirmable, tool["toolId"]
        assert "confirmation_id" not in declared.get("required", [])
        assert "confirmation_id" not in tool["jsonSchema"].get("properties", {})


@pytest.mark.parametrize(
    ("keyword", "value"),
    [
        ("allOf", [{"type": "string"}]),
        ("not", {"type": "string"}),
        ("const", "x"),
        ("multipleOf", 2),
        ("exclusiveMinimum", 0),
        ("uniqueItems", True),
        ("patternProperties", {"^a": {"type": "string"}}),
    ],
)
def test_each_keyword_gemini_cannot_express_is_named(
    tmp_path: Path, keyword: str, value: object
) -> None:
    tree = tmp_path / "tools"
    shutil.copytree(RUNNER_TOOLS / "echo", tree / "echo")
    schema_path = tree / "echo" / "schema.json"
    schema = orjson.loads(schema_path.read_bytes())
    schema["parameters"]["properties"]["text"][keyword] = value
    schema_path.write_bytes(orjson.dumps(schema))
    result = build_registry([tree])
    assert result.artifact is None
    assert any(
        f"gemini cannot express keyword '{keyword}' at parameters.properties.text" in str(e)
        for e in result.errors
    ), [str(e) for e in result.errors]


def test_dependency_cycles_are_refused(tmp_path: Path) -> None:
    tree = tmp_path / "tools"
    for name, dep in (("alpha", "beta"), ("beta", "alpha")):
        shutil.copytree(RUNNER_TOOLS / "echo", tree / name)
        path = tree / name / "schema.json"
        schema = orjson.loads(path.read_bytes())
        schema["toolId"] = name
        schema["dependsOn"] = [dep]
        path.write_bytes(orjson.dumps(schema))
    result = build_registry([tree])
    assert result.artifact is None
    assert any("dependsOn cycle" in str(e) for e in result.errors)


def test_missing_tools_folder_is_an_error(tmp_path: Path) -> None:
    result = build_registry([tmp_path / "nope"])
    assert result.artifact is None
    assert "does not exist" in str(result.errors[0])
