"""A hostile web page against a local gateway with auth off (``scripts/serve``): a page of
another origin, or a DNS-rebinding page (``Host: evil.example:8080``), gets nowhere; a page of
this machine gets in as an anonymous user with no roles unless a setting grants them."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest
from harness import Client, Gateway, GatewayFactory
from process_kit import build_registry_file, gateway_process


async def local_gateway(gateway_factory: GatewayFactory, **settings: object) -> Gateway:
    return await gateway_factory(auth="none", auth_secret=None, **settings)


async def upgrade(gateway: Gateway, **headers: str) -> aiohttp.ClientWebSocketResponse:
    return await gateway.http.ws_connect(f"{gateway.url}/v1/session", headers=headers)


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "https://evil.example"},
        {"Origin": "http://evil.example:8080"},
        {"Origin": "null"},  # a sandboxed frame or a file:// page
        {"Origin": "http://127.0.0.1.evil.example"},
    ],
)
async def test_a_page_of_another_origin_is_refused(
    gateway_factory: GatewayFactory, headers: dict[str, str]
) -> None:
    gateway = await local_gateway(gateway_factory)
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await upgrade(gateway, **headers)
    assert refused.value.status == 403
    assert not gateway.manager.sessions


async def test_a_dns_rebinding_page_is_refused_everywhere(gateway_factory: GatewayFactory) -> None:
    """The page's own origin *is* its Host: an origin check alone would let it in."""
    gateway = await local_gateway(gateway_factory)
    rebound = {"Host": "evil.example:8080", "Origin": "http://evil.example:8080"}
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await upgrade(gateway, **rebound)
    assert refused.value.status == 403
    for path in ("/", "/metrics", "/readyz", "/static/js/main.js"):
        async with gateway.http.get(f"{gateway.url}{path}", headers=rebound) as response:
            assert response.status == 403, path
            body = await response.json()
            assert body["error"]["code"] == "forbidden"
    async with gateway.http.post(
        f"{gateway.url}/twilio/voice", data={"CallSid": "CA1"}, headers={"Host": "evil.example"}
    ) as response:
        assert response.status == 403


async def test_the_hostile_pages_attack_of_the_report_fails(
    gateway_factory: GatewayFactory,
) -> None:
    """The report: a page on evil.example connected, got admin and caregiver, approved its own
    create_care_log. Now it is refused at the door; and a local page has no such roles."""
    gateway = await local_gateway(gateway_factory)
    with pytest.raises(aiohttp.WSServerHandshakeError):
        await upgrade(gateway, Origin="https://evil.example")
    ws = await upgrade(gateway, Origin="http://localhost:8080")
    client = Client(ws)
    try:
        started = await client.start("text")
        assert "create_care_log" not in {t["name"] for t in started["tools"]}
        await client.send("text.send", text='/tool create_care_log {"note":"x","category":"meal"}')
        finished = await client.last("tool.finished")
        assert finished["ok"] is False
        assert finished["error"]["type"] == "FORBIDDEN"
        assert gateway.decisions("create_care_log") == [("create_care_log", "blocked")]
    finally:
        await ws.close()


@pytest.mark.parametrize(
    "origin", [None, "http://localhost:8080", "http://127.0.0.1:3000", "https://[::1]"]
)
async def test_pages_and_programs_of_this_machine_get_in(
    gateway_factory: GatewayFactory, origin: str | None
) -> None:
    gateway = await local_gateway(gateway_factory)
    ws = await upgrade(gateway, **({} if origin is None else {"Origin": origin}))
    client = Client(ws)
    try:
        started = await client.start("text")
        assert started["type"] == "session.started"
    finally:
        await ws.close()


async def test_a_setting_grants_the_anonymous_user_roles(gateway_factory: GatewayFactory) -> None:
    gateway = await local_gateway(gateway_factory, anonymous_roles=["caregiver"])
    ws = await upgrade(gateway)
    client = Client(ws)
    try:
        started = await client.start("text")
        assert "create_care_log" in {t["name"] for t in started["tools"]}
    finally:
        await ws.close()


async def test_with_auth_on_a_listed_origin_is_required(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory(allowed_origins=["https://app.example.com"])
    async with gateway.connect(headers={"Origin": "https://app.example.com"}) as client:
        await client.start("text")
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        async with gateway.connect(headers={"Origin": "https://evil.example"}):
            pass
    assert refused.value.status == 403


async def test_the_start_up_log_says_what_is_open(tmp_path: Path) -> None:
    registry = build_registry_file(tmp_path / "registry.json")
    secret = "startup-log-secret-0123456789abcdef"
    async with gateway_process(tmp_path, registry, auth="jwt", auth_secret=secret) as node:
        await node.stop()
    events = {record["event"] for record in node.log_records()}
    assert {"any_origin_accepted", "metrics_open"} <= events
    async with gateway_process(
        tmp_path,
        registry,
        name="local",
        auth="none",
        allowed_origins="https://app.example.com",
        metrics_token="scrape-token-0123",
    ) as node:
        await node.stop()
    events = {record["event"] for record in node.log_records()}
    assert "auth_disabled" in events
    assert not {"any_origin_accepted", "metrics_open"} & events
