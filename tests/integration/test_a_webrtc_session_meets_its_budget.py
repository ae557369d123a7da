"""Budgets hold over WebRTC as over the socket: a key's voice session on ``/v1/webrtc/offer``,
charged on the session's clock while its microphone track streams (no token report), gets
``budget.warning``, then ends ``budget_exhausted`` at the hard limit; the key's next offer is
refused with 429 before any peer connection is made."""

from __future__ import annotations

import time

from harness import GatewayFactory, token
from webrtc_kit import Peer, connect

OFFER = "/v1/webrtc/offer"
MINUTES = 0.1  # 6 s of session time a day


async def test_the_hard_limit_ends_a_webrtc_session_and_refuses_the_next_offer(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory(provider="local", admin=True)
    admin = {"Authorization": f"Bearer {token('ops', ['admin'])}"}
    body = {"owner": "alice", "budgets": {"minutes_per_day": MINUTES}}
    async with gateway.http.post(gateway.url + "/admin/v1/keys", json=body, headers=admin) as made:
        assert made.status == 201
        key = await made.json()

    peer = Peer()  # its microphone track sends silence until something is pushed
    try:
        await connect(gateway.http, gateway.url + OFFER, key["secret"], peer)
        peer.send({"type": "session.start", "mode": "voice"})
        await peer.until_event("session.started")
        began = time.monotonic()
        ended = await peer.until_event("session.ended", within=30)
        took = time.monotonic() - began
    finally:
        await peer.close()
    kinds = peer.kinds()
    warning = peer.first("budget.warning")
    assert kinds.index("budget.warning") < kinds.index("session.ended")
    assert (warning["scope"], warning["metric"]) == ("key", "minutes")
    assert ended["reason"] == "budget_exhausted"
    assert (ended["budget"]["scope"], ended["budget"]["metric"]) == ("key", "minutes")
    # The session's clock is charged every 5 s: past the limit by at most one tick.
    assert MINUTES * 60 - 1 <= took <= MINUTES * 60 + 5 + 2, took
    async with gateway.http.get(
        f"{gateway.url}/admin/v1/keys/{key['key']['id']}", headers=admin
    ) as shown:
        usage = {(u["metric"], u["window"]): u["used"] for u in (await shown.json())["usage"]}
    assert MINUTES <= usage[("minutes", "day")] <= MINUTES + 5 / 60

    again = Peer()
    try:
        async with gateway.http.post(
            gateway.url + OFFER,
            json={"sdp": await again.offer(), "type": "offer"},
            headers={"Authorization": f"Bearer {key['secret']}"},
        ) as refused:
            assert refused.status == 429
            assert (await refused.json())["error"]["code"] == "budget_exhausted"
    finally:
        await again.close()
    assert not gateway.manager.sessions
