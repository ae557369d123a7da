"""The data of ``fakes.carriers.twilio_api``: a simulated call (``SimulatedCall``) and its Call
resource JSON, Twilio's JSON errors and Basic auth, the checks of a create-call form, and the
TwiML verbs the simulator follows.

Facts, from https://www.twilio.com/docs/voice/api/call-resource: a call's SID is ``CA`` and 32
hex digits; its ``status`` is ``queued``, ``ringing``, ``in-progress``, ``completed``, ``busy``,
``failed``, ``no-answer`` or ``canceled``; dates are RFC 2822 in GMT; ``duration`` (seconds, a
string) is empty until the call ends; ``answered_by`` is set with answering machine detection.
Errors are ``{"code", "message", "more_info", "status"}``
(https://www.twilio.com/docs/api/errors/21211: a ``To`` that is not E.164, or equal to
``From``; https://www.twilio.com/docs/api/errors/20003: bad credentials, 401).

``AnsweredBy`` (https://www.twilio.com/docs/voice/answering-machine-detection):
``MachineDetection=Enable`` answers ``human``, ``machine_start``, ``fax`` or ``unknown``;
``DetectMessageEnd`` answers ``human`` or, after the greeting, ``machine_end_beep`` (or
``machine_end_silence`` / ``machine_end_other``).

Guessed: the messages of 21201, 21212, 21205 and 20404 (the codes are Twilio's; the wording is
close to what its API answers), the 400 for an update this fake does not simulate.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hmac
import re
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any, Literal

import orjson
from aiohttp import web

from fakes.carriers.twilio import TwilioStream

__all__ = [
    "OUTCOMES",
    "ConnectStream",
    "Hangup",
    "LoggedRequest",
    "Outcome",
    "Say",
    "SentWebhook",
    "SimulatedCall",
    "Unsupported",
    "Verb",
    "answered_by",
    "basic_auth_ok",
    "create_form_error",
    "error_body",
    "json_response",
    "not_found",
    "parse_twiml",
    "request_form",
]

Outcome = Literal["answer", "busy", "no-answer", "failed", "machine"]
OUTCOMES: tuple[Outcome, ...] = ("answer", "busy", "no-answer", "failed", "machine")
_E164 = re.compile(r"\+[1-9][0-9]{1,14}")
API_VERSION = "2010-04-01"
_PROGRESS = {"initiated": "initiated", "ringing": "ringing", "answered": "in-progress"}


@dataclass(frozen=True)
class LoggedRequest:
    """One request to the fake: its form (a key sent twice has two values)."""

    method: str
    path: str
    form: dict[str, list[str]]
    authorized: bool  # the right AccountSid:AuthToken


@dataclass
class SentWebhook:
    """A request the fake made: the voice webhook, or a status callback."""

    kind: Literal["voice", "status"]
    call_sid: str
    url: str
    method: str
    form: dict[str, str]
    signature: str = field(repr=False)
    status: int | None = None  # what the gateway answered (None: no answer)
    body: str = field(default="", repr=False)
    error: str | None = None


def error_body(code: int, message: str, status: int) -> dict[str, Any]:
    """Twilio's JSON error."""
    return {
        "code": code,
        "message": message,
        "more_info": f"https://www.twilio.com/docs/errors/{code}",
        "status": status,
    }


def json_response(
    body: dict[str, Any], headers: dict[str, str] | None = None, *, status: int = 0
) -> web.Response:
    """``body`` as JSON; an error's status is its own."""
    return web.Response(
        status=status or int(body["status"]),
        body=orjson.dumps(body),
        content_type="application/json",
        headers=headers,
    )


def not_found(path: str) -> web.Response:
    return json_response(error_body(20404, f"The requested resource {path} was not found", 404))


def basic_auth_ok(header: str, account_sid: str, auth_token: str) -> bool:
    """Whether ``Authorization`` is ``Basic`` with ``account_sid:auth_token``; constant-time."""
    scheme, _, encoded = header.partition(" ")
    try:
        credentials = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return False
    expected = f"{account_sid}:{auth_token}".encode()
    return scheme.lower() == "basic" and hmac.compare_digest(credentials, expected)


async def request_form(request: web.Request) -> dict[str, list[str]]:
    """A request's form and query parameters (a key sent twice keeps both values)."""
    form: dict[str, list[str]] = {}
    if request.method == "POST":
        for key, value in (await request.post()).items():
            form.setdefault(key, []).append(str(value))
    for key, value in request.query.items():
        form.setdefault(key, []).append(value)
    return form


def create_form_error(form: dict[str, list[str]]) -> dict[str, Any] | None:
    """The 400 Twilio answers a create-call form with, or None if the form is good."""
    to, from_ = _last(form, "To"), _last(form, "From")
    if not to:
        return error_body(21201, "No 'To' number is specified", 400)
    if not _E164.fullmatch(to) or to == from_:
        return error_body(21211, f"The 'To' number {to} is not a valid phone number.", 400)
    if not from_ or not _E164.fullmatch(from_):
        return error_body(21212, f"The 'From' number {from_} is not a valid phone number.", 400)
    if not _last(form, "Url") and not _last(form, "Twiml"):
        return error_body(21205, "Url parameter is required.", 400)
    return None


def answered_by(outcome: Outcome, machine_detection: str | None) -> str | None:
    """``AnsweredBy`` for a call answered with ``outcome`` (None without detection)."""
    if machine_detection not in ("Enable", "DetectMessageEnd"):
        return None
    if outcome != "machine":
        return "human"
    return "machine_start" if machine_detection == "Enable" else "machine_end_beep"


def _last(form: dict[str, list[str]], key: str) -> str:
    values = form.get(key) or [""]
    return values[-1]


def _rfc2822(moment: datetime | None) -> str | None:
    return None if moment is None else format_datetime(moment, usegmt=True)


@dataclass
class SimulatedCall:
    """One call the fake placed (or received), as the test sees it."""

    sid: str
    account_sid: str
    to: str
    from_: str
    direction: Literal["outbound-api", "inbound"]
    outcome: Outcome = "answer"
    url: str | None = None  # the TwiML webhook
    method: str = "POST"
    twiml: str | None = None  # inline TwiML given instead of a Url
    status_callback: str | None = None
    status_callback_method: str = "POST"
    status_callback_events: tuple[str, ...] = ()
    machine_detection: str | None = None
    timeout_s: int = 60
    status: str = "queued"
    history: list[str] = field(default_factory=list)  # every status it went through, in order
    answered_by: str | None = None
    created: datetime = field(default_factory=lambda: datetime.now(UTC))
    started: datetime | None = None  # answered
    ended: datetime | None = None
    answered_at: float | None = None  # time.monotonic()
    ended_at: float | None = None
    documents: list[str] = field(default_factory=list)  # the TwiML the webhook answered
    said: list[str] = field(default_factory=list)  # <Say> texts played to the end, in order
    stream_url: str | None = None
    stream_parameters: dict[str, str] = field(default_factory=dict)
    stream: TwilioStream | None = None
    errors: list[str] = field(default_factory=list)  # what Twilio would log in its debugger
    hung_up_by_api: bool = False
    hang_up_requested: asyncio.Event = field(default_factory=asyncio.Event, repr=False)

    @classmethod
    def from_form(
        cls, sid: str, account_sid: str, form: dict[str, list[str]], outcome: Outcome
    ) -> SimulatedCall:
        """An outbound call from a create-call form (checked by ``create_form_error``)."""

        def last(key: str, default: str = "") -> str:
            return (form.get(key) or [default])[-1]

        timeout = last("Timeout", "60")
        return cls(
            sid,
            account_sid,
            last("To"),
            last("From"),
            "outbound-api",
            outcome=outcome,
            url=last("Url") or None,
            method=last("Method", "POST").upper(),
            twiml=last("Twiml") or None,
            status_callback=last("StatusCallback") or None,
            status_callback_method=last("StatusCallbackMethod", "POST").upper(),
            # sent once per event, or space-separated as in TwiML
            status_callback_events=tuple(
                event for value in form.get("StatusCallbackEvent", []) for event in value.split()
            ),
            machine_detection=last("MachineDetection") or None,
            timeout_s=int(timeout) if timeout.isdigit() else 60,
            history=["queued"],
        )

    @property
    def finished(self) -> bool:
        return self.status in ("completed", "busy", "no-answer", "failed", "canceled")

    @property
    def duration_s(self) -> int:
        """Whole seconds from the answer to the end (0 for a call never answered)."""
        if self.answered_at is None:
            return 0
        end = self.ended_at if self.ended_at is not None else time.monotonic()
        return int(end - self.answered_at + 0.5)  # guessed: Twilio's rounding is undocumented

    def resource(self) -> dict[str, Any]:
        """The Call resource as Twilio's REST API returns it."""
        uri = f"/{API_VERSION}/Accounts/{self.account_sid}/Calls/{self.sid}"
        return {
            "sid": self.sid,
            "date_created": _rfc2822(self.created),
            "date_updated": _rfc2822(self.ended or self.started or self.created),
            "parent_call_sid": None,
            "account_sid": self.account_sid,
            "to": self.to,
            "to_formatted": self.to,
            "from": self.from_,
            "from_formatted": self.from_,
            "phone_number_sid": None,
            "status": self.status,
            "start_time": _rfc2822(self.started),
            "end_time": _rfc2822(self.ended),
            "duration": str(self.duration_s) if self.finished else None,
            "price": None,
            "price_unit": "USD",
            "direction": self.direction,
            "answered_by": self.answered_by,
            "api_version": API_VERSION,
            "forwarded_from": None,
            "group_sid": None,
            "caller_name": None,
            "queue_time": "0",
            "trunk_sid": None,
            "uri": f"{uri}.json",
            "subresource_uris": {
                name: f"{uri}/{name.title().replace('_', '')}.json"
                for name in ("notifications", "recordings", "streams", "events")
            },
        }

    def webhook_form(self) -> dict[str, str]:
        """What Twilio posts to the call's webhooks (the voice URL and the status callback)."""
        form = {
            "CallSid": self.sid,
            "AccountSid": self.account_sid,
            "From": self.from_,
            "To": self.to,
            "CallStatus": self.status,
            "Direction": self.direction,
            "ApiVersion": API_VERSION,
        }
        if self.answered_by is not None:
            form["AnsweredBy"] = self.answered_by
        return form

    def status_form(self, event: str | None, sequence: int) -> dict[str, str]:
        """A status callback: of a progress ``event`` (``initiated``, ``ringing``,
        ``answered``), or of the end (``event`` None, with ``CallDuration``)."""
        form = self.webhook_form()
        if event is not None:
            form["CallStatus"] = _PROGRESS[event]
        if self.finished:
            form["CallDuration"] = str(self.duration_s)
        return form | {
            "Timestamp": format_datetime(datetime.now(UTC), usegmt=True),
            "CallbackSource": "call-progress-events",
            "SequenceNumber": str(sequence),
        }


# -- TwiML -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Say:
    text: str


@dataclass(frozen=True, slots=True)
class ConnectStream:
    url: str
    parameters: dict[str, str]


@dataclass(frozen=True, slots=True)
class Hangup:
    pass


@dataclass(frozen=True, slots=True)
class Unsupported:
    """A verb this fake does not play (``<Play>``, ``<Gather>``, ``<Redirect>``, …)."""

    tag: str


Verb = Say | ConnectStream | Hangup | Unsupported


def parse_twiml(document: str) -> list[Verb]:
    """The verbs of a ``<Response>``; ``ValueError`` for a document that is not TwiML."""
    try:
        root = ET.fromstring(document)  # the gateway's own answer, in a test: trusted
    except ET.ParseError as exc:
        raise ValueError(f"TwiML that is not XML: {exc}") from None
    if root.tag != "Response":
        raise ValueError(f"TwiML whose root is <{root.tag}>, not <Response>")
    verbs: list[Verb] = []
    for element in root:
        if element.tag == "Say":
            verbs.append(Say("".join(element.itertext()).strip()))
        elif element.tag == "Hangup":
            verbs.append(Hangup())
        elif element.tag == "Connect" and (stream := element.find("Stream")) is not None:
            url = stream.get("url")
            if not url:
                raise ValueError("<Stream> without a url")
            parameters = {
                p.get("name", ""): p.get("value", "") for p in stream.findall("Parameter")
            }
            verbs.append(ConnectStream(url, parameters))
        else:
            verbs.append(Unsupported(element.tag))
    return verbs
