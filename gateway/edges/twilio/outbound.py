"""Calls the gateway places through Twilio: the dialer (the REST Calls API) and the two webhooks
of each placed call.

``TwilioDialer.place`` POSTs ``/2010-04-01/Accounts/{sid}/Calls.json`` with the call's own
answer URL (``/twilio/calls/{id}/answer``) and status callback (``/twilio/calls/{id}/status``),
its ring timeout, and answering-machine detection as the call asks: ``Enable`` (Twilio tells
a machine from the first words: the call is then hung up) or ``DetectMessageEnd`` (Twilio waits
for the beep: the assistant then leaves its greeting as a message).

``TwilioCallRoutes`` serves those webhooks, signed like every Twilio webhook: the answer marks
the call answered (by a human or a machine, ``AnsweredBy``) and answers TwiML that streams the
call to ``/twilio/media`` with a token bound to its ``CallSid`` (or ``<Hangup/>``, for a machine
the call should not talk to); the status callback reports how the call ended (``completed``,
``busy``, ``no-answer``, ``failed``, ``canceled``) and how long it lasted.

Facts: https://www.twilio.com/docs/voice/api/call-resource (create: To, From, Url,
StatusCallback, Timeout, MachineDetection; CallStatus values; CallDuration),
https://www.twilio.com/docs/voice/answering-machine-detection (AnsweredBy values).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, get_args
from urllib.parse import parse_qs

import aiohttp
import orjson
import structlog
from aiohttp import web

from gateway.calls.center import CallCenter, PlacementFailed
from gateway.calls.records import AnsweredBy, CallRecord, CallStatus
from gateway.config import Settings
from gateway.edges.phone.routes import public_url, webhook_request
from gateway.edges.twilio.signature import connect_twiml
from gateway.edges.twilio.webhook import TwilioHangUp, TwilioWebhook

__all__ = ["TwilioCallRoutes", "TwilioDialer", "answered_by"]

_log = structlog.get_logger("twilio")
HANGUP_TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response><Hangup/></Response>'
_FINAL: tuple[str, ...] = ("completed", "busy", "no-answer", "failed", "canceled")


def answered_by(value: str | None) -> AnsweredBy:
    """Twilio's ``AnsweredBy`` as the record keeps it (absent without detection: unknown)."""
    if value == "human":
        return "human"
    if value is not None and value.startswith(("machine", "fax")):
        return "machine"
    return "unknown"


class TwilioDialer:
    carrier = "twilio"

    def __init__(self, account_sid: str, auth_token: str, api_base: str) -> None:
        self._sid = account_sid
        self._auth = aiohttp.encode_basic_auth(account_sid, auth_token)
        self._api_base = api_base.rstrip("/")
        self._hang_up = TwilioHangUp(account_sid, auth_token, api_base)

    def __repr__(self) -> str:
        return f"TwilioDialer(account_sid={self._sid!r}, auth_token=***)"

    async def place(self, record: CallRecord, public_base: str) -> str:
        base = f"{public_base.rstrip('/')}/twilio/calls/{record.call_id}"
        form = {
            "To": record.to,
            "From": record.from_,
            "Url": f"{base}/answer",
            "Method": "POST",
            "StatusCallback": f"{base}/status",
            "StatusCallbackMethod": "POST",
            "Timeout": str(record.timeout_s),
            "MachineDetection": "DetectMessageEnd" if record.machine == "message" else "Enable",
        }
        url = f"{self._api_base}/2010-04-01/Accounts/{self._sid}/Calls.json"
        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http,
                http.post(url, data=form, headers={"Authorization": self._auth}) as response,
            ):
                body = await response.read()
                status = response.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise PlacementFailed(f"Twilio could not be reached ({type(exc).__name__})") from None
        answer = _json(body)
        if status >= 300 or not isinstance(answer.get("sid"), str):
            message = str(answer.get("message") or f"HTTP {status}")[:200]
            raise PlacementFailed(f"Twilio refused the call: {message}")
        return str(answer["sid"])

    async def hang_up(self, carrier_call_id: str) -> None:
        await self._hang_up(carrier_call_id)


class TwilioCallRoutes:
    """``POST /twilio/calls/{call_id}/answer`` and ``…/status``: a placed call's webhooks."""

    def __init__(
        self,
        settings: Settings,
        center: CallCenter,
        webhook: TwilioWebhook,
        mint_token: Callable[[str], str],
    ) -> None:
        self._settings = settings
        self._center = center
        self._webhook = webhook
        self._mint = mint_token

    def add_to(self, app: web.Application) -> None:
        app.router.add_post("/twilio/calls/{call_id}/answer", self.answer)
        app.router.add_post("/twilio/calls/{call_id}/status", self.status)

    async def _checked(
        self, request: web.Request
    ) -> tuple[CallRecord, dict[str, str]] | web.Response:
        hook = await webhook_request(self._settings, request)
        refusal = self._webhook.refusal(hook)
        if refusal is not None:
            _log.warning("twilio_call_webhook_refused", reason=refusal)
            return web.Response(status=403, text="invalid Twilio signature")
        form = {k: v[-1] for k, v in parse_qs(hook.body.decode(errors="replace")).items()}
        record = await self._center.get(request.match_info["call_id"])
        if record is None or record.carrier != "twilio":
            return web.Response(status=404, text="no such call")
        if record.carrier_call_id not in (None, form.get("CallSid")):
            return web.Response(status=403, text="this webhook is about another call")
        return record, form

    async def answer(self, request: web.Request) -> web.Response:
        checked = await self._checked(request)
        if isinstance(checked, web.Response):
            return checked
        record, form = checked
        call_sid = form.get("CallSid", "")
        if not call_sid:
            return web.Response(status=400, text="CallSid is missing")
        who = answered_by(form.get("AnsweredBy"))
        await self._center.answered(record.call_id, who)
        if who == "machine" and record.machine == "hangup":
            return web.Response(text=HANGUP_TWIML, content_type="text/xml")
        stream_url = public_url(self._settings, request, "/twilio/media", websocket=True)
        twiml = connect_twiml(stream_url, {"token": self._mint(call_sid)})
        return web.Response(text=twiml, content_type="text/xml")

    async def status(self, request: web.Request) -> web.Response:
        checked = await self._checked(request)
        if isinstance(checked, web.Response):
            return checked
        record, form = checked
        call_status = form.get("CallStatus", "")
        if call_status in _FINAL:
            final: CallStatus = next(s for s in get_args(CallStatus) if s == call_status)
            duration = form.get("CallDuration", "")
            seconds = float(duration) if duration.isdigit() else None
            await self._center.ended(record.call_id, final, duration_s=seconds)
        return web.Response(status=204)


def _json(body: bytes) -> dict[str, Any]:
    try:
        parsed = orjson.loads(body) if body else {}
    except orjson.JSONDecodeError:
        return {}
    return parsed if isinstance(parsed, dict) else {}
