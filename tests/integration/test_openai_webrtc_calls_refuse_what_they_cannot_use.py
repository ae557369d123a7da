"""What OpenAI's WebRTC interface on the gateway refuses, each with a clear error in OpenAI's
shape and nothing opened (no session, no peer connection): an expired ephemeral key, one whose
source key was revoked (a call already open on it ends too), a forged one, no credential, a bad
SDP, another content type, an unknown or missing model, a bad or oversize session config, a
draining gateway. An ephemeral key's budgets are its minter's: a key out of budget mints
nothing, and a key it minted before is refused with 429 and the budget. Pages of an allowed
origin get CORS answers; others are refused."""

from __future__ import annotations

import asyncio
import base64
import random
import time
from datetime import UTC, datetime
from typing import Any

import pytest
from harness import Gateway, GatewayFactory, token
from realtime_call_kit import CALLS, SECRETS, Answer, call, mint, post_offer
from webrtc_kit import Peer

from gateway.budgets.assess import counter_key
from gateway.budgets.limits import Metric, Scope
from gateway.budgets.windows import window_ids
from gateway.edges.rtc.peer import PeerLink
from gateway.security.ephemeral_keys import Minter

PAGE = "https://app.example"
LOCAL = {"type": "realtime", "model": "local"}
SDP = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\nm=audio 9 UDP/TLS/RTP/SAVPF 111\r\n"


@pytest.fixture
async def gateway(gateway_factory: GatewayFactory) -> Gateway:
    return await gateway_factory(admin=True, allowed_origins=PAGE)


def admin() -> dict[str, str]:
    return {"Authorization": f"Bearer {token('ops', ['admin'])}"}


async def make_key(gateway: Gateway, **fields: Any) -> tuple[str, str]:
    async with gateway.http.post(
        gateway.url + "/admin/v1/keys", json={"owner": "alice", **fields}, headers=admin()
    ) as made:
        assert made.status == 201
        body = await made.json()
    return body["key"]["id"], body["secret"]


async def ephemeral(gateway: Gateway, bearer: str) -> str:
    minted = await mint(gateway, bearer, {"session": LOCAL})
    assert minted.status == 200, minted.text
    value: str = minted.json()["value"]
    return value


def refused(answer: Answer, status: int, code: str, param: str | None = None) -> str:
    assert answer.status == status, answer.text
    error = answer.error
    assert error["code"] == code, error
    assert error["type"] in {"invalid_request_error", "server_error", "insufficient_quota"}
    if param is not None:
        assert error["param"] == param, error
    message: str = error["message"]
    return message


def nothing_open(gateway: Gateway, links_before: int) -> None:
    assert gateway.manager.sessions == {}
    assert PeerLink.live == links_before


async def test_expired_forged_and_missing_credentials_are_refused(gateway: Gateway) -> None:
    peer = Peer("oai-events")
    links = PeerLink.live
    try:
        sdp = await peer.offer()
        admission = gateway.server.admission
        expired, _ = admission.ephemeral_keys.mint(
            Minter("user", user_id="alice"), LOCAL, now=time.time() - 700, ttl_s=600
        )
        message = refused(await post_offer(gateway, expired, sdp), 401, "invalid_api_key")
        assert message == "this ephemeral key has expired; mint a new one"
        flipped = expired[:-2] + ("A" if expired[-2] != "A" else "B") + expired[-1]
        for bad in (flipped, "ek_" + "x" * 60):
            message = refused(await post_offer(gateway, bad, sdp), 401, "invalid_api_key")
            assert message == "invalid ephemeral key"
            assert bad not in message
        refused(await post_offer(gateway, "", sdp), 401, "invalid_api_key")
        # An ephemeral key mints no other, and opens nothing but calls.
        key = await ephemeral(gateway, token("alice"))
        refused(await mint(gateway, key), 401, "invalid_api_key")
    finally:
        await peer.close()
    nothing_open(gateway, links)


async def test_a_revoked_source_key_refuses_its_ephemeral_keys_and_ends_their_calls(
    gateway: Gateway,
) -> None:
    key_id, secret = await make_key(gateway)
    key = await ephemeral(gateway, secret)
    peer = Peer("oai-events")
    try:
        await call(gateway, key, peer)
        await peer.until_event("session.created")
        (session,) = gateway.manager.sessions.values()
        assert (session.user.user_id, session.user.key_id) == ("alice", key_id)
        async with gateway.http.post(
            f"{gateway.url}/admin/v1/keys/{key_id}/revoke", headers=admin()
        ) as revoked:
            assert revoked.status == 200
        await peer.until(lambda: session.ended.is_set())
        links = PeerLink.live
        again = Peer("oai-events")
        try:
            answer = await post_offer(gateway, key, await again.offer())
        finally:
            await again.close()
        assert refused(answer, 401, "invalid_api_key") == "this key was revoked"
        refused(await mint(gateway, secret), 401, "invalid_api_key")
    finally:
        await peer.close()
    assert PeerLink.live <= links


@pytest.mark.parametrize(
    ("body", "content_type", "status", "code", "param"),
    [
        (SDP.replace("v=0", "x=0"), "application/sdp", 400, "invalid_value", "sdp"),
        ("", "application/sdp", 400, "invalid_value", "sdp"),
        ("v=0\r\n" + "a=x\r\n" * 20_000, "application/sdp", 400, "invalid_value", "sdp"),
        (SDP, "text/plain", 415, "unsupported_content_type", None),
        ('{"sdp": "v=0"}', "application/json", 415, "unsupported_content_type", None),
        ("v=0\r\no=- 1 1 IN IP4 0.0.0.0\r\n", "application/sdp", 400, "invalid_offer", "sdp"),
        (SDP, "application/sdp", 400, "invalid_offer", "sdp"),
        ("v=0\r\nm=audio abc UDP 1\r\n", "application/sdp", 400, "invalid_offer", "sdp"),
        ("garbage", "multipart/form-data; boundary=zz", 400, "invalid_multipart", None),
        ("garbage", "multipart/form-data", 400, "invalid_multipart", None),
    ],
)
async def test_a_bad_offer_is_refused_naming_it_and_opens_nothing(
    gateway: Gateway, body: str, content_type: str, status: int, code: str, param: str | None
) -> None:
    links = PeerLink.live
    key = await ephemeral(gateway, token("alice"))
    answer = await post_offer(gateway, key, body, content_type=content_type)
    refused(answer, status, code, param)
    nothing_open(gateway, links)


async def test_a_bad_model_or_session_is_refused_naming_the_field(gateway: Gateway) -> None:
    links = PeerLink.live
    bearer = token("alice")
    peer = Peer("oai-events")
    try:
        sdp = await peer.offer()
        # The model: unknown to this gateway (OpenAI is not configured), missing, disagreeing.
        message = refused(
            await post_offer(gateway, bearer, sdp, query="?model=gpt-realtime"),
            400,
            "model_not_found",
            "model",
        )
        assert "local" in message  # says what it serves
        refused(await post_offer(gateway, bearer, sdp), 400, "missing_required_parameter", "model")
        key = await ephemeral(gateway, bearer)
        refused(
            await post_offer(gateway, key, sdp, query="?model=gemini-live"),
            400,
            "invalid_value",
            "model",
        )
        # The call's own session part, checked as a session.update.
        refused(
            await post_offer(gateway, key, sdp, session={"instructions": "no type"}),
            400,
            "missing_required_parameter",
            "session.type",
        )
    finally:
        await peer.close()
    # At minting, every field as /v1/realtime's session.update names it.
    for session, code, param in [
        ({**LOCAL, "model": "gpt-realtime"}, "model_not_found", "session.model"),
        ({**LOCAL, "modalities": ["audio"]}, "unknown_parameter", "session.modalities"),
        (
            {**LOCAL, "audio": {"output": {"format": {"type": "audio/pcm", "rate": 16000}}}},
            "invalid_value",
            "session.audio.output.format.rate",
        ),
        (
            {**LOCAL, "tools": [{"type": "function", "name": "get_current_time"}]},
            "invalid_value",
            "session.tools[0].name",
        ),
        ({**LOCAL, "tool_choice": {"type": "function", "name": "nope"}}, "invalid_value", None),
    ]:
        refused(await mint(gateway, bearer, {"session": session}), 400, code, param)
    bodies: list[tuple[dict[str, Any], str, str]] = [
        ({"expires_after": {"seconds": 7201}}, "integer_out_of_range", "expires_after.seconds"),
        ({"expires_after": {"anchor": "now"}}, "invalid_value", "expires_after.anchor"),
        ({"session": LOCAL, "colour": 1}, "unknown_parameter", "colour"),
    ]
    for body, code, param in bodies:
        refused(await mint(gateway, bearer, body), 400, code, param)
    # Too large for a key (it travels in a header): said, with what to do instead.
    noise = base64.b64encode(random.Random(35).randbytes(6000)).decode()
    message = refused(
        await mint(gateway, bearer, {"session": {**LOCAL, "instructions": noise}}),
        400,
        "invalid_value",
        "session",
    )
    assert "too large for an ephemeral key" in message
    nothing_open(gateway, links)


async def test_an_ephemeral_key_spends_its_minter_s_budgets(gateway: Gateway) -> None:
    key_id, secret = await make_key(gateway, budgets={"minutes_per_day": 1})
    key = await ephemeral(gateway, secret)  # minted while the key has budget left
    governance = gateway.server.governance
    assert governance is not None
    day = window_ids(datetime.now(UTC)).day
    spent = counter_key(Scope("key", key_id), Metric.MINUTES, day)
    await governance.charge([(spent, 60.0)], [], day=day, scopes=[])  # its minute, spent
    links = PeerLink.live
    refused(await mint(gateway, secret), 429, "budget_exhausted")
    peer = Peer("oai-events")
    try:
        answer = await post_offer(gateway, key, await peer.offer())
    finally:
        await peer.close()
    message = refused(answer, 429, "budget_exhausted")
    assert "the key's minutes for today" in message, message
    assert answer.error["type"] == "insufficient_quota"
    assert (answer.error["budget"]["scope"], answer.error["budget"]["metric"]) == ("key", "minutes")
    nothing_open(gateway, links)


async def test_a_draining_gateway_takes_no_call(gateway: Gateway) -> None:
    key = await ephemeral(gateway, token("alice"))
    gateway.server.admission.draining = True
    links = PeerLink.live
    peer = Peer("oai-events")
    try:
        answer = await post_offer(gateway, key, await peer.offer())
    finally:
        await peer.close()
    refused(answer, 503, "unavailable")
    nothing_open(gateway, links)


async def test_pages_of_allowed_origins_get_cors_answers_and_others_are_refused(
    gateway: Gateway,
) -> None:
    for path in (CALLS, SECRETS, CALLS + "/rtc_x/hangup"):
        async with gateway.http.options(
            gateway.url + path,
            headers={
                "Origin": PAGE,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "authorization, content-type",
            },
        ) as preflight:
            assert preflight.status == 204
            assert preflight.headers["Access-Control-Allow-Origin"] == PAGE
            assert "POST" in preflight.headers["Access-Control-Allow-Methods"]
            allowed = preflight.headers["Access-Control-Allow-Headers"].lower()
            assert "authorization" in allowed
            assert "content-type" in allowed
        async with gateway.http.options(
            gateway.url + path, headers={"Origin": "https://evil.example"}
        ) as other:
            assert other.status == 403
            assert "Access-Control-Allow-Origin" not in other.headers
    minted = await mint(gateway, token("alice"), Origin=PAGE)
    assert minted.status == 200
    assert minted.headers["Access-Control-Allow-Origin"] == PAGE
    refused(await mint(gateway, token("alice"), Origin="https://evil.example"), 403, "forbidden")


async def test_a_call_whose_session_cannot_start_says_why_on_its_channel_and_ends(
    gateway: Gateway,
) -> None:
    _, secret = await make_key(gateway, budgets={"concurrent_sessions": 1})
    key = await ephemeral(gateway, secret)
    first, second = Peer("oai-events"), Peer("oai-events")
    try:
        await call(gateway, key, first)
        await first.until_event("session.created")
        # The key's one session is taken: the second call's session is refused as it opens,
        # and its microphone (which does not use the session) is what brings the answer.
        await call(gateway, key, second)
        closed = asyncio.Event()
        second.channel.on("close", closed.set)
        error = await second.until_event("error")
        assert error["error"]["code"] == "rate_limited", error
        await asyncio.wait_for(closed.wait(), 10)  # the call ended with it
        assert len(gateway.manager.sessions) == 1
    finally:
        await first.close()
        await second.close()
