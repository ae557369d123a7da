"""Fixtures for the bundled tools: load handlers by file path and run them like the runner.

Handlers are loaded with ``spec_from_file_location`` under the name ``gateway_tool_<id>``, the
way the gateway loads them, never imported as packages (tool folders have no ``__init__.py``).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from tools._core import ToolContext, ToolError, ToolResponse, normalize_envelope

REPO = Path(__file__).resolve().parents[2]
TOOLS_DIR = REPO / "tools"
BUILTIN_DIR = REPO / "registry_build" / "builtin"


def tool_folder(tool_id: str) -> Path:
    """Project tools live in tools/; built-ins (get_tool_doc) in registry_build/builtin/."""
    builtin = BUILTIN_DIR / tool_id
    return builtin if builtin.is_dir() else TOOLS_DIR / tool_id


LoadHandler = Callable[[str], ModuleType]
MakeCtx = Callable[..., ToolContext]
RunTool = Callable[..., Awaitable[ToolResponse]]


def read_schema(tool_id: str) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads((tool_folder(tool_id) / "schema.json").read_text())
    return schema


def resolve_path(data: Any, dotted: str) -> bool:
    """Whether ``dotted`` (e.g. ``a.b``) names a field present in ``data``."""
    node = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


@pytest.fixture(scope="session")
def tools_dir() -> Path:
    return TOOLS_DIR


@pytest.fixture(scope="session")
def load_handler() -> LoadHandler:
    loaded: dict[str, ModuleType] = {}

    def load(tool_id: str) -> ModuleType:
        if tool_id not in loaded:
            path = tool_folder(tool_id) / "handler.py"
            spec = importlib.util.spec_from_file_location(f"gateway_tool_{tool_id}", path)
            assert spec is not None
            assert spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            # As the gateway's loader does: registered before it runs.
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
            loaded[tool_id] = module
        return loaded[tool_id]

    return load


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    # Deliberately not created: tools must create their data directory themselves.
    return tmp_path / "tool-data"


@pytest.fixture
def make_ctx(data_dir: Path) -> MakeCtx:
    def make(**overrides: Any) -> ToolContext:
        fields: dict[str, Any] = {
            "session_id": "sess-1",
            "user_id": "user-alice",
            "roles": ("user",),
            "mode": "voice",
            "call_id": "call-1",
            "tool_id": "test_tool",
            "data_dir": data_dir,
        }
        fields.update(overrides)
        return ToolContext(**fields)

    return make


@pytest.fixture
def run_tool(load_handler: LoadHandler, make_ctx: MakeCtx, data_dir: Path) -> RunTool:
    """Validate args against the tool's schema, run the handler, check the envelope.

    Like the runner: a raised ``ToolError`` becomes a failure envelope. On success every
    ``resultAllowlist`` path must exist in ``data``; on failure the message must not leak
    a traceback or a file path.
    """

    async def run(
        tool_id: str, args: dict[str, Any], ctx: ToolContext | None = None
    ) -> ToolResponse:
        schema = read_schema(tool_id)
        Draft202012Validator(schema["parameters"]).validate(args)
        handler = load_handler(tool_id)
        context = ctx if ctx is not None else make_ctx(tool_id=tool_id)
        try:
            returned = await handler.execute(args, context)
        except ToolError as exc:
            returned = ToolResponse.failure(
                exc.type,
                exc.message,
                retryable=exc.retryable,
                partial_side_effects=exc.partial_side_effects,
            )
        response = normalize_envelope(returned)
        envelope = response.to_envelope({"toolId": tool_id, "callId": context.call_id})
        json.dumps(envelope)  # the model receives it serialised
        if response.ok:
            for path in schema["resultAllowlist"]:
                assert resolve_path(envelope["data"], path), f"{tool_id}: {path} not in data"
        else:
            assert response.error is not None
            message = response.error.message
            assert message
            assert "Traceback" not in message
            assert str(data_dir) not in message
            assert str(REPO) not in message
        return response

    return run
