"""A fake Telnyx Call Control REST API over aiohttp: the commands the gateway sends, and the calls
they drive (``fakes.carriers.telnyx_calls``): signed webhooks to the gateway, and the media
stream (``fakes.carriers.telnyx``) once a call is answered with a ``stream_url``.

Routes (JSON in and out, ``Authorization: Bearer <api key>`` or 401)::

    POST /v2/calls                                    dial: {"data": {"call_control_id", …}}
    POST /v2/calls/{call_control_id}/actions/answer   an incoming call, with its stream
    POST /v2/calls/{call_control_id}/actions/streaming_start
    POST /v2/calls/{call_control_id}/actions/hangup

A command answers ``{"data": {"result": "ok"}}``; on a call that has ended, 422 with error code
``90018`` ("Call has already ended"); on an unknown call, 404; a missing or invalid parameter,
422. A ``command_id`` already seen for the call is ignored, answered ``ok``, as Telnyx documents.
Only the PCMU and PCMA codecs are simulated (422 for the others). Errors are
``{"errors": [{"code", "title", "detail"}]}``.

For tests: ``public_key`` (give it to the gateway as ``TELNYX_PUBLIC_KEY``); ``ring(...)`` makes
an incoming call reach ``webhook_url`` (``call.initiated``); ``script(CallScript(...))`` decides
how the next dialled call goes (busy, no answer, failed, a machine answering, wrongly signed
webhooks, its stream's faults); ``hang_up_caller(...)`` is the caller hanging up. ``calls``,
``requests`` (the Authorization header left out) and ``deliveries`` record everything;
``wait_for_stream`` and ``wait_for_delivery`` wait for one.

Guessed: the error codes other than 90018, the 404, and the error's titles.

Sources:
- https://developers.telnyx.com/api-reference/call-commands/dial
- https://developers.telnyx.com/api-reference/call-commands/answer-call
- https://developers.telnyx.com/api-reference/call-commands/hangup-call
- https://developers.telnyx.com/api-reference/call-commands/streaming-start
- https://developers.telnyx.com/docs/voice/programmable-voice/media-streaming (the dial's answer)
- https://developers.telnyx.com/api/errors/90018
"""

from __future__ import annotations

import asyncio
import hmac
from collections import deque
from dataclasses import dataclass
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from fakes.carriers.telnyx import TelnyxCall
from fakes.carriers.telnyx_calls import CallRunner, CallScript, Delivery, FakeCall
from fakes.carriers.telnyx_webhooks import CallIds, WebhookSigner
from fakes.lifecycle import Served

__all__ = ["ApiCall", "CallScript", "FakeTelnyxApi"]

_CODECS = ("PCMU", "PCMA")
_TRACKS = ("inbound_track", "outbound_track", "both_tracks")
_AMD = ("disabled", "detect", "detect_beep", "detect_words", "greeting_end", "premium")


@dataclass(frozen=True, slots=True)
class ApiCall:
    """A request the API received (its Authorization header left out) and its answer."""

    method: str
    path: str
    body: dict[str, Any] | None
    status: int


class _Refused(Exception):
    def __init__(self, status: int, code: str, title: str, detail: str = "") -> None:
        super().__init__(title)
        self.status, self.code, self.title, self.detail = status, code, title, detail


class FakeTelnyxApi(Served):
    """``async with FakeTelnyxApi(api_key="KEY") as api:`` on a loopback port (``base_url``).
    ``webhook_url``: the Call Control App's, where incoming calls' webhooks go (a dial names its
    own)."""

    def __init__(
        self,
        *,
        api_key: str,
        connection_id: str = "1684641123236054244",
        webhook_url: str | None = None,
        signer: WebhookSigner | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.api_key = api_key
        self.connection_id = connection_id
        self.webhook_url = webhook_url
        self.signer = signer or WebhookSigner()
        self.calls: dict[str, FakeCall] = {}
        self.requests: list[ApiCall] = []
        self._scripts: deque[CallScript] = deque()
        self._host, self._port = host, port
        self._runner: web.AppRunner | None = None
        self._http: aiohttp.ClientSession | None = None
        self._calls: CallRunner | None = None

    @property
    def base_url(self) -> str:
        """The API base (``TELNYX_API_BASE``): paths start with ``/v2``."""
        return f"http://{self._host}:{self._port}"

    @property
    def public_key(self) -> str:
        return self.signer.public_key

    @property
    def deliveries(self) -> list[Delivery]:
        return self._running.deliveries

    async def start(self) -> None:
        self._http = aiohttp.ClientSession()
        self._calls = CallRunner(self._http, self.signer)
        app = web.Application()
        app.router.add_post("/v2/calls", self._dial)
        app.router.add_post("/v2/calls/{call_control_id}/actions/{action}", self._action)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        await web.TCPSite(runner, self._host, self._port).start()
        self._runner = runner
        self._port = int(runner.addresses[0][1])

    async def stop(self) -> None:
        if self._calls is not None:
            await self._calls.close()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()
        if self._http is not None:
            await self._http.close()

    # -- driving calls from a test ---------------------------------------------------------------

    def script(self, script: CallScript) -> None:
        """How the next dialled call goes (in order; by default answered by a human)."""
        self._scripts.append(script)

    async def ring(
        self,
        *,
        from_: str = "+13125550100",
        to: str = "+13125550199",
        webhook_url: str | None = None,
        script: CallScript | None = None,
    ) -> FakeCall:
        """An incoming call: ``call.initiated`` to the app's webhook URL, then it waits for the
        answer command."""
        url = webhook_url or self.webhook_url
        if url is None:
            raise ValueError("no webhook URL: set FakeTelnyxApi.webhook_url or pass one")
        ids = CallIds(connection_id=self.connection_id)
        call = FakeCall(ids, "incoming", from_, to, url, script or CallScript())
        self.calls[call.call_control_id] = call
        await self._running.ring_in(call)
        return call

    async def hang_up_caller(self, call_control_id: str, cause: str = "normal_clearing") -> None:
        """The far end hangs up: the stream stops, then ``call.hangup``."""
        call = self.calls[call_control_id]
        source = "caller" if call.direction == "incoming" else "callee"
        await self._running.end(call, cause, source=source)

    async def wait_for_stream(
        self,
        call_control_id: str | None = None,
        timeout: float = 5.0,  # noqa: ASYNC109 (the public test API takes a timeout)
    ) -> TelnyxCall:
        """The media stream of a call (by default the latest), once open."""
        async with asyncio.timeout(timeout):
            async with self._running.changed:
                await self._running.changed.wait_for(lambda: bool(self.calls))
            call = self.calls[call_control_id or list(self.calls)[-1]]
            await call.streamed.wait()
        assert call.stream is not None
        return call.stream

    async def wait_for_delivery(
        self,
        event_type: str,
        timeout: float = 5.0,  # noqa: ASYNC109 (the public test API takes a timeout)
        *,
        count: int = 1,
    ) -> Delivery:
        """The ``count``-th webhook of ``event_type`` POSTed (answered or not)."""

        def found() -> list[Delivery]:
            return [d for d in self.deliveries if d.event_type == event_type]

        async with asyncio.timeout(timeout), self._running.changed:
            await self._running.changed.wait_for(lambda: len(found()) >= count)
        return found()[count - 1]

    @property
    def _running(self) -> CallRunner:
        if self._calls is None:
            raise RuntimeError("the fake Telnyx API is not started")
        return self._calls

    # -- serving ---------------------------------------------------------------------------------

    async def _dial(self, request: web.Request) -> web.Response:
        return await self._serve(request, self._dial_call)

    async def _action(self, request: web.Request) -> web.Response:
        return await self._serve(request, self._call_action)

    async def _serve(self, request: web.Request, handler: Any) -> web.Response:
        body: dict[str, Any] | None = None
        try:
            if not self._authorized(request.headers.get("Authorization", "")):
                raise _Refused(401, "10009", "Authentication failed", "invalid API key")
            try:
                parsed = orjson.loads(await request.read() or b"{}")
            except orjson.JSONDecodeError:
                raise _Refused(400, "10015", "Bad Request", "the body is not JSON") from None
            if not isinstance(parsed, dict):
                raise _Refused(422, "10015", "Invalid parameters", "the body is not an object")
            body = parsed
            data = await handler(request, body)
            status, answer = 200, {"data": data}
        except _Refused as refused:
            error = {"code": refused.code, "title": refused.title, "detail": refused.detail}
            status, answer = refused.status, {"errors": [error]}
        self.requests.append(ApiCall(request.method, request.path, body, status))
        return web.Response(
            status=status, body=orjson.dumps(answer), content_type="application/json"
        )

    def _authorized(self, header: str) -> bool:
        scheme, _, key = header.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            key.encode(), self.api_key.encode()
        )

    async def _dial_call(self, request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        for name in ("connection_id", "to", "from", "webhook_url"):
            if not isinstance(body.get(name), str) or not body[name]:
                raise _Refused(422, "10015", "Invalid parameters", f"{name} is required")
        if body["connection_id"] != self.connection_id:
            raise _Refused(422, "10015", "Invalid parameters", "unknown connection_id")
        amd = body.get("answering_machine_detection", "disabled")
        if amd not in _AMD:
            raise _Refused(422, "10015", "Invalid parameters", "answering_machine_detection")
        _check_stream(body)
        script = self._scripts.popleft() if self._scripts else CallScript()
        ids = CallIds(connection_id=self.connection_id)
        call = FakeCall(ids, "outgoing", body["from"], body["to"], body["webhook_url"], script)
        call.amd, call.client_state = amd, body.get("client_state")
        call.stream_params = _stream_fields(body)
        call.commands.append(("dial", body))
        self.calls[call.call_control_id] = call
        self._running.spawn(self._running.dial_out(call))
        return {
            "call_control_id": ids.call_control_id,
            "call_leg_id": ids.call_leg_id,
            "call_session_id": ids.call_session_id,
            "is_alive": False,
            "record_type": "call",
        }

    async def _call_action(self, request: web.Request, body: dict[str, Any]) -> dict[str, Any]:
        call = self.calls.get(request.match_info["call_control_id"])
        action = request.match_info["action"]
        if call is None:
            raise _Refused(404, "10005", "Resource not found", "no such call_control_id")
        command_id = body.get("command_id")
        if isinstance(command_id, str) and command_id in call.command_ids:
            return {"result": "ok"}  # "Telnyx will ignore any command with the same command_id"
        if call.state == "ended":
            raise _Refused(422, "90018", "Call has already ended")
        match action:
            case "answer":
                if call.direction != "incoming" or call.state != "parked":
                    raise _Refused(422, "90016", "Call is not awaiting an answer")
                _check_stream(body)
                call.stream_params = _stream_fields(body)
                call.client_state = body.get("client_state", call.client_state)
                call.state = "answered"  # call.answered and the stream follow
                self._running.spawn(self._running.answered(call))
            case "streaming_start":
                if not body.get("stream_url"):
                    raise _Refused(422, "10015", "Invalid parameters", "stream_url is required")
                _check_stream(body)
                call.stream_params = _stream_fields(body)
                call.client_state = body.get("client_state", call.client_state)
                if call.state == "answered":
                    self._running.spawn(self._running.stream(call))
            case "hangup":
                source = "callee" if call.direction == "incoming" else "caller"
                self._running.spawn(self._running.end(call, "normal_clearing", source=source))
            case _:
                raise _Refused(
                    404, "10005", "Resource not found", f"action {action} is not simulated"
                )
        if isinstance(command_id, str):
            call.command_ids.add(command_id)
        call.commands.append((action, body))
        return {"result": "ok"}


def _stream_fields(body: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in body.items() if key.startswith("stream_")}


def _check_stream(body: dict[str, Any]) -> None:
    """The streaming fields, as far as the fake can play them."""
    url = body.get("stream_url")
    if url is None:
        return
    if not isinstance(url, str) or not url.startswith(("ws://", "wss://")):
        raise _Refused(422, "10015", "Invalid parameters", "stream_url must be a WebSocket URL")
    if body.get("stream_track", "inbound_track") not in _TRACKS:
        raise _Refused(422, "10015", "Invalid parameters", "stream_track")
    if body.get("stream_bidirectional_mode", "mp3") != "rtp":
        raise _Refused(422, "10015", "Not simulated", "only stream_bidirectional_mode rtp is")
    if body.get("stream_bidirectional_codec", "PCMU") not in _CODECS:
        raise _Refused(422, "10015", "Not simulated", "stream_bidirectional_codec: PCMU or PCMA")
    if body.get("stream_codec", "default") not in (*_CODECS, "default"):
        raise _Refused(422, "10015", "Not simulated", "stream_codec: PCMU, PCMA or default")
