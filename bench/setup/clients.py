"""The two clients of ``scripts/bench setup``, each timing one session's set-up on a gateway
(``time.perf_counter``, this process's clock, both ends):

- ``time_session``: a native ``/v1/session`` client (a user JWT): from ``session.start`` sent to
  ``session.started`` received, text mode;
- ``time_call``: what Twilio does for a call: the voice webhook (signed with the Twilio auth
  token; its TwiML hands out the call's stream token), then the Media Stream: ``connected``,
  ``start`` with the token; timed from ``start`` sent to the greeting's first ``media`` frame.

The WebSocket to the gateway is open before the clock starts: what is timed is the session's
set-up (auth, admission, the upstream's connect, and for a call the greeting's first audio).
Every wait is bounded (``STEP_TIMEOUT_S``); a refusal raises ``SetupFailed``."""

from __future__ import annotations

import json
import secrets
import time
import xml.etree.ElementTree as ET
from typing import Any

import aiohttp

from gateway.edges.twilio.signature import twilio_signature

__all__ = ["STEP_TIMEOUT_S", "SetupFailed", "time_call", "time_session"]

STEP_TIMEOUT_S = 10.0  # any one message awaited; a set-up takes ~0.2 s at worst here
SESSION_START = json.dumps({"type": "session.start", "mode": "text"})
SESSION_END = json.dumps({"type": "session.end"})


class SetupFailed(RuntimeError):
    """The gateway refused or dropped a session while the bench was timing it."""


def _ws_url(base_url: str, path: str) -> str:
    return base_url.replace("http://", "ws://", 1) + path


async def _next_json(ws: aiohttp.ClientWebSocketResponse) -> dict[str, Any]:
    while True:
        message = await ws.receive(timeout=STEP_TIMEOUT_S)
        if message.type == aiohttp.WSMsgType.TEXT:
            event = json.loads(message.data)
            if isinstance(event, dict):
                return event
            continue
        if message.type in (
            aiohttp.WSMsgType.CLOSE,
            aiohttp.WSMsgType.CLOSING,
            aiohttp.WSMsgType.CLOSED,
            aiohttp.WSMsgType.ERROR,
        ):
            raise SetupFailed(f"the gateway closed the socket: {ws.close_code} {message.extra}")


async def time_session(http: aiohttp.ClientSession, base_url: str, user_token: str) -> float:
    """Seconds from ``session.start`` sent to ``session.started`` received; the session is
    then ended (and its end awaited, briefly) so that it is gone before the next one."""
    headers = {"Authorization": f"Bearer {user_token}"}
    async with http.ws_connect(_ws_url(base_url, "/v1/session"), headers=headers) as ws:
        began = time.perf_counter()
        await ws.send_str(SESSION_START)
        while True:
            event = await _next_json(ws)
            kind = event.get("type")
            if kind == "session.started":
                took = time.perf_counter() - began
                break
            if kind in ("error", "session.ended"):
                raise SetupFailed(f"session refused: {event}")
        await ws.send_str(SESSION_END)
        try:
            while (await _next_json(ws)).get("type") != "session.ended":
                pass
        except (SetupFailed, TimeoutError):
            pass  # closed, or slow to say so: the pause before the next session covers it
    return took


def call_sid() -> str:
    return "CA" + secrets.token_hex(16)


async def stream_token(
    http: aiohttp.ClientSession, base_url: str, twilio_auth_token: str, sid: str
) -> str:
    """What Twilio gets from the voice webhook for call ``sid``: the TwiML's stream token."""
    url = f"{base_url}/twilio/voice"
    form = {"CallSid": sid, "AccountSid": "AC" + "0" * 32, "From": "+15550001111"}
    headers = {"X-Twilio-Signature": twilio_signature(twilio_auth_token, url, form)}
    timeout = aiohttp.ClientTimeout(total=STEP_TIMEOUT_S)
    async with http.post(url, data=form, headers=headers, timeout=timeout) as response:
        body = await response.text()
        if response.status != 200:
            raise SetupFailed(f"the voice webhook answered {response.status}: {body[:200]}")
    parameter = ET.fromstring(body).find("./Connect/Stream/Parameter[@name='token']")
    if parameter is None or not parameter.get("value"):
        raise SetupFailed(f"the voice webhook's TwiML has no stream token: {body[:200]}")
    return str(parameter.get("value"))


async def time_call(http: aiohttp.ClientSession, base_url: str, twilio_auth_token: str) -> float:
    """Seconds from Twilio's ``start`` sent to the greeting's first ``media`` frame received;
    the call then hangs up (``stop``)."""
    sid = call_sid()
    token = await stream_token(http, base_url, twilio_auth_token, sid)
    stream_sid = "MZ" + secrets.token_hex(16)
    connected = {"event": "connected", "protocol": "Call", "version": "1.0.0"}
    start = {
        "event": "start",
        "sequenceNumber": "1",
        "streamSid": stream_sid,
        "start": {
            "accountSid": "AC" + "0" * 32,
            "streamSid": stream_sid,
            "callSid": sid,
            "tracks": ["inbound"],
            "customParameters": {"token": token},
            "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
        },
    }
    stop = {
        "event": "stop",
        "sequenceNumber": "2",
        "streamSid": stream_sid,
        "stop": {"accountSid": "AC" + "0" * 32, "callSid": sid},
    }
    async with http.ws_connect(_ws_url(base_url, "/twilio/media")) as ws:
        await ws.send_str(json.dumps(connected))
        began = time.perf_counter()
        await ws.send_str(json.dumps(start))
        while (await _next_json(ws)).get("event") != "media":
            pass
        took = time.perf_counter() - began
        await ws.send_str(json.dumps(stop))
    return took
