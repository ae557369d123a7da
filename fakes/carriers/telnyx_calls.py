"""The calls of the fake Telnyx Call Control API (``fakes.carriers.telnyx_api``): what happens
to a call once it rings, as Telnyx tells the application: signed webhooks POSTed to the call's
``webhook_url`` and, once answered with a ``stream_url``, the media stream
(``fakes.carriers.telnyx.TelnyxCall``).

An incoming call: ``call.initiated`` (``direction`` ``incoming``, ``state`` ``parked``); the
application answers (the answer command), then ``call.answered`` and the stream. A dialled call:
``call.initiated`` (``outgoing``), ``ring_s`` of ringing, then by its ``CallScript``:
``call.answered`` (and the stream, and with answering machine detection asked for,
``call.machine.detection.ended`` with ``human`` or ``machine``; premium detection:
``call.machine.premium.detection.ended`` with ``human_residence`` or ``machine``), or
``call.hangup`` with the cause of a busy line (``user_busy``), no answer (``timeout``, as when
``timeout_secs`` runs out) or a failure (``unspecified``). The stream's opening and closing
are told too (``streaming.started``, ``streaming.stopped``, ``streaming.failed``).

Guessed: the SIP causes beside those hang-up causes, the payload fields of the ``streaming.*``
events beyond the call's ids, and the ``hangup_source`` of a hang-up by the application.

Sources:
- https://developers.telnyx.com/api-reference/call-commands/dial (expected webhooks)
- https://developers.telnyx.com/api-reference/call-commands/answer-call
- https://developers.telnyx.com/api-reference/callbacks/call-hangup (causes, sources)
- https://developers.telnyx.com/docs/voice/programmable-voice/receiving-webhooks
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp

from fakes.carriers.telnyx import Codec, TelnyxCall
from fakes.carriers.telnyx_media import StreamOptions
from fakes.carriers.telnyx_webhooks import CallIds, WebhookSigner, event_body

__all__ = ["CallRunner", "CallScript", "Delivery", "FakeCall", "Outcome"]

Outcome = Literal["answered", "busy", "no_answer", "failed"]
_HANGUPS: dict[str, tuple[str, str]] = {  # outcome: (hangup_cause, sip_hangup_cause)
    "busy": ("user_busy", "486"),
    "no_answer": ("timeout", "487"),
    "failed": ("unspecified", "503"),
}


@dataclass(frozen=True, slots=True)
class CallScript:
    """How a simulated call goes. ``outcome`` and ``ring_s`` are for dialled calls (an incoming
    call is answered by the application); ``machine``: answering machine detection finds a
    machine; ``wrong_signature``: this call's webhooks are signed with a key the gateway does
    not know; ``call_codec``: the call's own codec (the stream's, unless ``stream_codec`` says);
    ``stream``: how its media stream behaves."""

    outcome: Outcome = "answered"
    ring_s: float = 0.05
    machine: bool = False
    amd_after_s: float = 0.05
    wrong_signature: bool = False
    call_codec: Codec = "PCMU"
    stream: StreamOptions = field(default_factory=StreamOptions)


@dataclass(frozen=True, slots=True)
class Delivery:
    """A webhook POSTed: ``status`` the gateway's answer (None: no answer, connection failed)."""

    event_type: str
    call_control_id: str
    status: int | None
    at: float


@dataclass(eq=False)
class FakeCall:
    """One call leg and what was done to it."""

    ids: CallIds
    direction: Literal["incoming", "outgoing"]
    from_: str
    to: str
    webhook_url: str
    script: CallScript
    state: Literal["parked", "ringing", "answered", "ended"] = "ringing"
    client_state: str | None = None
    stream_params: dict[str, Any] = field(default_factory=dict)
    amd: str = "disabled"
    commands: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    command_ids: set[str] = field(default_factory=set)
    stream: TelnyxCall | None = None
    stream_error: str | None = None
    hangup_cause: str | None = None
    streamed: asyncio.Event = field(default_factory=asyncio.Event)
    ended: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def call_control_id(self) -> str:
        return self.ids.call_control_id

    def payload(self, **fields: Any) -> dict[str, Any]:
        return self.ids.payload(
            from_=self.from_, to=self.to, client_state=self.client_state, **fields
        )


class CallRunner:
    """Runs calls: posts their webhooks (signed by ``signer``) and opens their streams."""

    def __init__(self, http: aiohttp.ClientSession, signer: WebhookSigner) -> None:
        self.http = http
        self.signer = signer
        self.deliveries: list[Delivery] = []
        self.changed = asyncio.Condition()
        self._tasks: set[asyncio.Task[None]] = set()
        self._foreign = WebhookSigner()  # the wrong key, for wrong_signature

    def spawn(self, work: Any) -> None:
        task: asyncio.Task[None] = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def post(self, call: FakeCall, event_type: str, **fields: Any) -> None:
        body = event_body(event_type, call.payload(**fields), delivered_to=call.webhook_url)
        signer = self._foreign if call.script.wrong_signature else self.signer
        status: int | None = None
        try:
            headers = signer.headers(body, int(time.time()))
            async with self.http.post(call.webhook_url, data=body, headers=headers) as response:
                status = response.status
        except (aiohttp.ClientError, OSError):
            status = None
        self.deliveries.append(Delivery(event_type, call.call_control_id, status, time.monotonic()))
        await self.notify()

    async def notify(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    # -- the flows --------------------------------------------------------------------------------

    async def ring_in(self, call: FakeCall) -> None:
        """An incoming call reaches the application; it stays parked until answered."""
        call.state = "parked"
        await self.post(call, "call.initiated", direction="incoming", state="parked")

    async def answered(self, call: FakeCall) -> None:
        """After the answer command: ``call.answered``, then the stream if one was asked."""
        await self.post(call, "call.answered", state="answered")
        if call.stream_params.get("stream_url"):
            await self.stream(call)

    async def dial_out(self, call: FakeCall) -> None:
        await self.post(call, "call.initiated", direction="outgoing", state="bridging")
        await asyncio.sleep(call.script.ring_s)
        if call.ended.is_set():  # hung up while ringing
            return
        if call.script.outcome != "answered":
            cause, sip = _HANGUPS[call.script.outcome]
            await self.end(call, cause, source="callee", sip_hangup_cause=sip)
            return
        call.state = "answered"
        await self.post(call, "call.answered", state="answered")
        if call.stream_params.get("stream_url"):
            self.spawn(self.stream(call))
        if call.amd != "disabled":
            await asyncio.sleep(call.script.amd_after_s)
            if not call.ended.is_set():
                await self._machine_detection(call)

    async def _machine_detection(self, call: FakeCall) -> None:
        if call.amd == "premium":
            result = "machine" if call.script.machine else "human_residence"
            await self.post(call, "call.machine.premium.detection.ended", result=result)
        else:
            result = "machine" if call.script.machine else "human"
            await self.post(call, "call.machine.detection.ended", result=result)

    async def end(self, call: FakeCall, cause: str, *, source: str, **fields: Any) -> None:
        """The call is over: its stream stops (``stop``), then ``call.hangup``."""
        if call.state == "ended":
            return
        call.state = "ended"
        call.hangup_cause = cause
        call.ended.set()
        if call.stream is not None:
            with contextlib.suppress(Exception):
                await call.stream.hang_up()
        await self.post(call, "call.hangup", hangup_cause=cause, hangup_source=source, **fields)

    async def stream(self, call: FakeCall) -> None:
        """The call's media stream, open until the call ends or the gateway closes it."""
        params = call.stream_params
        codec = params.get("stream_codec")
        if codec not in ("PCMU", "PCMA"):
            codec = call.script.call_codec  # "default", or not given: the call's codec
        play = params.get("stream_bidirectional_codec", "PCMU")
        try:
            async with TelnyxCall.open(
                params["stream_url"],
                call_control_id=call.call_control_id,
                client_state=call.client_state,
                codec=codec,
                play_codec=play,
                options=call.script.stream,
                from_=call.from_,
                to=call.to,
                stream_auth_token=params.get("stream_auth_token"),
                session=self.http,
            ) as stream:
                call.stream = stream
                call.streamed.set()
                await self.notify()
                await self.post(call, "streaming.started", stream_url=params["stream_url"])
                ended = asyncio.ensure_future(call.ended.wait())
                closed = asyncio.ensure_future(stream.closed.wait())
                await asyncio.wait({ended, closed}, return_when=asyncio.FIRST_COMPLETED)
                ended.cancel()
                closed.cancel()
        except (aiohttp.ClientError, OSError) as exc:
            call.stream_error = f"{type(exc).__name__}: {exc}"
            await self.post(call, "streaming.failed", failure_reason=call.stream_error)
            return
        await self.post(call, "streaming.stopped", stream_url=params["stream_url"])
