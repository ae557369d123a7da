"""The phone lines of the composition root: which carriers the gateway answers, with what.

Every carrier's stream reaches ``/phone/media`` (the carrier is told from its first messages);
Twilio's ``/twilio/media`` and ``/twilio/voice`` stay as they were. Each carrier's answer
webhook is built with its credential from the settings: with it set, requests must carry the
carrier's signature; without it, the webhook is refused unless ``GATEWAY_AUTH=none`` (it then
answers unchecked, for a local trial). A carrier's REST credentials, when set, let the gateway
hang a call up after a goodbye.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Awaitable, Callable, Iterable

import structlog
from aiohttp import web
from pydantic import SecretStr

from gateway.admission import Admission
from gateway.calls.center import CallCenter, CallSettings, Dialer
from gateway.calls.routes import CallRoutes
from gateway.clock import Clock, SystemClock
from gateway.config import Settings
from gateway.edges.exotel.webhook import ExotelAnswerWebhook
from gateway.edges.exotel.wire import ExotelCarrier
from gateway.edges.phone.routes import HangUp, PhoneRoutes, PhoneWebhookEntry
from gateway.edges.phone.webhook import Answer, AnswerWebhook, WebhookRequest
from gateway.edges.phone.wire import Carrier
from gateway.edges.plivo.webhook import PlivoAnswerWebhook
from gateway.edges.plivo.wire import PlivoCarrier
from gateway.edges.telnyx.control import TelnyxControl
from gateway.edges.telnyx.outbound import TelnyxCallRoutes, TelnyxDialer
from gateway.edges.telnyx.webhook import CallInitiated, TelnyxAnswerWebhook, parse_event
from gateway.edges.telnyx.wire import TelnyxCarrier
from gateway.edges.twilio.outbound import TwilioCallRoutes, TwilioDialer
from gateway.edges.twilio.webhook import TwilioHangUp, TwilioWebhook
from gateway.edges.twilio.wire import TwilioCarrier
from gateway.edges.vonage.webhook import VonageAnswerWebhook
from gateway.edges.vonage.wire import VonageCarrier
from gateway.governance.ports import CallBook
from gateway.session.manager import SessionManager

__all__ = ["add_phone_routes", "carriers"]

_log = structlog.get_logger("phone")


def carriers(settings: Settings) -> tuple[Carrier, ...]:
    """Every carrier ``/phone/media`` serves, in the order they are asked to claim a stream."""
    return (
        TwilioCarrier(),
        TelnyxCarrier(settings.telnyx_codec),
        PlivoCarrier(),
        VonageCarrier(),
        ExotelCarrier(),
    )


def _secret(value: SecretStr | None) -> str | None:
    return None if value is None else value.get_secret_value() or None


def _entry(
    secret: str | None,
    setting: str,
    build: Callable[[str], AnswerWebhook],
    media_path: str = "/phone/media",
) -> PhoneWebhookEntry:
    """A webhook verified with ``secret``; without one, built with a key nothing can match (its
    signature check is not run: the route refuses it, or with auth off answers unchecked)."""
    key = secret if secret is not None else secrets.token_hex(32)
    return PhoneWebhookEntry(build(key), secret is not None, setting, media_path)


def _an_incoming_call(request: WebhookRequest) -> bool:
    """Of Telnyx's events, the one that asks for a call to be answered."""
    event = parse_event(request.body)
    return isinstance(event, CallInitiated) and event.direction == "incoming"


async def _no_telnyx_api(call_control_id: str, answer: Answer) -> None:
    _log.warning("telnyx_call_not_answered", reason="TELNYX_API_KEY is not set")


def _add_answer(
    app: web.Application, path: str, handler: Callable[[web.Request], Awaitable[web.Response]]
) -> None:
    """An answer webhook: carriers request it with a GET or a POST, as the number is set up."""
    app.router.add_route("GET", path, handler)
    app.router.add_route("POST", path, handler)


def add_phone_routes(
    app: web.Application,
    settings: Settings,
    admission: Admission,
    manager: SessionManager,
    *,
    book: CallBook | None = None,
    tool_ids: Iterable[str] = (),
    clock: Clock | None = None,
) -> PhoneRoutes:
    """Every carrier's routes; with ``book`` (where placed calls are kept), ``/v1/calls`` and the
    placed calls' webhooks for each carrier whose REST credentials are set."""
    twilio_token = _secret(settings.twilio_auth_token)
    hang_ups: dict[str, HangUp] = {}
    dialers: dict[str, Dialer] = {}
    if settings.twilio_account_sid and twilio_token is not None:
        hang_ups["twilio"] = TwilioHangUp(
            settings.twilio_account_sid, twilio_token, settings.twilio_api_base
        )
        dialers["twilio"] = TwilioDialer(
            settings.twilio_account_sid, twilio_token, settings.twilio_api_base
        )
    telnyx_key = _secret(settings.telnyx_api_key)
    telnyx_control = (
        None if telnyx_key is None else TelnyxControl(telnyx_key, settings.telnyx_api_base)
    )
    if telnyx_control is not None:
        hang_ups["telnyx"] = telnyx_control.hang_up
        if settings.telnyx_connection_id and settings.telnyx_public_key:
            dialers["telnyx"] = TelnyxDialer(telnyx_control, settings.telnyx_connection_id)
    center = (
        None
        if book is None
        else CallCenter(
            book,
            dialers,
            clock or SystemClock(),
            CallSettings(default_from=settings.calls_from),
        )
    )
    routes = PhoneRoutes(settings, admission, manager, hang_ups, center)
    lines = carriers(settings)
    farewell = settings.phone_farewell
    twilio_hook = TwilioWebhook(twilio_token, farewell=farewell)
    twilio = PhoneWebhookEntry(
        twilio_hook,
        twilio_token is not None,
        "TWILIO_AUTH_TOKEN",
        "/twilio/media",
    )
    app.router.add_post("/twilio/voice", routes.answer_handler(twilio))
    app.router.add_get("/twilio/media", routes.media_handler([lines[0]]))
    public_key = settings.telnyx_public_key
    telnyx_hook = TelnyxAnswerWebhook(
        public_key or base64.b64encode(secrets.token_bytes(32)).decode(),
        codec=settings.telnyx_codec,
    )
    telnyx = PhoneWebhookEntry(
        telnyx_hook,
        public_key is not None,
        "TELNYX_PUBLIC_KEY",
        answers=_an_incoming_call,
        deliver=telnyx_control.answer if telnyx_control is not None else _no_telnyx_api,
    )
    app.router.add_post("/telnyx/events", routes.answer_handler(telnyx))
    plivo_token = _secret(settings.plivo_auth_token)
    plivo_hook = PlivoAnswerWebhook(plivo_token or secrets.token_hex(32), farewell=farewell)
    plivo = PhoneWebhookEntry(
        plivo_hook, plivo_token is not None, "PLIVO_AUTH_TOKEN", answers=plivo_hook.connects
    )
    _add_answer(app, "/plivo/answer", routes.answer_handler(plivo))
    vonage = _entry(
        _secret(settings.vonage_signature_secret),
        "VONAGE_SIGNATURE_SECRET",
        lambda key: VonageAnswerWebhook(
            key, application_id=settings.vonage_application_id, rate=settings.vonage_rate
        ),
    )
    _add_answer(app, "/vonage/answer", routes.answer_handler(vonage))
    exotel = _entry(
        _secret(settings.exotel_answer_secret),
        "EXOTEL_ANSWER_SECRET",
        lambda key: ExotelAnswerWebhook(key, sample_rate=settings.exotel_sample_rate),
    )
    _add_answer(app, "/exotel/answer", routes.answer_handler(exotel))
    app.router.add_get("/phone/media", routes.media_handler(lines))
    if center is not None:
        CallRoutes(settings, admission, center, frozenset(tool_ids)).add_to(app)
        if "twilio" in dialers:
            TwilioCallRoutes(settings, center, twilio_hook, admission.stream_token).add_to(app)
        if "telnyx" in dialers and telnyx_control is not None:
            TelnyxCallRoutes(
                settings,
                center,
                telnyx_hook,
                telnyx_control,
                admission.stream_token,
                settings.telnyx_codec,
            ).add_to(app)
    return routes
