"""Loading the artifact: clear errors when missing or stale, compiled validators, pinning."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest

from gateway.errors import RegistryInvalidError, RegistryMissingError, RegistryStaleError
from gateway.registry import compile_validator, load_registry
from registry_build import build_registry
from registry_build.build import serialize_artifact

REPO = Path(__file__).resolve().parents[3]
RUNNER_TOOLS = REPO / "tests" / "fixtures" / "runner_tools"


def _build(tree: Path, out: Path) -> None:
    result = build_registry([tree])
    assert result.artifact is not None
    out.write_bytes(serialize_artifact(result.artifact))


def test_missing_artifact_names_the_command(tmp_path: Path) -> None:
    with pytest.raises(RegistryMissingError, match="python -m registry_build"):
        load_registry(tmp_path / "nope.json")


def test_a_changed_tool_makes_the_artifact_stale(tmp_path: Path) -> None:
    tree = tmp_path / "tools"
    shutil.copytree(RUNNER_TOOLS, tree)
    out = tmp_path / "reg.json"
    _build(tree, out)
    assert len(load_registry(out)) == 12  # 11 fixtures + the built-in get_tool_doc
    (tree / "echo" / "handler.py").write_text(
        (tree / "echo" / "handler.py").read_text() + "\n# edited\n"
    )
    with pytest.raises(RegistryStaleError, match="echo changed since the registry was built"):
        load_registry(out)


def test_garbage_artifact_is_invalid(tmp_path: Path) -> None:
    out = tmp_path / "reg.json"
    out.write_text("{not json")
    with pytest.raises(RegistryInvalidError):
        load_registry(out)


def test_each_load_is_a_new_pinned_object(tmp_path: Path) -> None:
    tree = tmp_path / "tools"
    shutil.copytree(RUNNER_TOOLS, tree)
    out = tmp_path / "reg.json"
    _build(tree, out)
    first = load_registry(out)
    (tree / "echo" / "doc_summary.md").write_text("A new summary.\n")
    _build(tree, out)
    second = load_registry(out)
    assert first.version != second.version
    echo_first, echo_second = first.get("echo"), second.get("echo")
    assert echo_first is not None
    assert echo_second is not None
    # The session that pinned the first registry still sees the old tool.
    assert echo_first.summary != echo_second.summary


def test_visible_to_filters_by_role_and_session_list(tmp_path: Path) -> None:
    tree = tmp_path / "tools"
    shutil.copytree(RUNNER_TOOLS, tree)
    path = tree / "crasher" / "schema.json"
    schema = orjson.loads(path.read_bytes())
    schema["permissions"] = ["admin"]
    path.write_bytes(orjson.dumps(schema))
    out = tmp_path / "reg.json"
    _build(tree, out)
    registry = load_registry(out)
    plain = {s.tool_id for s in registry.visible_to(["user"])}
    admin = {s.tool_id for s in registry.visible_to(["admin"])}
    assert "crasher" not in plain
    assert "crasher" in admin
    assert {s.tool_id for s in registry.visible_to(["admin"], ["crasher", "echo"])} == {
        "crasher",
        "echo",
    }


SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "minLength": 1},
        "count": {"type": "integer", "minimum": 1},
        "when": {"type": "string", "format": "date-time"},
    },
    "required": ["title"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ({}, "must contain ['title']"),
        ({"title": ""}, "arguments.title"),
        ({"title": "x", "count": True}, "arguments.count must be integer"),
        ({"title": "x", "when": "tomorrow"}, "arguments.when must be date-time"),
        ({"title": "x", "extra": 1}, "must not contain {'extra'}"),
    ],
)
def test_fast_validator_names_the_field(args: dict[str, object], fragment: str) -> None:
    validator = compile_validator(SCHEMA)
    assert validator.fast
    problem = validator.problem(args)
    assert problem is not None
    assert fragment in problem


def test_schemas_outside_the_subset_fall_back_to_jsonschema() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 3}}}
    validator = compile_validator(schema)
    assert not validator.fast
    assert validator.problem({"n": 9}) is None
    problem = validator.problem({"n": 4})
    assert problem is not None
    assert "arguments.n" in problem
