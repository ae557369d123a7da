"""The phone lines of the composition root: which carriers the gateway answers, with what.

Every carrier's stream reaches ``/phone/media`` (the carrier is told from its first messages);
Twilio's ``/twilio/media`` and ``/twilio/voice`` stay as they were. Each carrier's answer
webhook is built with its credential from the settings: with it set, requests must carry the
carrier's signature; without it, the webhook is refused unless ``GATEWAY_AUTH=none``. A carrier's
REST credentials, when set, let the gateway hang a call up after a goodbye.
"""

from __future__ import annotations

from aiohttp import web

from gateway.admission import Admission
from gateway.config import Settings
from gateway.edges.phone.routes import HangUp, PhoneRoutes, PhoneWebhookEntry
from gateway.edges.phone.wire import Carrier
from gateway.edges.twilio.webhook import TwilioHangUp, TwilioWebhook
from gateway.edges.twilio.wire import TwilioCarrier
from gateway.session.manager import SessionManager

__all__ = ["add_phone_routes"]


def _secret(value: object) -> str | None:
    get = getattr(value, "get_secret_value", None)
    return None if get is None else str(get())


def add_phone_routes(
    app: web.Application, settings: Settings, admission: Admission, manager: SessionManager
) -> PhoneRoutes:
    twilio_token = _secret(settings.twilio_auth_token)
    hang_ups: dict[str, HangUp] = {}
    if settings.twilio_account_sid and twilio_token is not None:
        hang_ups["twilio"] = TwilioHangUp(
            settings.twilio_account_sid, twilio_token, settings.twilio_api_base
        )
    routes = PhoneRoutes(settings, admission, manager, hang_ups)
    twilio = TwilioCarrier()
    carriers: list[Carrier] = [twilio]
    twilio_hook = PhoneWebhookEntry(
        TwilioWebhook(twilio_token, farewell=settings.phone_farewell),
        verified=twilio_token is not None,
        setting="TWILIO_AUTH_TOKEN",
        media_path="/twilio/media",
    )
    app.router.add_post("/twilio/voice", routes.answer_handler(twilio_hook))
    app.router.add_get("/twilio/media", routes.media_handler([twilio]))
    app.router.add_get("/phone/media", routes.media_handler(carriers))
    return routes
