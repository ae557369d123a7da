"""Twilio's REST Calls API, and the calls it places, over aiohttp on a loopback port: what the
gateway's outbound calls and hang-ups talk to in tests.

Routes (HTTP Basic auth ``AccountSid:AuthToken`` on each, else 401 with error 20003)::

    POST /2010-04-01/Accounts/{AccountSid}/Calls.json             create (201, status queued)
    GET  /2010-04-01/Accounts/{AccountSid}/Calls/{CallSid}.json   fetch
    POST /2010-04-01/Accounts/{AccountSid}/Calls/{CallSid}.json   Status=completed hangs up

A created call plays out in the background by the outcome the test set for its ``To``
(``api.scenarios["+15005550006"] = "busy"``; ``answer`` when unset), after ``ring_s``:

- ``answer`` / ``machine``: the ``Url`` webhook is requested (``Method``, POST by default) with
  ``CallSid``, ``AccountSid``, ``From``, ``To``, ``CallStatus`` "in-progress", ``Direction``
  "outbound-api", ``ApiVersion`` and, with ``MachineDetection``, ``AnsweredBy``; signed with
  ``X-Twilio-Signature``. Its TwiML is followed: ``<Say>`` plays for ``say_s`` and is recorded
  in ``said`` unless a hang-up cuts it, ``<Hangup/>`` ends the call, ``<Connect><Stream>`` opens
  the Media Stream (``fakes.carriers.twilio.TwilioStream``, ``api.calls[sid].stream``) with the
  ``<Parameter>`` values and waits for it to end. If the
  gateway ends the stream, Twilio goes on to the next verb; if the caller hangs up
  (``stream.hang_up()``) or the API does, the call ends. The end of the document ends it.
- ``busy`` / ``no-answer`` / ``failed``: the call ends so, never answered.

Status callbacks (``StatusCallback``, signed the same way): ``initiated``, ``ringing`` and
``answered`` when named in ``StatusCallbackEvent``; the end always (``completed``, ``busy``,
``no-answer``, ``failed`` or ``canceled``, with ``CallDuration`` in whole seconds, "0" for a
call never answered), with ``Timestamp``, ``CallbackSource`` and ``SequenceNumber``.

For tests: ``requests`` (every request, and whether its credentials were right), ``webhooks``
(every request the fake made, with the answer it got), ``calls``; ``wait_for_status``,
``wait_for_stream``, ``wait_for_callback``; ``incoming_call`` (an inbound call to the gateway's
voice webhook); ``webhook_headers`` (a signed webhook of one's own). Faults:
``wrong_signature=True`` (webhooks signed with another token), ``status_callbacks=False``
(never sent).

Sources:
- https://www.twilio.com/docs/voice/api/call-resource (create, fetch, update; status values;
  StatusCallbackEvent; the status callback parameters)
- https://www.twilio.com/docs/voice/answering-machine-detection (MachineDetection, AnsweredBy)
- https://www.twilio.com/docs/usage/webhooks/voice-webhooks (the webhook's parameters)
- https://www.twilio.com/docs/usage/security (X-Twilio-Signature)
- https://www.twilio.com/docs/voice/twiml/connect, https://www.twilio.com/docs/voice/twiml/stream
  (a query string in the stream URL is not supported: custom parameters instead; the fake drops
  it)
- https://support.twilio.com/hc/en-us/articles/223132267 (queued, initiated, ringing,
  in-progress, completed)

Guessed: ``CallStatus`` "initiated" in the initiated callback; ``Status=completed`` on a call
not yet answered cancels it (``canceled``); a webhook that fails (Twilio's error 11200) ends the
call; a stream handshake that fails (31920) ends the ``<Connect>`` and the call goes on to the
next verb; the path of another account than the credentials' → 404; a ``<Say>`` lasts
``say_s`` whatever its length.

    async with FakeTwilioApi(auth_token=TOKEN) as api:  # the gateway's TWILIO_* settings
        api.scenarios["+15005550006"] = "busy"
        ...  # the gateway POSTs {api.base_url}/2010-04-01/Accounts/{sid}/Calls.json
        hook = await api.wait_for_callback(call_sid, "busy")
        call = await api.incoming_call(f"{gateway_url}/twilio/voice")
        stream = await api.wait_for_stream(call.sid)
        await stream.speak(pcm16_8k)
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Literal
from urllib.parse import urlencode, urlsplit, urlunsplit

import aiohttp
from aiohttp import web

from fakes.carriers.twilio import ACCOUNT_SID, TwilioStream, new_sid
from fakes.carriers.twilio_calls import (
    ConnectStream,
    Hangup,
    LoggedRequest,
    Outcome,
    Say,
    SentWebhook,
    SimulatedCall,
    Unsupported,
    answered_by,
    basic_auth_ok,
    create_form_error,
    error_body,
    json_response,
    not_found,
    parse_twiml,
    request_form,
)
from fakes.lifecycle import Served
from gateway.edges.twilio.signature import twilio_signature

__all__ = ["AUTH_TOKEN", "FakeTwilioApi", "LoggedRequest", "SentWebhook", "webhook_headers"]

AUTH_TOKEN = "twilio-auth-token-for-tests"
_CALLS = re.compile(r"/2010-04-01/Accounts/(?P<account>[^/]+)/Calls\.json")
_CALL = re.compile(r"/2010-04-01/Accounts/(?P<account>[^/]+)/Calls/(?P<sid>[^/]+)\.json")


def webhook_headers(url: str, form: dict[str, str], *, auth_token: str) -> dict[str, str]:
    """The headers of a webhook Twilio signed: a POST of ``form`` to ``url``. Pass another
    token for a wrongly signed one."""
    return {
        "X-Twilio-Signature": twilio_signature(auth_token, url, form),
        "Content-Type": "application/x-www-form-urlencoded",
    }


class FakeTwilioApi(Served):
    """``async with FakeTwilioApi() as api:`` on a loopback port (``api.base_url``)."""

    def __init__(
        self,
        *,
        account_sid: str = ACCOUNT_SID,
        auth_token: str = AUTH_TOKEN,
        ring_s: float = 0.05,
        say_s: float = 0.2,  # how long a <Say> plays (a hang-up meanwhile cuts it)
        realtime: bool = True,  # the streams' playout: real time, or at once
        echo_marks: bool = True,  # False: the streams never echo a mark (fault)
        wrong_signature: bool = False,  # fault: webhooks signed with another token
        status_callbacks: bool = True,  # False: status callbacks never sent (fault)
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.account_sid = account_sid
        self.auth_token = auth_token
        self.ring_s = ring_s
        self.say_s = say_s
        self.realtime = realtime
        self.echo_marks = echo_marks
        self.wrong_signature = wrong_signature
        self.status_callbacks = status_callbacks
        self.scenarios: dict[str, Outcome] = {}  # by To number; "answer" when absent
        self.calls: dict[str, SimulatedCall] = {}
        self.requests: list[LoggedRequest] = []
        self.webhooks: list[SentWebhook] = []
        self._host, self._port = host, port
        self._runner: web.AppRunner | None = None
        self._http: aiohttp.ClientSession | None = None
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._sequence: dict[str, int] = {}
        self._changed = asyncio.Condition()

    @property
    def base_url(self) -> str:
        return f"http://{self._host}:{self._port}"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        await web.TCPSite(runner, self._host, self._port).start()
        self._runner = runner
        self._port = int(runner.addresses[0][1])
        self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10))

    async def stop(self) -> None:
        for call in self.calls.values():
            if call.stream is not None:
                await call.stream.close()
        for task in self._tasks.values():
            task.cancel()
        for task in self._tasks.values():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._http is not None:
            await self._http.close()
            self._http = None
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    # -- for tests ---------------------------------------------------------------------------------

    async def wait_for_status(
        self,
        sid: str,
        status: str,
        timeout: float = 5.0,  # noqa: ASYNC109 (the public test API takes a timeout)
    ) -> SimulatedCall:
        """Until call ``sid`` has been ``status`` (now or before)."""
        await self._wait(lambda: sid in self.calls and status in self.calls[sid].history, timeout)
        return self.calls[sid]

    async def wait_for_stream(
        self,
        sid: str,
        timeout: float = 5.0,  # noqa: ASYNC109 (the public test API takes a timeout)
    ) -> TwilioStream:
        """Call ``sid``'s Media Stream, once open."""
        await self._wait(lambda: sid in self.calls and self.calls[sid].stream is not None, timeout)
        stream = self.calls[sid].stream
        assert stream is not None
        return stream

    async def wait_for_callback(
        self,
        sid: str,
        call_status: str,
        timeout: float = 5.0,  # noqa: ASYNC109 (the public test API takes a timeout)
    ) -> SentWebhook:
        """The status callback of call ``sid`` with ``CallStatus`` ``call_status``, once sent."""

        def sent() -> SentWebhook | None:
            return next(
                (
                    hook
                    for hook in self.webhooks
                    if hook.kind == "status"
                    and hook.call_sid == sid
                    and hook.form["CallStatus"] == call_status
                    and (hook.status is not None or hook.error is not None)
                ),
                None,
            )

        await self._wait(lambda: sent() is not None, timeout)
        found = sent()
        assert found is not None
        return found

    async def hang_up(self, sid: str) -> None:
        """What ``Status=completed`` does: the call ends (its stream gets ``stop``)."""
        call = self.calls[sid]
        if call.finished:
            return
        call.hung_up_by_api = True
        call.hang_up_requested.set()
        if call.stream is not None:
            await call.stream.hang_up()
        elif call.answered_at is None:
            await self._finish(call, "canceled")
        task = self._tasks.get(sid)
        if task is not None:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(task), 5.0)

    async def incoming_call(
        self,
        url: str,
        *,
        from_: str = "+15005550006",
        to: str = "+15005550001",
        status_callback: str | None = None,
    ) -> SimulatedCall:
        """Someone calls the gateway's Twilio number: its voice webhook ``url`` is requested
        (``CallStatus`` "ringing", ``Direction`` "inbound") and its TwiML followed."""
        call = SimulatedCall(
            new_sid("CA"), self.account_sid, to, from_, "inbound", status_callback=status_callback
        )
        self.calls[call.sid] = call
        self._tasks[call.sid] = asyncio.create_task(self._run_inbound(call, url))
        return call

    # -- the REST API ------------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.Response:
        form = await request_form(request)
        authorized = basic_auth_ok(
            request.headers.get("Authorization", ""), self.account_sid, self.auth_token
        )
        self.requests.append(LoggedRequest(request.method, request.path, form, authorized))
        if not authorized:
            return json_response(
                error_body(20003, "Authenticate", 401),
                {"WWW-Authenticate": 'Basic realm="Twilio API"'},
            )
        if (match := _CALLS.fullmatch(request.path)) and request.method == "POST":
            if match["account"] != self.account_sid:
                return not_found(request.path)
            return self._create(form)
        match = _CALL.fullmatch(request.path)
        if match is None or match["account"] != self.account_sid or match["sid"] not in self.calls:
            return not_found(request.path)
        call = self.calls[match["sid"]]
        if request.method == "GET":
            return json_response(call.resource(), status=200)
        if request.method != "POST":
            return json_response(error_body(20004, "Method not allowed", 405))
        wanted = (form.get("Status") or [""])[-1]
        if wanted not in ("completed", "canceled"):
            message = "this fake simulates Status=completed and Status=canceled only"
            return json_response(error_body(20001, message, 400))
        if wanted == "completed" or call.answered_at is None:
            await self.hang_up(call.sid)
        return json_response(call.resource(), status=200)

    def _create(self, form: dict[str, list[str]]) -> web.Response:
        error = create_form_error(form)
        if error is not None:
            return json_response(error)
        to = (form.get("To") or [""])[-1]
        outcome = self.scenarios.get(to, "answer")
        call = SimulatedCall.from_form(new_sid("CA"), self.account_sid, form, outcome)
        self.calls[call.sid] = call
        self._tasks[call.sid] = asyncio.create_task(self._run_outbound(call))
        return json_response(call.resource(), status=201)

    # -- the calls ---------------------------------------------------------------------------------

    async def _run_outbound(self, call: SimulatedCall) -> None:
        try:
            if "initiated" in call.status_callback_events:
                await self._status_callback(call, "initiated")
            await self._set_status(call, "ringing")
            if "ringing" in call.status_callback_events:
                await self._status_callback(call, "ringing")
            await asyncio.sleep(self.ring_s)
            if call.finished:  # canceled while ringing
                return
            if call.outcome in ("busy", "no-answer", "failed"):
                await self._finish(call, call.outcome)
                return
            call.answered_by = answered_by(call.outcome, call.machine_detection)
            await self._answer(call)
            if "answered" in call.status_callback_events:
                await self._status_callback(call, "answered")
            await self._play(call)
        except Exception as exc:  # the call ends, and the test can see why
            call.errors.append(f"the fake failed: {exc!r}")
        finally:
            await self._hang_up_stream(call)
        await self._finish(call, "completed")

    async def _run_inbound(self, call: SimulatedCall, url: str) -> None:
        call.url = url
        try:
            await self._set_status(call, "ringing")
            await self._play(call, answer_after_webhook=True)
        except Exception as exc:  # the call ends, and the test can see why
            call.errors.append(f"the fake failed: {exc!r}")
        finally:
            await self._hang_up_stream(call)
        await self._finish(call, "completed")

    async def _answer(self, call: SimulatedCall) -> None:
        call.answered_at = time.monotonic()
        call.started = datetime.now(UTC)
        await self._set_status(call, "in-progress")

    async def _play(self, call: SimulatedCall, *, answer_after_webhook: bool = False) -> None:
        """Fetch the TwiML (or take the inline one) and follow it until the call ends."""
        document = call.twiml or await self._fetch_twiml(call)
        if document is None or call.finished or call.hung_up_by_api:
            return
        if answer_after_webhook and call.answered_at is None:
            await self._answer(call)
        call.documents.append(document)
        try:
            verbs = parse_twiml(document)
        except ValueError as exc:
            call.errors.append(f"12100 document parse failure: {exc}")
            return
        for verb in verbs:
            if call.hung_up_by_api:
                return
            match verb:
                case Say(text):
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(call.hang_up_requested.wait(), self.say_s)
                        return  # cut short: not heard to the end
                    call.said.append(text)
                case Hangup():
                    return
                case Unsupported(tag):
                    call.errors.append(f"this fake does not play <{tag}>")
                case ConnectStream():
                    if await self._stream(call, verb) == "twilio":
                        return  # the caller (or the API) hung up: the call is over
            await self._notify()

    async def _stream(self, call: SimulatedCall, verb: ConnectStream) -> str | None:
        """Open the Media Stream, wait until it ends; who ended it."""
        url = urlunsplit(urlsplit(verb.url)._replace(query="", fragment=""))
        call.stream_url, call.stream_parameters = url, dict(verb.parameters)
        try:
            stream = await TwilioStream.connect(
                url,
                call_sid=call.sid,
                account_sid=call.account_sid,
                custom_parameters=verb.parameters,
                realtime=self.realtime,
                echo_marks=self.echo_marks,
            )
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            call.errors.append(f"31920 stream handshake failed: {type(exc).__name__}")
            return None
        call.stream = stream
        await self._notify()
        await stream.closed.wait()
        await stream.close()
        return stream.closed_by

    async def _fetch_twiml(self, call: SimulatedCall) -> str | None:
        assert call.url is not None
        hook = await self._request(call, "voice", call.url, call.method, call.webhook_form())
        if hook.status is None or not 200 <= hook.status < 300:
            call.errors.append(f"11200 the webhook answered {hook.status or hook.error}")
            return None
        return hook.body

    async def _status_callback(self, call: SimulatedCall, event: str | None = None) -> None:
        if call.status_callback is None or not self.status_callbacks:
            return
        sequence = self._sequence.get(call.sid, 0)
        self._sequence[call.sid] = sequence + 1
        form = call.status_form(event, sequence)
        await self._request(call, "status", call.status_callback, call.status_callback_method, form)

    async def _request(
        self,
        call: SimulatedCall,
        kind: Literal["voice", "status"],
        url: str,
        method: str,
        form: dict[str, str],
    ) -> SentWebhook:
        """One signed webhook, as Twilio signs it: a GET carries the form in its query."""
        signed_url, params = url, form
        if method == "GET":
            signed_url = f"{url}{'&' if urlsplit(url).query else '?'}{urlencode(form)}"
            params = {}
        token = self.auth_token + ("-wrong" if self.wrong_signature else "")
        signature = twilio_signature(token, signed_url, params)
        hook = SentWebhook(kind, call.sid, url, method, form, signature)
        self.webhooks.append(hook)
        headers = {"X-Twilio-Signature": signature, "User-Agent": "TwilioProxy/1.1"}
        assert self._http is not None, "the fake is not started"
        try:
            async with self._http.request(
                method, signed_url, data=params or None, headers=headers
            ) as response:
                hook.status, hook.body = response.status, await response.text()
        except (aiohttp.ClientError, TimeoutError, OSError) as exc:
            hook.error = type(exc).__name__
        await self._notify()
        return hook

    async def _hang_up_stream(self, call: SimulatedCall) -> None:
        if call.stream is not None:
            await call.stream.close()

    async def _set_status(self, call: SimulatedCall, status: str) -> None:
        call.status = status
        call.history.append(status)
        await self._notify()

    async def _finish(self, call: SimulatedCall, status: str) -> None:
        if call.finished:
            return
        call.ended_at = time.monotonic()
        call.ended = datetime.now(UTC)
        await self._set_status(call, status)
        await self._status_callback(call)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    async def _wait(self, ready: Callable[[], bool], timeout: float) -> None:  # noqa: ASYNC109
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(ready), timeout)
