"""HTTP tools end to end: client ↔ gateway (local model) ↔ the example care API, over real sockets.

The model's ``/tool NAME {json}`` directive makes the call; the API checks the user's JWT (the
gateway's secret) and answers for that user; the client sees the result through the tool's
``resultAllowlist``. Without ``CARE_API_URL`` the tools are neither offered nor run.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from harness import (
    SECRET,
    DelegatingTransport,
    Gateway,
    GatewayFactory,
    first,
    model_results,
    token,
)

from fakes.care_api import FakeCareApi
from gateway.config import Settings
from gateway.providers import make_transport
from gateway.registry import Registry, load_registry
from transports.base import Transport, UpstreamConfig

REPO = Path(__file__).resolve().parents[2]
TODAY = date(2030, 1, 7)
HTTP_TOOLS = {"care_api_get_appointments", "care_api_reschedule_appointment"}


@pytest.fixture
async def api() -> AsyncIterator[FakeCareApi]:
    async with FakeCareApi(jwt_secret=SECRET, today=TODAY) as api:
        yield api


def command(name: str, args: dict[str, Any]) -> str:
    return f"/tool {name} {json.dumps(args)}"


async def test_the_models_call_reaches_the_api_with_the_users_token(
    gateway_factory: GatewayFactory, project_artifact: Path, api: FakeCareApi
) -> None:
    registry = load_registry(project_artifact, environ={"CARE_API_URL": api.base_url})
    gateway = await gateway_factory(registry=registry)
    bearer = token("alice")
    async with gateway.connect(headers={"Authorization": f"Bearer {bearer}"}) as client:
        started = await client.start("text")
        assert {tool["name"] for tool in started["tools"]} >= HTTP_TOOLS
        await client.send(
            "text.send", text=command("care_api_get_appointments", {"status": "scheduled"})
        )
        events = await client.until_reply()
    finished = first(events, "tool.finished")
    assert finished["ok"] is True
    assert finished["data"]["count"] == 3
    assert [a["id"] for a in finished["data"]["appointments"]] == ["A1001", "A1002", "A1003"]
    assert "internalNote" not in finished["data"]["appointments"][0]  # outside the allowlist
    ((name, envelope),) = model_results(events[-1]["text"])
    assert name == "care_api_get_appointments"
    assert envelope["data"]["appointments"][0]["patient"] == "alice"
    (seen,) = api.requests
    assert seen.headers["Authorization"] == f"Bearer {bearer}"
    assert (seen.patient, seen.query_string) == ("alice", "status=scheduled")
    assert gateway.decisions() == [("care_api_get_appointments", "executed")]


async def test_a_confirmed_reschedule_runs_once_after_the_approval(
    gateway_factory: GatewayFactory, project_artifact: Path, api: FakeCareApi
) -> None:
    registry = load_registry(project_artifact, environ={"CARE_API_URL": api.base_url})
    gateway = await gateway_factory(registry=registry)
    move = {"appointment_id": "A1002", "start": "2030-01-10T13:30:00+00:00"}
    async with gateway.session("text", sub="bob") as client:
        await client.send("text.send", text=command("care_api_reschedule_appointment", move))
        events = await client.until_reply()
        requested = first(events, "confirmation.requested")
        assert requested["parameters"] == move
        assert api.requests == []  # nothing sent before the user approves
        await client.send(
            "confirmation.respond", confirmation_id=requested["confirmation_id"], decision="approve"
        )
        events = await client.until_reply()
    finished = first(events, "tool.finished")
    assert finished["ok"] is True
    assert finished["data"] == {
        "id": "A1002",
        "start": "2030-01-10T13:30:00+00:00",
        "durationMinutes": 45,
        "kind": "physiotherapy",
        "caregiver": "Tom Becker",
        "status": "scheduled",
    }
    (seen,) = api.requests
    assert (seen.method, seen.raw_path, seen.patient) == ("PATCH", "/v1/appointments/A1002", "bob")
    assert json.loads(seen.body) == {"start": "2030-01-10T13:30:00+00:00"}


class _Recording(DelegatingTransport):
    """Keeps the configuration (declarations, instructions) the gateway hands the upstream."""

    def __init__(self, inner: Transport, configs: list[UpstreamConfig]) -> None:
        super().__init__(inner)
        self._configs = configs

    async def connect(self, config: UpstreamConfig) -> None:
        self._configs.append(config)
        await super().connect(config)


async def test_an_unavailable_tool_is_neither_offered_nor_run(
    gateway_factory: GatewayFactory, project_artifact: Path, api: FakeCareApi
) -> None:
    registry: Registry = load_registry(project_artifact, environ={})
    assert {tool.tool_id for tool in registry.unavailable()} == HTTP_TOOLS
    configs: list[UpstreamConfig] = []

    def recording(provider: str, settings: Settings) -> Transport:
        return _Recording(make_transport(provider, settings), configs)

    gateway: Gateway = await gateway_factory(registry=registry, transports=recording)
    async with gateway.session("text", roles=["admin"]) as client:
        offered = {tool["name"] for tool in client.started["tools"]}
        assert "kb_search" in offered
        assert not offered & HTTP_TOOLS
        (config,) = configs
        declared = {tool.name for tool in config.tools}
        assert declared == offered
        assert not any(name in config.instructions for name in HTTP_TOOLS)
        await client.send("text.send", text=command("care_api_get_appointments", {}))
        events = await client.until_reply()
    assert first(events, "tool.finished")["error"]["type"] == "NOT_FOUND"
    assert api.requests == []
