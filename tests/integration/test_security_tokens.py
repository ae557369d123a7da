"""Tokens at every door: user tokens with sane claims only, phone-stream tokens bound to their
call and used once, each refused where the other belongs, a resume kept within its tenant, and
an approval checked again against the roles the user has now."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import aiohttp
import jwt
import pytest
from harness import (
    SECRET,
    Client,
    Gateway,
    GatewayFactory,
    first,
    registry_with_variant,
    token,
)
from test_gateway_resume import Store, drop, eventually, resume

from fakes.openai_realtime.server import FakeOptions, FakeRealtimeServer

CARE = {"patient_id": "pat_1042", "note": "please log that she ate well", "severity": "low"}
CALL_SID = "CA00000000000000000000000000000001"


async def refused_upgrade(gateway: Gateway, bearer: str) -> tuple[int, str]:
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        await gateway.http.ws_connect(
            f"{gateway.url}/v1/session", headers={"Authorization": f"Bearer {bearer}"}
        )
    async with gateway.http.get(
        f"{gateway.url}/v1/session", headers={"Authorization": f"Bearer {bearer}"}
    ) as response:
        body = await response.json()
    return refused.value.status, body["error"]["message"]


@pytest.mark.parametrize(
    ("claims", "said"),
    [
        ({"sub": ""}, "'sub' must name the user"),
        ({"sub": "   "}, "'sub' must name the user"),
        ({"exp": int(time.time()) + 100 * 365 * 86400}, "lifetime exceeds"),
        ({"aud": "realtime-gateway:twilio-media"}, "not a user token"),
    ],
)
async def test_tokens_with_bad_claims_are_refused_at_the_door(
    gateway: Gateway, claims: dict[str, Any], said: str
) -> None:
    payload = {"sub": "alice", "exp": int(time.time()) + 300, **claims}
    status, message = await refused_upgrade(gateway, jwt.encode(payload, SECRET, "HS256"))
    assert status == 401
    assert said in message


async def test_the_maximum_lifetime_is_a_setting(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory(token_max_lifetime_s=60)
    status, message = await refused_upgrade(gateway, token(ttl=600))
    assert (status, "lifetime exceeds" in message) == (401, True)
    ws = await gateway.http.ws_connect(
        f"{gateway.url}/v1/session", headers={"Authorization": f"Bearer {token(ttl=50)}"}
    )
    await ws.close()


# -- phone streams -------------------------------------------------------------------------------


async def twilio_gateway(gateway_factory: GatewayFactory) -> tuple[Gateway, FakeRealtimeServer]:
    fake = FakeRealtimeServer(FakeOptions())
    await fake.start()
    gateway = await gateway_factory(
        provider="openai",
        openai_ws_url=fake.ws_url,
        openai_api_key="sk-test",
        twilio_auth_token="twilio-token-for-tests",
        twilio_greeting="/say hello",
    )
    return gateway, fake


async def open_stream(gateway: Gateway, call_token: str, call_sid: str = CALL_SID) -> int | None:
    """Twilio's opening of a stream; the close code when the gateway refuses it, else None
    (the call got its greeting)."""
    async with gateway.http.ws_connect(f"{gateway.url}/twilio/media") as ws:
        await ws.send_str(json.dumps({"event": "connected", "protocol": "Call"}))
        start = {
            "streamSid": "MZ1",
            "callSid": call_sid,
            "accountSid": "AC1",
            "tracks": ["inbound"],
            "customParameters": {"token": call_token},
            "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
        }
        await ws.send_str(json.dumps({"event": "start", "streamSid": "MZ1", "start": start}))
        while True:
            msg = await ws.receive(timeout=5)
            if msg.type == aiohttp.WSMsgType.TEXT and json.loads(msg.data)["event"] == "media":
                return None
            if msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED):
                return ws.close_code


async def test_a_stream_token_opens_one_stream_of_its_call_only(
    gateway_factory: GatewayFactory,
) -> None:
    gateway, fake = await twilio_gateway(gateway_factory)
    try:
        call_token = gateway.server.admission.stream_token(CALL_SID)
        assert await open_stream(gateway, call_token, "CA_another_call") == 1008
        assert await open_stream(gateway, call_token) is None
        assert await open_stream(gateway, call_token) == 1008  # used already
        # A user's token (even one named after the call) does not open a phone stream.
        assert await open_stream(gateway, token(f"twilio:{CALL_SID}")) == 1008
    finally:
        await fake.stop()


async def test_a_stream_token_does_not_open_a_session(gateway_factory: GatewayFactory) -> None:
    gateway, fake = await twilio_gateway(gateway_factory)
    try:
        call_token = gateway.server.admission.stream_token(CALL_SID)
        status, message = await refused_upgrade(gateway, call_token)
        assert (status, message) == (401, "invalid token")  # a stream token is not even a JWT
    finally:
        await fake.stop()


async def test_the_webhook_needs_a_call_sid(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory(auth="none", auth_secret=None)
    async with gateway.http.post(f"{gateway.url}/twilio/voice", data={"From": "+1"}) as r:
        assert r.status == 400


# -- resume and approvals --------------------------------------------------------------------------


async def test_a_resume_keeps_the_sessions_tenant(gateway_factory: GatewayFactory) -> None:
    store = Store()
    gateway = await gateway_factory(resume_window_s=5, store=store)
    first_ws = await gateway.http.ws_connect(
        f"{gateway.url}/v1/session", headers={"Authorization": f"Bearer {token(tenant='t1')}"}
    )
    client = Client(first_ws)
    started = await client.start("text")
    await drop(client)
    session_id = started["session_id"]
    await eventually(lambda: store.parked() == 1)
    for tenant in ("t2", None):
        claims = {} if tenant is None else {"tenant": tenant}
        ws = await gateway.http.ws_connect(
            f"{gateway.url}/v1/session", headers={"Authorization": f"Bearer {token(**claims)}"}
        )
        answer = await resume(Client(ws), session_id, started["resume_token"])
        assert answer["code"] == "resume_failed"
        await ws.close()
    ws = await gateway.http.ws_connect(
        f"{gateway.url}/v1/session", headers={"Authorization": f"Bearer {token(tenant='t1')}"}
    )
    again = await resume(Client(ws), session_id, started["resume_token"])
    assert again["type"] == "session.started"
    assert gateway.manager.sessions[session_id].user.tenant == "t1"
    await ws.close()


async def test_an_approval_after_the_roles_dropped_is_refused(
    gateway_factory: GatewayFactory,
) -> None:
    """The report: a caregiver's pending create_care_log, resumed with a token without the
    role, was approved and ran. Now it is refused, told to the model, and nothing runs."""
    store = Store()
    gateway = await gateway_factory(resume_window_s=5, store=store)
    async with gateway.connect(roles=["caregiver"]) as client:
        started = await client.start("text")
        await client.send("text.send", text=f"/tool create_care_log {json.dumps(CARE)}")
        requested = await client.last("confirmation.requested")
        await drop(client)
    session_id = started["session_id"]
    await eventually(lambda: store.parked() == 1)
    async with gateway.connect(roles=[]) as client:
        assert (await resume(client, session_id, started["resume_token"]))["resumed"] is True
        await client.send(
            "confirmation.respond",
            confirmation_id=requested["confirmation_id"],
            decision="approve",
            event_id="approve-1",
        )
        events = await client.until("error")
        error = events[-1]
        assert (error["code"], error["event_id"]) == ("forbidden", "approve-1")
        assert "checked again" in error["message"]
        resolved = first(events, "confirmation.resolved")
        assert resolved["decision"] == "rejected"
        reply = await client.until_reply()
        assert "FORBIDDEN" in reply[-1]["text"]  # the model was told why
    assert gateway.decisions("create_care_log") == [
        ("create_care_log", "confirmation_pending"),
        ("create_care_log", "blocked"),
    ]
    assert gateway.audit.records[-1].reason == "approval_forbidden"


async def test_an_approval_after_a_mode_switch_is_refused(
    gateway_factory: GatewayFactory, tmp_path: Path
) -> None:
    """A text-only tool asked for in text mode, approved once the session is in voice mode."""
    registry = registry_with_variant(
        tmp_path, "echo", "text_only_note", modes=["text"], requiresConfirmation=True
    )
    gateway = await gateway_factory(registry=registry)
    async with gateway.session("text") as client:
        await client.send("text.send", text='/tool text_only_note {"text":"hi"}')
        requested = await client.last("confirmation.requested")
        await client.until_reply()
        await client.send("session.update", mode="voice")
        await client.last("session.updated")
        await client.send(
            "confirmation.respond", confirmation_id=requested["confirmation_id"], decision="approve"
        )
        error = await client.last("error")
        assert error["code"] == "forbidden"
        assert "voice mode" in error["message"]
    assert gateway.decisions("text_only_note") == [
        ("text_only_note", "confirmation_pending"),
        ("text_only_note", "blocked"),
    ]
    assert gateway.audit.records[-1].reason == "approval_mode"
