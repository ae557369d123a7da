"""The example HTTP tools do what their doc.md says: each documented call, run through the tool
runner against the example care API (``fakes.care_api``, today = 2030-01-07), gives the
documented envelope (the client's view: ``data`` through the ``resultAllowlist``)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator
from datetime import date
from pathlib import Path
from typing import Any

import jwt
import pytest

from fakes.care_api import FakeCareApi
from gateway.http_tools.shared_client import close_shared_http_client
from gateway.registry import load_registry
from gateway.toolrun import Caller, MemoryAuditSink, ToolCall, ToolRunner

REPO = Path(__file__).resolve().parents[2]
SECRET = "care-api-doc-secret-0123456789abcdef"
HTTP_TOOLS = ("care_api_get_appointments", "care_api_reschedule_appointment")


def documented_calls(tool_id: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(call, envelope) pairs, in the order of the doc's ``## Examples``."""
    text = (REPO / "tools" / tool_id / "doc.md").read_text()
    examples = text.split("## Examples", 1)[1]
    blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)\n```", examples, re.S)]
    return list(zip(blocks[::2], blocks[1::2], strict=True))


@pytest.fixture
async def api() -> AsyncIterator[FakeCareApi]:
    async with FakeCareApi(jwt_secret=SECRET, today=date(2030, 1, 7)) as api:
        yield api
        await close_shared_http_client()


@pytest.mark.parametrize("tool_id", HTTP_TOOLS)
async def test_the_documented_examples_hold(
    tool_id: str, project_artifact: Path, api: FakeCareApi, tmp_path: Path
) -> None:
    registry = load_registry(project_artifact, environ={"CARE_API_URL": api.base_url})
    runner = ToolRunner(registry, data_dir=tmp_path, audit=MemoryAuditSink())
    bearer = jwt.encode({"sub": "alice", "exp": int(time.time()) + 300}, SECRET, "HS256")
    caller = Caller("s-1", "alice", (), "voice", auth_token=bearer)
    pairs = documented_calls(tool_id)
    assert len(pairs) >= 2
    for number, (args, documented) in enumerate(pairs):
        outcome = await runner.run(ToolCall(f"doc-{number}", tool_id, args), caller)
        if documented["ok"]:
            assert outcome.ok, outcome.envelope
            assert outcome.client_data == documented["data"]
        else:
            assert outcome.envelope["error"] == documented["error"]
