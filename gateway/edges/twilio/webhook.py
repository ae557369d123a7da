"""Twilio's voice webhook as a phone-bridge answer webhook (``gateway.edges.phone.webhook``), and
the hang-up through Twilio's REST API.

The webhook is a form POST signed with ``X-Twilio-Signature`` (``signature``); the call is
``CallSid``; the answer is TwiML connecting the call to a bidirectional Media Stream with the
stream token as a ``<Parameter>`` (Twilio strips query strings from stream URLs; parameters come
back in ``start.customParameters``), and the farewell Twilio says if the stream ends from our
side while the caller is still there.
"""

from __future__ import annotations

import contextlib
from urllib.parse import parse_qs

import aiohttp
import structlog

from gateway.edges.phone.webhook import Answer, WebhookRequest
from gateway.edges.phone.wire import PhoneFormatError
from gateway.edges.twilio.signature import connect_twiml, valid_signature

__all__ = ["TwilioHangUp", "TwilioWebhook"]

_log = structlog.get_logger("twilio")


def _form(request: WebhookRequest) -> dict[str, list[str]]:
    try:
        text = request.body.decode()
    except UnicodeDecodeError:
        raise PhoneFormatError("the webhook's body is not UTF-8") from None
    return parse_qs(text, keep_blank_values=True)


class TwilioWebhook:
    name = "twilio"

    def __init__(self, auth_token: str | None, *, farewell: str = "") -> None:
        self._auth_token = auth_token
        self._farewell = farewell

    def refusal(self, request: WebhookRequest) -> str | None:
        if self._auth_token is None:
            return "TWILIO_AUTH_TOKEN is not set"
        try:
            form = _form(request)
        except PhoneFormatError as exc:
            return str(exc)
        signature = request.headers.get("x-twilio-signature")
        if not valid_signature(self._auth_token, request.url, form, signature):
            return (
                "X-Twilio-Signature does not match"
                if signature
                else "X-Twilio-Signature is missing"
            )
        return None

    def call_id(self, request: WebhookRequest) -> str:
        values = _form(request).get("CallSid", [])
        if not values or not values[-1]:
            raise PhoneFormatError("CallSid is missing")
        return values[-1]

    def answer(self, stream_url: str, token: str, call_id: str) -> Answer:
        return Answer("text/xml", connect_twiml(stream_url, {"token": token}, self._farewell))


class TwilioHangUp:
    """End a call through Twilio's REST API (the stream is already closed): a goodbye said by
    ``END_VOICE_SESSION`` ends the call there, rather than going on to the TwiML's farewell."""

    def __init__(self, account_sid: str, auth_token: str, api_base: str) -> None:
        self._account_sid = account_sid
        self._auth_token = auth_token
        self._api_base = api_base.rstrip("/")

    async def __call__(self, call_sid: str) -> None:
        if not call_sid:
            return
        url = f"{self._api_base}/2010-04-01/Accounts/{self._account_sid}/Calls/{call_sid}.json"
        headers = {"Authorization": aiohttp.encode_basic_auth(self._account_sid, self._auth_token)}
        with contextlib.suppress(aiohttp.ClientError, TimeoutError):
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http,
                http.post(url, data={"Status": "completed"}, headers=headers) as response,
            ):
                if response.status < 400:
                    _log.info("twilio_call_ended", call_sid=call_sid, status=response.status)
                    return
                _log.warning("twilio_hang_up_refused", call_sid=call_sid, status=response.status)
                return
        _log.warning("twilio_hang_up_failed", call_sid=call_sid)
