"""Trickle ICE: an offer sent before the browser gathered its candidates (none in it) is
answered at once, and its candidates follow with ``PATCH /v1/webrtc/calls/{call_id}``; only
the call's own user may add them, and a malformed one is refused naming the field."""

from __future__ import annotations

from typing import Any

from harness import Gateway, GatewayFactory, token
from webrtc_kit import Peer


def split_candidates(sdp: str) -> tuple[str, list[dict[str, Any]]]:
    """The offer without its candidates, and them as a browser's ``icecandidate`` events."""
    kept, candidates, mid = [], [], None
    for line in sdp.split("\r\n"):
        if line.startswith("a=mid:"):
            mid = line.removeprefix("a=mid:")
        if line.startswith("a=candidate:"):
            candidates.append({"candidate": line.removeprefix("a="), "sdpMid": mid})
        elif line != "a=end-of-candidates":
            kept.append(line)
    return "\r\n".join(kept), candidates


async def patch(gateway: Gateway, call_id: str, body: Any, user: str = "alice") -> int:
    async with gateway.http.patch(
        f"{gateway.url}/v1/webrtc/calls/{call_id}",
        json=body,
        headers={"Authorization": f"Bearer {token(user)}"},
    ) as answer:
        return answer.status


async def test_candidates_that_follow_the_offer_connect_the_call(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory()
    peer = Peer(audio=False)
    try:
        offer, candidates = split_candidates(await peer.offer())
        assert candidates
        async with gateway.http.post(
            f"{gateway.url}/v1/webrtc/offer",
            json={"sdp": offer, "type": "offer"},
            headers={"Authorization": f"Bearer {token('alice')}"},
        ) as response:
            assert response.status == 200
            answer = await response.json()
        call_id = answer.pop("call_id")
        assert call_id.startswith("rtc_")

        assert await patch(gateway, call_id, {"candidates": candidates}, user="mallory") == 404
        assert await patch(gateway, "rtc_nope", {"candidates": candidates}) == 404
        for bad in (
            {"candidates": "x"},
            {"candidates": [{"sdpMid": "0"}]},
            {"candidates": [{"candidate": "candidate:1 1 udp 1 1.2.3.4 5 typ host"}]},
            {"candidates": [{"candidate": "candidate:garbage", "sdpMid": "0"}]},
            {"candidates": [], "done": "yes"},
        ):
            assert await patch(gateway, call_id, bad) == 400, bad

        assert await patch(gateway, call_id, {"candidates": candidates}) == 204
        assert await patch(gateway, call_id, {"candidates": [], "done": True}) == 204
        await peer.answered(answer)
        peer.send({"type": "session.start", "mode": "text"})
        started = await peer.until_event("session.started")
        # The gateway's side took the end of the browser's candidates (its ICE agent stops
        # waiting for more only then).
        call = gateway.server.webrtc.call_for(started["session_id"])  # type: ignore[union-attr]
        assert call.link.trickling is False
        peer.send({"type": "text.send", "text": "trickled"})
        assert (await peer.until_event("response.done"))["text"] == "You said: trickled"
    finally:
        await peer.close()
