"""Keys on one gateway (no Redis: SQLite under its data folder), over real sockets: every bad
input gets a clear error and changes nothing; unknown, malformed, revoked and expired keys are
refused; a key's models, tools and concurrent sessions hold; an unmodified OpenAI SDK realtime
client authenticates with a key; the usage report reads the counters; no key material reaches
a log line."""

from __future__ import annotations

import asyncio
import csv
import io
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from harness import Client, Gateway, GatewayFactory, token
from openai import AsyncOpenAI
from structlog.testing import capture_logs
from websockets.exceptions import ConnectionClosedError

from fakes.openai_realtime.server import FakeOptions, FakeRealtimeServer
from gateway.keys import new_secret


def admin_headers() -> dict[str, str]:
    """An admin's JWT, made when used (a module-level one would expire in a long run)."""
    return {"Authorization": f"Bearer {token('ops', ['admin'])}"}


@pytest.fixture
async def gateway(gateway_factory: GatewayFactory) -> Gateway:
    return await gateway_factory(provider="local", admin=True, allowed_origins="https://ops.test")


async def call(
    gateway: Gateway,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, Any]:
    async with gateway.http.request(
        method,
        gateway.url + path,
        json=body,
        headers=admin_headers() if headers is None else headers,
    ) as answer:
        return answer.status, await answer.json(content_type=None)


async def make_key(gateway: Gateway, **fields: Any) -> tuple[str, str]:
    status, made = await call(gateway, "POST", "/admin/v1/keys", {"owner": "alice", **fields})
    assert status == 201, made
    return made["key"]["id"], made["secret"]


async def connect(gateway: Gateway, secret: str) -> Client:
    ws = await gateway.http.ws_connect(
        f"{gateway.url}/v1/session", headers={"Authorization": f"Bearer {secret}"}
    )
    return Client(ws)


async def upgrade_status(gateway: Gateway, secret: str) -> tuple[int, Any]:
    return await call(gateway, "GET", "/v1/session", headers={"Authorization": f"Bearer {secret}"})


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"owner": "a", "budgets": {"spend_per_day": -1}}, "budgets.spend_per_day"),
        ({"owner": "a", "budgets": {"tokens_per_day": 1e15}}, "budgets.tokens_per_day"),
        ({"owner": "a", "budgets": {"minutes_per_day": "ten"}}, "budgets.minutes_per_day"),
        ({"owner": "a", "budgets": {"spend_per_day": 1, "colour": 2}}, "unknown fields"),
        ({"owner": "a", "colour": "blue"}, "unknown fields ['colour']"),
        ({"owner": "a", "team": "nobody"}, "team: no team 'nobody'"),
        ({"owner": "a", "tools": ["no_such_tool"]}, "tools: not in the registry"),
        ({"name": "x"}, "owner: required"),
    ],
)
async def test_bad_admin_input_is_refused_naming_the_field_and_creates_nothing(
    gateway: Gateway, body: dict[str, Any], field: str
) -> None:
    with capture_logs() as logs:
        status, answer = await call(gateway, "POST", "/admin/v1/keys", body)
    assert status == 400
    assert answer["error"]["code"] == "invalid_request"
    assert field in answer["error"]["message"]
    assert (await call(gateway, "GET", "/admin/v1/keys"))[1] == {"keys": []}
    refused = [line for line in logs if line["event"] == "admin_refused"]
    assert refused[0]["actor"] == "user:ops"
    assert field in refused[0]["reason"]


async def test_the_admin_api_needs_an_admin_credential_from_an_allowed_origin(
    gateway: Gateway,
) -> None:
    _, secret = await make_key(gateway, roles=["caregiver"])
    _, admin_secret = await make_key(gateway, roles=["admin"])
    cases = [
        ({}, 401, "unauthorized"),
        ({"Authorization": "Bearer gk_" + "x" * 43}, 401, "unauthorized"),
        ({"Authorization": f"Bearer {token('bob', ['caregiver'])}"}, 403, "forbidden"),
        ({"Authorization": f"Bearer {secret}"}, 403, "forbidden"),
        ({**admin_headers(), "Origin": "https://evil.test"}, 403, "forbidden"),
    ]
    for headers, status, code in cases:
        got, answer = await call(gateway, "GET", "/admin/v1/keys", headers=headers)
        assert (got, answer["error"]["code"]) == (status, code), headers
    bearer = {"Authorization": f"Bearer {admin_secret}", "Origin": "https://ops.test"}
    assert (await call(gateway, "GET", "/admin/v1/keys", headers=bearer))[0] == 200
    async with gateway.http.post(
        gateway.url + "/admin/v1/keys", data="owner=a", headers=admin_headers()
    ) as form:
        assert form.status == 415  # a body that is not JSON


async def test_unusable_keys_are_refused_with_a_reason(gateway: Gateway) -> None:
    key_id, secret = await make_key(gateway)
    _, expiring = await make_key(gateway, expires_at="2030-01-01T00:00:00Z")
    assert (await upgrade_status(gateway, secret))[0] == 400  # accepted: not an upgrade
    for bad, message in (
        (new_secret(), "invalid key"),
        ("gk_short", "invalid key"),
        ("gk_" + "!" * 43, "invalid key"),
    ):
        status, answer = await upgrade_status(gateway, bad)
        assert (status, answer["error"]["message"]) == (401, message)
    await call(gateway, "POST", f"/admin/v1/keys/{key_id}/revoke")
    status, answer = await upgrade_status(gateway, secret)
    assert (status, answer["error"]["message"]) == (401, "this key was revoked")
    listed = (await call(gateway, "GET", "/admin/v1/keys"))[1]["keys"]
    assert {k["id"]: k["status"] for k in listed}[key_id] == "revoked"
    # expiry: the same key a moment past its end (the store's record, read by the gateway)
    store = gateway.server.governance
    assert store is not None
    expired_key = next(k for k in await store.keys() if k.expires_at is not None)
    await store.put_key(replace(expired_key, expires_at=1.0))
    status, answer = await upgrade_status(gateway, expiring)
    assert (status, answer["error"]["message"]) == (401, "this key expired")


async def test_a_key_holds_its_models_tools_and_concurrent_sessions(gateway: Gateway) -> None:
    _, secret = await make_key(
        gateway,
        models=["local"],
        tools=["kb_search"],
        budgets={"concurrent_sessions": 1},
    )
    client = await connect(gateway, secret)
    started = await client.start("text")
    assert [t["name"] for t in started["tools"]] == ["kb_search"]  # the key's tools only
    second = await connect(gateway, secret)
    await second.send("session.start", mode="text", event_id="two")
    refused = await second.next()
    assert (refused["code"], refused["retryable"]) == ("rate_limited", True)
    assert "the key's limit of 1 concurrent sessions" in refused["message"]
    await client.send("session.end")
    await client.last("session.ended")
    await second.send("session.start", mode="text", model="gpt-realtime", event_id="three")
    refused = await second.next()
    assert refused["code"] == "forbidden"
    assert "model: this key may not use 'gpt-realtime'" in refused["message"]
    await second.send("session.start", mode="text", tools=["calendar_create_event"])
    refused = await second.next()
    assert refused["code"] == "forbidden"
    assert "tools: this key may not use 'calendar_create_event'" in refused["message"]
    await second.start("text")  # the slot is free again
    await second.ws.close()
    await client.ws.close()


async def test_an_unmodified_openai_sdk_client_uses_a_key(gateway: Gateway) -> None:
    key_id, secret = await make_key(gateway)
    client = AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=secret)
    seen: list[Any] = []
    await text_turns(client, seen, model="local", turns=1)
    assert seen[-1].type == "response.done"
    await client.close()
    sessions = [s for s in gateway.manager.sessions.values() if s.user.key_id == key_id]
    assert sessions == []  # ended with the socket
    refused = AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=new_secret())
    with pytest.raises(Exception, match="401"):
        async with refused.realtime.connect(model="local") as connection:
            await connection.recv()
    await refused.close()


async def test_usage_is_reported_from_the_counters_as_json_and_csv(gateway: Gateway) -> None:
    key_id, secret = await make_key(gateway)
    client = await connect(gateway, secret)
    await client.start("text")
    await client.say("hello")
    await client.send("session.end")
    await client.last("session.ended")
    status, by_user = await call(gateway, "GET", "/admin/v1/usage?group_by=user")
    assert status == 200
    assert [row["id"] for row in by_user["rows"]] == ["alice"]
    async with gateway.http.get(
        gateway.url + "/admin/v1/usage?group_by=key&format=csv", headers=admin_headers()
    ) as answer:
        rows = list(csv.DictReader(io.StringIO(await answer.text())))
    assert [row["id"] for row in rows] == [key_id]
    assert float(rows[0]["minutes"]) >= 0
    for query, field in (("group_by=colour", "group_by"), ("from=yesterday", "from")):
        status, answer = await call(gateway, "GET", f"/admin/v1/usage?{query}")
        assert status == 400
        assert answer["error"]["message"].startswith(field)


async def test_no_key_material_reaches_the_logs(gateway: Gateway) -> None:
    with capture_logs() as logs:
        key_id, secret = await make_key(gateway)
        client = await connect(gateway, secret)
        await client.start("text")
        await client.say("hello")
        await call(gateway, "POST", f"/admin/v1/keys/{key_id}/revoke")
        await client.last("session.ended")
        await upgrade_status(gateway, secret)
    text = repr(logs)
    assert secret not in text
    assert secret[3:20] not in text
    assert key_id in text  # the audit names the key by its id


async def text_turns(
    client: AsyncOpenAI, seen: list[Any], *, model: str = "gpt-realtime", turns: int = 3
) -> None:
    """Text turns on ``/v1/realtime``, each until its ``response.done`` or an ``error``, until
    the socket closes; every event in ``seen``."""
    async with client.realtime.connect(model=model) as connection:
        created = await connection.recv()
        assert created.type == "session.created"
        await connection.session.update(session={"type": "realtime", "output_modalities": ["text"]})
        for _ in range(turns):
            await connection.conversation.item.create(
                item={
                    "type": "message",
                    "role": "user",
                    "content": [{"type": "input_text", "text": "hello"}],
                }
            )
            await connection.response.create()
            async with asyncio.timeout(10):
                async for event in connection:
                    seen.append(event)
                    if event.type in ("response.done", "error"):
                        break


async def test_a_realtime_client_hears_its_budget_run_out_in_openais_shape(
    gateway_factory: GatewayFactory, tmp_path: Path
) -> None:
    """``/v1/realtime``: the response that spends the budget, then an ``error`` with code
    ``budget_exhausted`` and the socket closed with 1008; the next connect is refused (429)."""
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"models": {"openai/*": {"input_text": 1000.0}}}))
    async with FakeRealtimeServer(FakeOptions()) as fake:
        gateway = await gateway_factory(
            provider="openai",
            openai_ws_url=fake.ws_url,
            openai_api_key="sk-test",
            admin=True,
            price_table=prices,
        )
        _, secret = await make_key(gateway, budgets={"spend_per_day": 0.01})
        client = AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=secret)
        seen: list[Any] = []
        with pytest.raises(ConnectionClosedError) as closed:
            await text_turns(client, seen)
        await client.close()
        assert closed.value.rcvd is not None
        assert closed.value.rcvd.code == 1008
        errors = [event.error for event in seen if event.type == "error"]
        assert [error.code for error in errors] == ["budget_exhausted"]
        assert "budget exhausted: the key's spend for today" in errors[0].message
        assert [e.type for e in seen].count("response.done") == 1
        status, answer = await upgrade_status(gateway, secret)
        assert (status, answer["error"]["code"]) == (429, "budget_exhausted")
