"""The two Twilio endpoints: the voice webhook (TwiML) and the Media Streams socket.

``POST /twilio/voice`` is what a Twilio number calls when a call comes in. With
``TWILIO_AUTH_TOKEN`` set it checks ``X-Twilio-Signature`` (HMAC-SHA1 over the URL Twilio called
and the sorted form fields); without it, it refuses unless ``GATEWAY_AUTH=none``. It answers TwiML
that connects the call to ``wss://{public host}/twilio/media`` with a short-lived stream token as
a ``<Parameter>`` (Twilio strips query strings from stream URLs; custom parameters reach us in
the ``start`` message). A stream token has its own audience, names the call, and opens one
stream only (``gateway.security.tokens``); a user's token does not open a phone stream.

``GET /twilio/media`` accepts Twilio's socket, reads ``connected`` and ``start``, checks the token
against the ``callSid`` of ``start``, and hands the call to a ``TwilioBridge``. A bad, reused or
missing token closes the stream (1008) with the reason logged. The session ends with the call:
a phone stream cannot come back, so it is never parked for resume. When the session ends itself
(``END_VOICE_SESSION``), the goodbye plays out, the stream closes, and with
``TWILIO_ACCOUNT_SID`` set the call is hung up through Twilio's REST API.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import aiohttp
import structlog
from aiohttp import WSMsgType, web

from gateway.admission import Admission
from gateway.config import Settings
from gateway.edges.twilio import codec
from gateway.edges.twilio.bridge import TwilioBridge
from gateway.edges.twilio.signature import connect_twiml, valid_signature
from gateway.protocol import EndReason
from gateway.session import Session, SessionUser
from gateway.session.client_output import ClientOutput
from gateway.session.manager import SessionManager
from gateway.session.refusals import StartRefused

__all__ = ["TwilioRoutes"]

_log = structlog.get_logger("twilio")

MAX_TWILIO_FRAME = 64 * 1024  # a media frame is ~300 bytes; start carries parameters
# How long what was sent may take to play out once the session ended, by end reason: a goodbye
# in full; on shutdown (drain's grace is over) the sentence being spoken, briefly.
PLAY_OUT_S = {EndReason.INTENT.value: 30.0, EndReason.SHUTDOWN.value: 5.0}


class TwilioRoutes:
    def __init__(self, settings: Settings, admission: Admission, manager: SessionManager) -> None:
        self.settings = settings
        self.admission = admission
        self.manager = manager

    # POST /twilio/voice ----------------------------------------------------------------------

    async def voice(self, request: web.Request) -> web.Response:
        if self.admission.draining:
            # Twilio then tries the number's fallback URL instead of a stream we would refuse.
            return web.Response(status=503, text="the gateway is draining")
        form = {key: str(value) for key, value in (await request.post()).items()}
        token = self.settings.twilio_auth_token
        if token is not None:
            if not valid_signature(
                token.get_secret_value(),
                self._public_url(request),
                form,
                request.headers.get("X-Twilio-Signature"),
            ):
                _log.warning("twilio_signature_invalid", path=request.path)
                return web.Response(status=403, text="invalid Twilio signature")
        elif self.settings.auth != "none":
            _log.warning("twilio_webhook_refused", reason="TWILIO_AUTH_TOKEN is not set")
            return web.Response(status=403, text="set TWILIO_AUTH_TOKEN to accept Twilio webhooks")
        call_sid = form.get("CallSid", "")
        if not call_sid:
            return web.Response(status=400, text="CallSid is missing")
        stream_url = self._public_url(request, "/twilio/media", websocket=True)
        twiml = connect_twiml(
            stream_url,
            {"token": self.admission.stream_token(call_sid)},
            farewell=self.settings.twilio_farewell,
        )
        return web.Response(text=twiml, content_type="text/xml")

    def _public_url(
        self, request: web.Request, path: str | None = None, *, websocket: bool = False
    ) -> str:
        """The URL as Twilio sees it: ``GATEWAY_PUBLIC_URL`` when set (behind a proxy), else
        the request's own host and scheme."""
        base = self.settings.public_url
        if base is None:
            forwarded = request.headers.get("X-Forwarded-Proto", "")
            scheme = forwarded.split(",")[0].strip() or request.scheme
            base = f"{scheme}://{request.host}"
        base = base.rstrip("/")
        url = base + (request.path_qs if path is None else path)
        if websocket:
            url = "wss://" + url.split("://", 1)[1] if url.startswith("https://") else url
            url = "ws://" + url.split("://", 1)[1] if url.startswith("http://") else url
        return url

    # GET /twilio/media -----------------------------------------------------------------------

    async def media(self, request: web.Request) -> web.StreamResponse:
        refused = self.admission.refuse_socket(request)
        if refused is not None:
            return refused
        ws = web.WebSocketResponse(max_msg_size=MAX_TWILIO_FRAME, compress=False, heartbeat=30)
        await ws.prepare(request)
        start = await self._await_start(ws)
        if start is None:
            await ws.close(code=1008, message=b"no start message")
            return ws
        user = await self.admission.stream_user(
            start.custom_parameters.get("token"), start.call_sid
        )
        if isinstance(user, str):
            _log.warning("twilio_stream_refused", reason=user, call_sid=start.call_sid)
            await ws.close(code=1008, message=b"unauthorized")
            return ws
        await self._serve(ws, start, user)
        return ws

    async def _await_start(self, ws: web.WebSocketResponse) -> codec.Start | None:
        deadline = time.monotonic() + self.settings.session_start_timeout_s
        while True:
            try:
                msg = await ws.receive(timeout=max(deadline - time.monotonic(), 0.001))
            except TimeoutError:
                _log.warning("twilio_stream_refused", reason="no start message in time")
                return None
            if msg.type != WSMsgType.TEXT:
                return None
            try:
                event = codec.decode(msg.data)
            except codec.TwilioFormatError as exc:
                _log.warning("twilio_bad_message", problem=str(exc))
                continue
            if isinstance(event, codec.Start):
                return event

    async def _serve(
        self, ws: web.WebSocketResponse, start: codec.Start, user: SessionUser
    ) -> None:
        bridge = TwilioBridge(
            ws.send_str,
            stream_sid=start.stream_sid,
            greeting=self.settings.twilio_greeting or None,
            max_audio_frames=self.settings.outbound_audio_frames,
        )
        manager = self.manager

        async def start_session(event: object, outbound: ClientOutput) -> Session:
            session = await manager.start(event, user, outbound)  # type: ignore[arg-type]
            session.movable = False  # the call's media stream is Twilio's: it cannot move
            return session

        try:
            session = await bridge.open(
                start_session, self.settings.twilio_provider, self.settings.twilio_model
            )
            _log.info("twilio_call_started", call_sid=start.call_sid, session_id=session.session_id)
            reader = asyncio.create_task(self._read(ws, bridge))
            ended = asyncio.create_task(bridge.ended.wait())
            try:
                await asyncio.wait([reader, ended], return_when=asyncio.FIRST_COMPLETED)
                limit = PLAY_OUT_S.get(bridge.end_reason or "")
                if limit is not None and not reader.done():
                    # The goodbye (or on shutdown, the reply being spoken) plays out; the
                    # reader takes the mark echoes, and a caller who hangs up ends the wait.
                    playing = asyncio.create_task(bridge.play_out(limit))
                    await asyncio.wait([playing, reader], return_when=asyncio.FIRST_COMPLETED)
                    playing.cancel()
            finally:
                reader.cancel()
                ended.cancel()
        except StartRefused as refused:
            _log.warning("twilio_session_refused", message=refused.event.message)
        except Exception:
            _log.exception("twilio_call_failed", call_sid=start.call_sid)
        finally:
            by_intent = bridge.end_reason == EndReason.INTENT.value
            started = bridge.session  # set as soon as it started, even if the greeting failed
            if started is not None:
                if not started.ended.is_set():
                    await started.end(EndReason.CLIENT, "the call's media stream closed")
                await manager.forget(started)
            await bridge.close()
            if by_intent:  # before the stream closes: the call ends with it, not after
                await self._hang_up(start.call_sid)
            if not ws.closed:
                await ws.close()

    async def _read(self, ws: web.WebSocketResponse, bridge: TwilioBridge) -> None:
        async for msg in ws:
            if msg.type != WSMsgType.TEXT:
                continue
            try:
                event = codec.decode(msg.data)
            except codec.TwilioFormatError as exc:
                _log.warning("twilio_bad_message", problem=str(exc))
                continue
            try:
                if not await bridge.on_twilio(event):
                    return
            except Exception:  # one bad event must not hang up the call
                _log.exception("twilio_event_failed", kind=event.type)

    async def _hang_up(self, call_sid: str) -> None:
        """End the call itself (the stream is already closed) when credentials are set."""
        sid, token = self.settings.twilio_account_sid, self.settings.twilio_auth_token
        if not sid or token is None or not call_sid:
            return
        base = self.settings.twilio_api_base.rstrip("/")
        url = f"{base}/2010-04-01/Accounts/{sid}/Calls/{call_sid}.json"
        headers = {"Authorization": aiohttp.encode_basic_auth(sid, token.get_secret_value())}
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
