"""HTTP tools in the registry: the build's checks of the ``http`` section (all errors at once),
the artifact entry, freshness without a handler.py, and availability at load time."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gateway.errors import RegistryStaleError
from gateway.registry import load_registry
from registry_build import build_registry
from registry_build.build import serialize_artifact

REPO = Path(__file__).resolve().parents[3]
RESCHEDULE = REPO / "tools" / "care_api_reschedule_appointment"
LISTING = REPO / "tools" / "care_api_get_appointments"
ECHO = REPO / "tests" / "fixtures" / "runner_tools" / "echo"
CARE_API = {"CARE_API_URL": "http://127.0.0.1:8090"}


def http_tool(root: Path, name: str, source: Path = RESCHEDULE, **changes: Any) -> Path:
    """A copy of an example HTTP tool named ``name``; ``changes`` replace top-level fields of
    schema.json, ``http__X`` fields of its http section (None removes one)."""
    folder = root / name
    shutil.copytree(source, folder, ignore=shutil.ignore_patterns("__pycache__"))
    schema = json.loads((folder / "schema.json").read_text())
    schema["toolId"] = name
    for key, value in changes.items():
        target, field = (schema["http"], key[6:]) if key.startswith("http__") else (schema, key)
        if value is None:
            target.pop(field, None)
        else:
            target[field] = value
    (folder / "schema.json").write_text(json.dumps(schema))
    return folder


def with_property(name: str, schema: dict[str, Any], *, required: bool = False) -> dict[str, Any]:
    parameters = json.loads((RESCHEDULE / "schema.json").read_text())["parameters"]
    parameters["properties"][name] = {"description": "x", **schema}
    if required:
        parameters["required"].append(name)
    return parameters


# folder → changes, and a fragment of the error it must produce (all in one build)
BROKEN: dict[str, tuple[dict[str, Any], str]] = {
    "bad_method": ({"http__method": "TRACE"}, "http/method: 'TRACE' is not one of"),
    "no_base_url_env": ({"http__baseUrlEnv": None}, "'baseUrlEnv' is a required property"),
    "bad_auth": ({"http__auth": "anyone"}, "http/auth: 'anyone' is not valid under any"),
    "too_big": ({"http__maxResponseBytes": 10_000_000}, "is greater than the maximum of 4194304"),
    "undeclared_placeholder": (
        {"http__path": "/v1/appointments/{appointment_id}/{visit}"},
        "http.path names 'visit', which is not a declared argument",
    ),
    "twice": ({"http__query": ["start"]}, "argument 'start' is listed twice (http.query and"),
    "unsent": ({"http__body": ["start"]}, "argument 'reason' is declared but never sent"),
    "get_with_body": ({"http__method": "GET"}, "http.body is not allowed with GET"),
    "no_timeout": ({"timeoutMs": None}, "an HTTP tool needs timeoutMs"),
    "reserved_env": (
        {"http__baseUrlEnv": "GATEWAY_AUTH_SECRET"},
        "'GATEWAY_AUTH_SECRET' is reserved for the gateway's own settings",
    ),
    "optional_placeholder": (
        {"http__path": "/v1/{reason}/{appointment_id}", "http__body": ["start"]},
        "placeholder {reason} must be a required argument",
    ),
    "dot_segment": ({"http__path": "/v1/../{appointment_id}"}, "'.' or '..' segments"),
    "query_in_path": ({"http__path": "/v1/{appointment_id}?x=1"}, "must not hold a query"),
    "query_object": (
        {
            "parameters": with_property("filter", {"type": "object"}),
            "http__query": ["filter"],
        },
        "http.query argument 'filter' must be a string, number",
    ),
    "object_placeholder": (
        {
            "parameters": with_property("where", {"type": "array"}, required=True),
            "http__path": "/v1/{where}/{appointment_id}",
        },
        "placeholder {where} must be a string, integer or number argument",
    ),
}


def test_every_broken_http_section_is_reported_in_one_build(tmp_path: Path) -> None:
    for name, (changes, _) in BROKEN.items():
        http_tool(tmp_path, name, **changes)
    both = http_tool(tmp_path, "both")
    shutil.copy(ECHO / "handler.py", both / "handler.py")
    neither = tmp_path / "neither"
    shutil.copytree(ECHO, neither)
    (neither / "handler.py").unlink()
    http_tool(tmp_path, "good_http_tool")

    result = build_registry([tmp_path], include_builtin=False)

    assert result.artifact is None
    messages = [str(error) for error in result.errors]
    for name, (_, fragment) in BROKEN.items():
        hits = [m for m in messages if f"/{name}/schema.json" in m and fragment in m]
        assert hits, f"no error for {name} containing {fragment!r}: {messages}"
    assert any("/both/handler.py" in m and "must not have a handler.py" in m for m in messages), (
        messages
    )
    assert any(
        "/neither/handler.py" in m and "missing required file handler.py" in m for m in messages
    ), messages
    assert not any("/good_http_tool/" in m for m in messages)


def test_the_artifact_entry_of_an_http_tool(tmp_path: Path) -> None:
    http_tool(tmp_path, "lookup", source=LISTING)
    artifact = build_registry([tmp_path], include_builtin=False).artifact
    assert artifact is not None
    (entry,) = artifact["tools"]
    assert entry["handlerPath"] is None
    assert entry["folderPath"] == str((tmp_path / "lookup").resolve())
    assert entry["http"] == {
        "method": "GET",
        "path": "/v1/appointments",
        "query": ["from_date", "to_date", "status"],
        "body": [],  # the default, explicit
        "baseUrlEnv": "CARE_API_URL",
        "auth": "user",
        "maxResponseBytes": 262144,
    }
    declared = entry["providerSchemas"]["openaiRealtime"]["parameters"]["properties"]
    assert set(declared) == {"from_date", "to_date", "status"}


def test_http_tool_artifacts_are_deterministic_and_portable(tmp_path: Path) -> None:
    for where in ("a", "b"):
        http_tool(tmp_path / where, "lookup", source=LISTING)
        http_tool(tmp_path / where, "move")
    when = datetime(2030, 1, 1, tzinfo=UTC)
    first = build_registry([tmp_path / "a"], now=when).artifact
    again = build_registry([tmp_path / "a"], now=when).artifact
    elsewhere = build_registry([tmp_path / "b"], now=when).artifact
    assert first is not None
    assert again is not None
    assert elsewhere is not None
    assert serialize_artifact(first) == serialize_artifact(again)
    assert first["version"] == elsewhere["version"]  # the paths do not count


@pytest.mark.parametrize("change", ["add a handler.py", "edit schema.json", "edit doc.md"])
def test_an_http_tool_that_changed_makes_the_artifact_stale(tmp_path: Path, change: str) -> None:
    folder = http_tool(tmp_path / "tools", "move")
    out = tmp_path / "registry.json"
    out.write_bytes(serialize_artifact(build_registry([tmp_path / "tools"]).artifact or {}))
    assert "move" in load_registry(out, environ=CARE_API)
    if change == "add a handler.py":
        shutil.copy(ECHO / "handler.py", folder / "handler.py")
    else:
        name = change.split()[-1]
        (folder / name).write_text((folder / name).read_text() + "\n")
    with pytest.raises(RegistryStaleError, match="move changed since the registry was built"):
        load_registry(out, environ=CARE_API)


def test_without_its_base_url_an_http_tool_is_unavailable_and_never_offered(
    project_artifact: Path,
) -> None:
    registry = load_registry(project_artifact, environ={})
    unavailable = {tool.tool_id: tool.reason for tool in registry.unavailable()}
    assert unavailable == {
        "care_api_get_appointments": "CARE_API_URL is not set",
        "care_api_reschedule_appointment": "CARE_API_URL is not set",
    }
    for tool_id in unavailable:
        assert registry.get(tool_id) is None
        assert tool_id not in registry
        assert tool_id not in registry.tool_ids()
        assert tool_id not in {s.tool_id for s in registry.visible_to(["admin"], None)}
        assert tool_id not in {s.tool_id for s in registry.visible_to([], [tool_id])}
        assert tool_id not in registry.model_instructions("Be kind.", ["admin"])
    assert "kb_search" in registry.model_instructions("Be kind.", [])


def test_with_its_base_url_an_http_tool_is_offered(project_artifact: Path) -> None:
    registry = load_registry(project_artifact, environ={"CARE_API_URL": "http://127.0.0.1:9"})
    assert registry.unavailable() == []
    spec = registry.get("care_api_reschedule_appointment")
    assert spec is not None
    assert spec.handler_path is None
    assert spec.http is not None
    assert (spec.http.method, spec.http.path_arguments) == ("PATCH", ("appointment_id",))
    assert spec.needs_confirmation
    visible = {s.tool_id for s in registry.visible_to([])}
    assert {"care_api_get_appointments", "care_api_reschedule_appointment"} <= visible
    assert "- care_api_get_appointments: " in registry.model_instructions("Hi.", [])


def test_gateway_check_lists_an_unavailable_tool_with_its_reason(project_artifact: Path) -> None:
    environ = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("GATEWAY_") and key != "CARE_API_URL"
    }
    environ.update(GATEWAY_AUTH="none", GATEWAY_REGISTRY=str(project_artifact))
    command = [sys.executable, "-m", "gateway", "check"]
    done = subprocess.run(
        command, capture_output=True, text=True, cwd=REPO, env=environ, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert ": 10 tools, 2 unavailable" in lines[0]
    (listing,) = [line for line in lines if "care_api_get_appointments" in line]
    assert listing.split()[1:4] == ["retrieval", "low", "text+voice"]
    assert listing.endswith("unavailable: CARE_API_URL is not set")

    environ["CARE_API_URL"] = "ftp://files.example"
    done = subprocess.run(
        command, capture_output=True, text=True, cwd=REPO, env=environ, timeout=60, check=False
    )
    assert "unavailable: CARE_API_URL is not an absolute http(s) URL" in done.stdout

    environ["CARE_API_URL"] = "http://127.0.0.1:8090"
    done = subprocess.run(
        command, capture_output=True, text=True, cwd=REPO, env=environ, timeout=60, check=False
    )
    assert ": 12 tools" in done.stdout.splitlines()[0]
    assert "unavailable" not in done.stdout
    assert "[http PATCH /v1/appointments/{appointment_id}; confirmation]" in done.stdout


def test_a_service_token_too_short_to_blank_makes_the_tool_unavailable(tmp_path: Path) -> None:
    """A 7-character token reached ``tool.finished.data`` when the API echoed it (the answer's
    blanking skips strings that short): such a token is refused when the registry loads, and
    ``gateway check`` names the tool and the reason, never the token."""
    http_tool(tmp_path / "tools", "move", http__auth={"serviceTokenEnv": "MOVE_API_TOKEN"})
    artifact = build_registry([tmp_path / "tools"], include_builtin=False).artifact
    assert artifact is not None
    out = tmp_path / "registry.json"
    out.write_bytes(serialize_artifact(artifact))
    short = {**CARE_API, "MOVE_API_TOKEN": "tok-7ch"}

    registry = load_registry(out, environ=short)
    assert registry.get("move") is None
    (refused,) = registry.unavailable()
    assert refused.tool_id == "move"
    assert refused.reason.startswith("MOVE_API_TOKEN holds a token shorter than 8 characters")
    assert "move" in load_registry(out, environ={**short, "MOVE_API_TOKEN": "tok-8chr"})

    environ = {key: value for key, value in os.environ.items() if not key.startswith("GATEWAY_")}
    environ.update(short, GATEWAY_REGISTRY=str(out))
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "check"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=environ,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (listing,) = [line for line in done.stdout.splitlines() if line.split()[0] == "move"]
    assert listing.endswith(
        "unavailable: MOVE_API_TOKEN holds a token shorter than 8 characters: too short to be "
        "a secret, and to be blanked out of the API's answers"
    )
    assert "tok-7ch" not in done.stdout + done.stderr
