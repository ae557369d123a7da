"""The phone endpoints every carrier shares: its answer webhook, and the media stream.

``answer`` serves a carrier's answer webhook (``POST /{carrier}/answer``; Twilio's stays
``/twilio/voice``): with the carrier's credential set, the request must carry its signature;
without it, the webhook is refused unless ``GATEWAY_AUTH=none``. It answers the carrier's
call-control document pointing the call at the media URL, with a short-lived stream token bound
to the call (``gateway.security.tokens``: its own audience, one stream only).

``media`` serves the stream (``GET /phone/media`` for every carrier, ``/twilio/media`` for
Twilio alone): it reads the first messages until a carrier claims one, so one URL serves every
carrier (a stream no carrier claims is closed 1008 with the reason); then the stream's start,
whose token must be the one minted for that call; then a ``PhoneBridge`` carries the call. The
session ends with the call: a phone stream cannot come back, so it is never parked for resume.
When the session ends itself (``END_VOICE_SESSION``) the goodbye plays out, the stream closes,
and the carrier's hang-up (its REST API, when its credentials are set) ends the call.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

import structlog
from aiohttp import WSMsgType, web

from gateway.admission import Admission
from gateway.calls.center import CallCenter
from gateway.calls.records import CallRecord
from gateway.config import Settings
from gateway.edges.phone.bridge import PhoneBridge
from gateway.edges.phone.webhook import Answer, AnswerWebhook, WebhookRequest
from gateway.edges.phone.wire import Carrier, PhoneFormatError, StreamStarted
from gateway.protocol import EndReason
from gateway.session import Session, SessionUser
from gateway.session.client_output import ClientOutput
from gateway.session.manager import SessionManager
from gateway.session.refusals import StartRefused

__all__ = [
    "MAX_PHONE_MESSAGE",
    "PLAY_OUT_S",
    "PhoneRoutes",
    "PhoneWebhookEntry",
    "placed_greeting",
    "public_url",
    "webhook_request",
]

_log = structlog.get_logger("phone")

MAX_PHONE_MESSAGE = 64 * 1024  # a media message is ~300 bytes; a start carries parameters
# Messages read before a carrier must have claimed the stream (Twilio, Telnyx and Exotel send
# ``connected`` first, which no carrier can claim alone; their ``start`` follows).
DETECT_MESSAGES = 4
# How long what was sent may take to play out once the session ended, by end reason: a goodbye
# in full; on shutdown (drain's grace is over) the sentence being spoken, briefly.
PLAY_OUT_S = {EndReason.INTENT.value: 30.0, EndReason.SHUTDOWN.value: 5.0}
CLOSE_POLICY = 1008

HangUp = Callable[[str], Awaitable[None]]
# What the assistant is told first when a placed call reaches a machine and is to leave a message.
VOICEMAIL = (
    "You have reached a voicemail box, not a person. After the beep, leave this as a short "
    "message, then end the call: "
)


def _always(_: WebhookRequest) -> bool:
    return True


@dataclass(frozen=True, slots=True)
class PhoneWebhookEntry:
    """A carrier's answer webhook as wired: ``verified`` when its credential is set (its
    signature is then checked), ``setting`` the credential's name for the refusal.

    A carrier that sends every event of every call to one URL (Telnyx) says which requests
    ask for a call to be connected (``answers``; the others are acknowledged), and one that
    reads no document from the webhook's answer takes it as a command instead (``deliver``:
    the call's id and the answer, sent through the carrier's API)."""

    webhook: AnswerWebhook
    verified: bool
    setting: str
    media_path: str = "/phone/media"
    answers: Callable[[WebhookRequest], bool] = _always
    deliver: Callable[[str, Answer], Awaitable[None]] | None = None


async def webhook_request(settings: Settings, request: web.Request) -> WebhookRequest:
    """A carrier's webhook request as the pure adapters read it."""
    return WebhookRequest(
        method=request.method,
        url=public_url(settings, request),
        headers={name.lower(): value for name, value in request.headers.items()},
        body=await request.read(),
        now=time.time(),
    )


def public_url(
    settings: Settings, request: web.Request, path: str | None = None, *, websocket: bool = False
) -> str:
    """The URL as the carrier sees it: ``GATEWAY_PUBLIC_URL`` when set (behind a proxy), else
    the request's own host and scheme. ``path`` None: the request's own path and query."""
    base = settings.public_url
    if base is None:
        forwarded = request.headers.get("X-Forwarded-Proto", "")
        scheme = forwarded.split(",")[0].strip() or request.scheme
        base = f"{scheme}://{request.host}"
    url = base.rstrip("/") + (request.path_qs if path is None else path)
    if websocket:
        url = "wss://" + url.split("://", 1)[1] if url.startswith("https://") else url
        url = "ws://" + url.split("://", 1)[1] if url.startswith("http://") else url
    return url


class PhoneRoutes:
    def __init__(
        self,
        settings: Settings,
        admission: Admission,
        manager: SessionManager,
        hang_ups: Mapping[str, HangUp] | None = None,
        calls: CallCenter | None = None,
    ) -> None:
        self.settings = settings
        self.admission = admission
        self.manager = manager
        self._hang_ups = dict(hang_ups or {})
        self._calls = calls

    # POST /{carrier}/answer ------------------------------------------------------------------

    def answer_handler(
        self, entry: PhoneWebhookEntry
    ) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handle(request: web.Request) -> web.Response:
            return await self._answer(request, entry)

        return handle

    async def _answer(self, request: web.Request, entry: PhoneWebhookEntry) -> web.Response:
        webhook = entry.webhook
        if self.admission.draining:
            # The carrier then tries the number's fallback instead of a stream we would refuse.
            return web.Response(status=503, text="the gateway is draining")
        hook = await webhook_request(self.settings, request)
        if entry.verified:
            refusal = webhook.refusal(hook)
            if refusal is not None:
                _log.warning("phone_webhook_refused", carrier=webhook.name, reason=refusal)
                return web.Response(status=403, text=f"invalid {webhook.name} signature")
        elif self.settings.auth != "none":
            _log.warning(
                "phone_webhook_refused", carrier=webhook.name, reason=f"{entry.setting} is not set"
            )
            return web.Response(
                status=403, text=f"set {entry.setting} to accept {webhook.name} webhooks"
            )
        try:
            if not entry.answers(hook):
                return web.json_response({})  # an event about a call, not a call to connect
            call_id = webhook.call_id(hook)
        except PhoneFormatError as exc:
            return web.Response(status=400, text=str(exc))
        stream_url = public_url(self.settings, request, entry.media_path, websocket=True)
        answer = webhook.answer(stream_url, self.admission.stream_token(call_id), call_id)
        if entry.deliver is not None:
            await entry.deliver(call_id, answer)
            return web.json_response({})
        return web.Response(
            text=answer.body, content_type=answer.content_type, status=answer.status
        )

    # GET /phone/media ------------------------------------------------------------------------

    def media_handler(
        self, carriers: Sequence[Carrier]
    ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handle(request: web.Request) -> web.StreamResponse:
            return await self._media(request, carriers)

        return handle

    async def _media(self, request: web.Request, carriers: Sequence[Carrier]) -> web.StreamResponse:
        refused = self.admission.refuse_socket(request)
        if refused is not None:
            return refused
        ws = web.WebSocketResponse(max_msg_size=MAX_PHONE_MESSAGE, compress=False, heartbeat=30)
        await ws.prepare(request)
        deadline = time.monotonic() + self.settings.session_start_timeout_s
        found = await self._identify(ws, carriers, deadline)
        if isinstance(found, str):
            _log.warning("phone_stream_refused", reason=found)
            await ws.close(code=CLOSE_POLICY, message=found.encode()[:120])
            return ws
        carrier, started = found
        user = await self.admission.stream_user(started.token, started.call_id, carrier.name)
        placed: CallRecord | None = None
        if not isinstance(user, str) and self._calls is not None:
            # A call the gateway placed runs as whoever placed it, as they asked.
            placed = await self._calls.plan(carrier.name, started.call_id)
            if placed is not None:
                user = await self.admission.placed_call_user(placed)
        if isinstance(user, str):
            _log.warning(
                "phone_stream_refused", carrier=carrier.name, reason=user, call_id=started.call_id
            )
            await ws.close(code=CLOSE_POLICY, message=b"unauthorized")
            if placed is not None and self._calls is not None:
                # Its placer may no longer call (a key revoked since): the call ends here.
                await self._calls.ended(placed.call_id, "failed", error=user)
                await self._calls.hang_up(placed)
            return ws
        await self._serve(ws, carrier, started, user, placed)
        return ws

    async def _identify(
        self, ws: web.WebSocketResponse, carriers: Sequence[Carrier], deadline: float
    ) -> tuple[Carrier, StreamStarted] | str:
        """The carrier of the stream and its start, or why the stream is refused."""
        early: list[str | bytes] = []
        chosen: Carrier | None = None
        while True:
            message = await _receive(ws, deadline)
            if message is None:
                return "the stream closed or sent no start in time"
            if chosen is None:
                early.append(message)
                chosen = next((c for c in carriers if c.claims(message)), None)
                if chosen is None:
                    if len(early) >= DETECT_MESSAGES:
                        return "unrecognised media stream: no carrier's start message"
                    continue
                pending, early = early, []
            else:
                pending = [message]
            for item in pending:
                try:
                    event = chosen.decode(item)
                except PhoneFormatError as exc:
                    _log.warning("phone_bad_message", carrier=chosen.name, problem=str(exc))
                    continue
                if isinstance(event, StreamStarted):
                    return chosen, event

    async def _serve(
        self,
        ws: web.WebSocketResponse,
        carrier: Carrier,
        started: StreamStarted,
        user: SessionUser,
        placed: CallRecord | None = None,
    ) -> None:
        settings = self.settings
        greeting = settings.phone_greeting
        if placed is not None:
            greeting = placed_greeting(placed, greeting)

        async def send(message: str | bytes) -> None:
            if isinstance(message, bytes):
                await ws.send_bytes(message)
            else:
                await ws.send_str(message)

        bridge = PhoneBridge(
            send,
            carrier.speaker(started),
            inbound=started.line,
            greeting=greeting or None,
            max_audio_frames=settings.outbound_audio_frames,
            carrier=carrier.name,
        )
        manager = self.manager

        async def start_session(event: object, outbound: ClientOutput) -> Session:
            session = await manager.start(event, user, outbound)  # type: ignore[arg-type]
            session.movable = False  # the call's media stream is the carrier's: it cannot move
            return session

        log = _log.bind(carrier=carrier.name, call_id=started.call_id)
        try:
            if placed is None:
                session = await bridge.open(
                    start_session, settings.phone_provider, settings.phone_model
                )
            else:
                session = await bridge.open(
                    start_session,
                    placed.provider,
                    placed.model or (None if placed.provider else settings.phone_model),
                    instructions=placed.instructions,
                    tools=placed.tools,
                )
                if self._calls is not None:
                    await self._calls.started(placed, session.session_id)
            log.info("phone_call_started", session_id=session.session_id)
            reader = asyncio.create_task(self._read(ws, carrier, bridge))
            ended = asyncio.create_task(bridge.ended.wait())
            try:
                await asyncio.wait([reader, ended], return_when=asyncio.FIRST_COMPLETED)
                limit = PLAY_OUT_S.get(bridge.end_reason or "")
                if limit is not None and not reader.done():
                    # The goodbye (or on shutdown, the reply being spoken) plays out; the
                    # reader takes the marker echoes, and a caller who hangs up ends the wait.
                    playing = asyncio.create_task(bridge.play_out(limit))
                    await asyncio.wait([playing, reader], return_when=asyncio.FIRST_COMPLETED)
                    playing.cancel()
            finally:
                reader.cancel()
                ended.cancel()
        except StartRefused as refused:
            log.warning("phone_session_refused", message=refused.event.message)
        except Exception:
            log.exception("phone_call_failed")
        finally:
            by_intent = bridge.end_reason == EndReason.INTENT.value
            begun = bridge.session  # set as soon as it started, even if the greeting failed
            if begun is not None:
                if not begun.ended.is_set():
                    await begun.end(EndReason.CLIENT, "the call's media stream closed")
                await manager.forget(begun)
            await bridge.close()
            if placed is not None and self._calls is not None:
                await self._calls.finished(placed, bridge.end_usage)
            hang_up = self._hang_ups.get(carrier.name)
            if by_intent and hang_up is not None:  # before the stream closes: the call ends
                await hang_up(started.call_id)
            if not ws.closed:
                await ws.close()

    async def _read(self, ws: web.WebSocketResponse, carrier: Carrier, bridge: PhoneBridge) -> None:
        async for msg in ws:
            if msg.type not in (WSMsgType.TEXT, WSMsgType.BINARY):
                continue
            try:
                event = carrier.decode(msg.data)
            except PhoneFormatError as exc:
                _log.warning("phone_bad_message", carrier=carrier.name, problem=str(exc))
                continue
            except Exception:  # an adapter's bug: the message is lost, not the call
                _log.exception("phone_decode_failed", carrier=carrier.name)
                continue
            try:
                if not await bridge.on_carrier(event):
                    return
            except Exception:  # one bad event must not hang up the call
                _log.exception("phone_event_failed", carrier=carrier.name, kind=event.type)
        _log.info("phone_stream_closed", carrier=carrier.name, code=ws.close_code)


def placed_greeting(record: CallRecord, default: str) -> str:
    """The first message of a call the gateway placed: its own greeting (else the phone's),
    framed as a message to leave when a machine answered (``machine: "message"``)."""
    greeting = record.greeting or default
    if record.answered_by == "machine" and record.machine == "message":
        return VOICEMAIL + (greeting or "say who called and why, briefly.")
    return greeting


async def _receive(ws: web.WebSocketResponse, deadline: float) -> str | bytes | None:
    """The next text or binary message before ``deadline``; None if the stream ended first."""
    while True:
        try:
            msg = await ws.receive(timeout=max(deadline - time.monotonic(), 0.001))
        except TimeoutError:
            return None
        if msg.type in (WSMsgType.TEXT, WSMsgType.BINARY):
            data: str | bytes = msg.data
            return data
        if msg.type in (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR):
            return None
