"""Client ↔ gateway ↔ local model over real sockets (the server on a free loopback port)."""

from __future__ import annotations

import json
import time
from typing import Any

import aiohttp
import jwt
import pytest
from harness import SECRET, Gateway, token


async def _until(ws: aiohttp.ClientWebSocketResponse, kind: str) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    while True:
        msg = await ws.receive(timeout=5)
        assert msg.type == aiohttp.WSMsgType.TEXT, msg
        event = json.loads(msg.data)
        seen.append(event)
        if event["type"] == kind:
            return seen


async def test_text_turn_tool_and_confirmation(gateway: Gateway) -> None:
    async with aiohttp.ClientSession() as http:
        headers = {"Authorization": f"Bearer {token()}"}
        async with http.ws_connect(f"{gateway.url}/v1/session", headers=headers) as ws:
            await ws.send_json({"type": "session.start", "mode": "text"})
            started = (await _until(ws, "session.started"))[-1]
            names = {t["name"] for t in started["tools"]}
            assert "create_care_log" not in names  # caregiver/admin only
            assert "calendar_create_event" in names

            await ws.send_json({"type": "text.send", "text": "hello"})
            events = await _until(ws, "response.done")
            assert events[-1]["text"] == "You said: hello"

            await ws.send_json(
                {"type": "text.send", "text": '/tool get_current_time {"timezone":"Europe/Paris"}'}
            )
            events = await _until(ws, "response.done")
            kinds = [e["type"] for e in events]
            assert kinds == ["response.started", "tool.started", "tool.finished", "response.done"]
            assert events[2]["ok"] is True
            assert events[2]["data"]["timezone"] == "Europe/Paris"
            reply = await _until(ws, "response.done")
            assert reply[-1]["text"].startswith("Tool results: get_current_time=")

            await ws.send_json(
                {
                    "type": "text.send",
                    "text": '/tool calendar_create_event {"title":"Dentist",'
                    '"start":"2026-12-01T10:00:00+01:00"}',
                }
            )
            events = await _until(ws, "response.done")
            finished = next(e for e in events if e["type"] == "tool.finished")
            assert finished["error"]["type"] == "CONFIRMATION_REQUIRED"
            requested = next(e for e in events if e["type"] == "confirmation.requested")
            await _until(ws, "response.done")  # the model relays the question

            confirmation = requested["confirmation_id"]
            await ws.send_json(
                {
                    "type": "confirmation.respond",
                    "confirmation_id": confirmation,
                    "decision": "approve",
                }
            )
            resolved = (await _until(ws, "confirmation.resolved"))[-1]
            assert resolved["decision"] == "approved"
            assert resolved["result"]["ok"] is True
            assert "attendees" not in resolved["result"]["data"]  # outside the allowlist

            await ws.send_json(
                {
                    "type": "confirmation.respond",
                    "confirmation_id": confirmation,
                    "decision": "approve",
                    "event_id": "again",
                }
            )
            error = (await _until(ws, "error"))[-1]
            assert error["code"] == "confirmation_not_found"
            assert error["event_id"] == "again"

            await ws.send_json({"type": "session.end"})
            ended = (await _until(ws, "session.ended"))[-1]
            assert ended["reason"] == "client"


async def test_protocol_errors_keep_the_session(gateway: Gateway) -> None:
    async with aiohttp.ClientSession() as http:
        url = f"{gateway.url}/v1/session?token={token()}"
        async with http.ws_connect(url) as ws:
            await ws.send_json({"type": "text.send", "text": "hi", "event_id": "early"})
            error = (await _until(ws, "error"))[-1]
            assert error["code"] == "not_started"
            assert error["event_id"] == "early"
            await ws.send_json({"type": "session.start", "mode": "text"})
            await _until(ws, "session.started")
            await ws.send_str("{nope")
            assert (await _until(ws, "error"))[-1]["code"] == "invalid_json"
            await ws.send_json({"type": "bogus", "event_id": "b1"})
            error = (await _until(ws, "error"))[-1]
            assert error["code"] == "unknown_event"
            assert error["event_id"] == "b1"
            await ws.send_bytes(b"\x00\x01")
            assert (await _until(ws, "error"))[-1]["code"] == "invalid_event"  # text mode
            await ws.send_json({"type": "ping", "id": 7})
            assert (await _until(ws, "pong"))[-1]["id"] == 7


@pytest.mark.parametrize(
    "token",
    [
        None,
        "not-a-jwt",
        jwt.encode({"sub": "a", "exp": int(time.time()) - 10}, SECRET, "HS256"),
        jwt.encode({"sub": "a", "exp": int(time.time()) + 60}, "x" * 40, "HS256"),
        jwt.encode({"exp": int(time.time()) + 60}, SECRET, "HS256"),
    ],
    ids=["missing", "malformed", "expired", "bad-signature", "no-sub"],
)
async def test_auth_failures_get_401_json(gateway: Gateway, token: str | None) -> None:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.WSServerHandshakeError) as info:
            await http.ws_connect(f"{gateway.url}/v1/session", headers=headers)
        assert info.value.status == 401
        async with http.get(f"{gateway.url}/v1/session", headers=headers) as response:
            assert response.status == 401
            body = await response.json()
            assert body["error"]["code"] == "unauthorized"


async def test_health_ready_metrics(gateway: Gateway) -> None:
    async with aiohttp.ClientSession() as http:
        async with http.get(f"{gateway.url}/healthz") as response:
            assert await response.json() == {"status": "ok"}
        async with http.get(f"{gateway.url}/readyz") as response:
            assert response.status == 200
        async with http.get(f"{gateway.url}/metrics") as response:
            assert "gateway_active_sessions" in await response.text()


async def test_rejected_confirmation_runs_nothing_and_is_audited(
    gateway: Gateway,
) -> None:
    audit = gateway.audit
    tmp_path = gateway.settings.data_dir
    async with aiohttp.ClientSession() as http:
        headers = {"Authorization": f"Bearer {token()}"}
        async with http.ws_connect(f"{gateway.url}/v1/session", headers=headers) as ws:
            await ws.send_json({"type": "session.start", "mode": "text"})
            await _until(ws, "session.started")
            await ws.send_json(
                {
                    "type": "text.send",
                    "text": '/tool calendar_create_event {"title":"Dentist",'
                    '"start":"2026-12-01T10:00:00+01:00"}',
                }
            )
            events = await _until(ws, "confirmation.requested")
            confirmation = events[-1]["confirmation_id"]
            await _until(ws, "response.done")
            await _until(ws, "response.done")
            await ws.send_json(
                {
                    "type": "confirmation.respond",
                    "confirmation_id": confirmation,
                    "decision": "reject",
                }
            )
            resolved = (await _until(ws, "confirmation.resolved"))[-1]
            assert resolved["decision"] == "rejected"
            assert "result" not in resolved
            # The model is told, naming the confirmation, and answers.
            reply = (await _until(ws, "response.done"))[-1]
            assert confirmation in reply["text"]
            assert "FORBIDDEN" in reply["text"]
    decisions = [(r.tool, r.decision.value) for r in audit.records]
    assert ("calendar_create_event", "confirmation_pending") in decisions
    assert ("calendar_create_event", "rejected") in decisions
    assert ("calendar_create_event", "executed") not in decisions
    assert not (tmp_path / "calendar.sqlite").exists()
