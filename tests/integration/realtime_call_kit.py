"""OpenAI's WebRTC interface on the gateway, as its clients use it: a client secret minted with
the gateway's credential (``mint``), an SDP offer posted with the ephemeral key (``post_offer``:
``application/sdp``, or OpenAI's multipart "unified interface"), and an aiortc peer
(``webrtc_kit.Peer`` on an ``oai-events`` data channel) that speaks the GA events."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import aiohttp
from harness import Gateway
from webrtc_kit import Peer

CALLS = "/v1/realtime/calls"
SECRETS = "/v1/realtime/client_secrets"
RATE = 48000  # the tracks' PCM16


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    text: str

    def json(self) -> Any:
        return json.loads(self.text)

    @property
    def error(self) -> dict[str, Any]:
        error: dict[str, Any] = self.json()["error"]
        return error


async def mint(
    gateway: Gateway, bearer: str, body: dict[str, Any] | None = None, **headers: str
) -> Answer:
    async with gateway.http.post(
        gateway.url + SECRETS,
        json=body if body is not None else {"session": {"type": "realtime", "model": "local"}},
        headers={"Authorization": f"Bearer {bearer}", **headers},
    ) as response:
        return Answer(response.status, dict(response.headers), await response.text())


async def post_offer(
    gateway: Gateway,
    bearer: str,
    sdp: str,
    *,
    query: str = "",
    session: dict[str, Any] | None = None,
    content_type: str = "application/sdp",
) -> Answer:
    """``session`` given: multipart (an ``sdp`` part and a ``session`` part), as the SDK's
    ``realtime.calls.create`` sends it."""
    headers = {"Authorization": f"Bearer {bearer}"}
    body: Any
    if session is not None:
        body = aiohttp.FormData()
        body.add_field("sdp", sdp, content_type="application/sdp")
        body.add_field("session", json.dumps(session), content_type="application/json")
    else:
        body = sdp.encode()
        headers["Content-Type"] = content_type
    async with gateway.http.post(
        gateway.url + CALLS + query, data=body, headers=headers
    ) as response:
        return Answer(response.status, dict(response.headers), await response.text())


async def call(gateway: Gateway, bearer: str, peer: Peer, **options: Any) -> Answer:
    """Offer, take the answer, wait for the data channel."""
    answer = await post_offer(gateway, bearer, await peer.offer(), **options)
    assert answer.status == 201, answer.text
    await peer.answered({"sdp": answer.text, "type": "answer"})
    return answer


def say(peer: Peer, text: str) -> None:
    """A user message and a response, in the GA protocol."""
    content = [{"type": "input_text", "text": text}]
    peer.send(
        {
            "type": "conversation.item.create",
            "item": {"type": "message", "role": "user", "content": content},
        }
    )
    peer.send({"type": "response.create"})


def transcript(peer: Peer) -> str:
    return "".join(
        e["delta"] for e in peer.events if e["type"] == "response.output_audio_transcript.delta"
    )
