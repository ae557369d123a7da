"""``OpenAIRealtimeTransport``: the async shell around ``RealtimeCodec``.

The official SDK client names the endpoint and the credentials; the socket is the gateway's own
(``upstream_socket``), or the SDK's ``realtime.connect`` when a client is passed in or a proxy
is configured. Either way the shell works on raw frames: each server event decoded once with
orjson, and frames the codec built sent as they are (the SDK's pydantic parsing is too costly for
the audio path). The SDK's own reconnection stays off: it lands in a fresh server session with
default settings. Instead, when the socket closes (the 60-minute cap, a drop, a server fault)
this shell reconnects with backoff, sends ``session.update`` again and lets the codec replay the
conversation and the uplink audio it buffered; the session sees one ``UpstreamRecovered``, or
``UpstreamFailed`` after the last attempt.

The hot path runs without a task switch per frame (``transports.base.DirectAudio``):

- each server event is handled as the socket parses it (``_on_message``); an audio delta goes to
  the ``audio_sink`` the session set, synchronously, when no other event is queued before it;
- the session hands user audio over with ``send_audio_now`` while ``accepts_audio_now``, and
  the codec's frames are written at once (``_flush_now``) unless the socket is full: then they
  wait for an async flush, and ``accepts_audio_now`` says no until the socket has drained.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import orjson
import structlog
from openai import AsyncOpenAI, OpenAIError

from transports import events as ev
from transports.base import (
    Capabilities,
    Mode,
    ToolChoice,
    Transport,
    TransportError,
    TurnDetection,
    UpstreamConfig,
    WarmUpstream,
)
from transports.codec_shell import CodecShell
from transports.codec_shell import backoff_delay as shell_backoff
from transports.openai_realtime import wire
from transports.openai_realtime.codec import RealtimeCodec
from transports.openai_realtime.upstream_socket import (
    RealtimeSocket,
    SdkSocket,
    endpoint,
    frame_sender,
    open_socket,
)
from transports.openai_realtime.warm import WarmRealtime, connect_error, expect, open_warm

__all__ = [
    "AudioSink",
    "OpenAIRealtimeTransport",
    "RealtimeOptions",
    "backoff_delay",
    "frame_sender",
    "warm_up",
]

_log = structlog.get_logger("upstream.openai")

# Close codes after which a new session is worth opening (the SDK's list, plus 1000: a close we
# did not ask for still leaves the user mid-conversation).
RECOVERABLE_CLOSES = frozenset({1000, 1001, 1005, 1006, 1011, 1012, 1013, 1014, 1015})
GOING_AWAY = 1001

# Takes one audio delta now; False: queue it with the other events after all.
AudioSink = Callable[[ev.AudioDelta], bool]


@dataclass(frozen=True, slots=True)
class RealtimeOptions:
    api_key: str
    model: str = wire.DEFAULT_MODEL
    # The SDK's websocket_base_url (ws://host:port/v1); else base_url (http[s]://host/v1); else
    # the SDK's default endpoint.
    ws_url: str | None = None
    base_url: str | None = None
    connect_timeout_s: float = 10.0
    reconnect_attempts: int = 5
    reconnect_initial_s: float = 0.25
    reconnect_max_s: float = 4.0
    # How long the server may take to cancel an interrupted response before we cancel it.
    cancel_grace_s: float = 0.5
    transcription_model: str = wire.DEFAULT_TRANSCRIPTION_MODEL


def backoff_delay(
    attempt: int, options: RealtimeOptions, jitter: Callable[[], float] = random.random
) -> float:
    """Seconds before reconnect ``attempt`` (1-based): the first at once, then doubling."""
    return shell_backoff(attempt, options.reconnect_initial_s, options.reconnect_max_s, jitter)


class OpenAIRealtimeTransport(CodecShell[RealtimeCodec]):
    capabilities = Capabilities(
        input_rate=wire.AUDIO_RATE,
        output_rate=wire.AUDIO_RATE,
        server_vad=True,
        truncation=True,
        resumable=True,
    )

    def __init__(self, options: RealtimeOptions, *, client: AsyncOpenAI | None = None) -> None:
        """``client``: an SDK client whose ``realtime.connect`` opens the socket; by default a
        client shared per configuration names the endpoint and the socket is aiohttp's."""
        super().__init__()
        self.options = options
        self._client: AsyncOpenAI | None = client
        self._sdk_socket = client is not None
        self._conn: RealtimeSocket | None = None
        self._audio_sink: AudioSink | None = None
        self._model = options.model
        self._reader: asyncio.Task[None] | None = None
        self._side_tasks: set[asyncio.Task[None]] = set()
        self._timers: set[asyncio.TimerHandle] = set()
        # Frames wait for this flush: the socket was full.
        self._flush_task: asyncio.Task[None] | None = None
        self._failure: Exception | None = None  # a bug in the reading path ends the session
        self._warm: WarmRealtime | None = None  # a pool's connection, for the first open
        self._log = _log

    # -- Transport protocol ------------------------------------------------------------------

    async def connect(self, config: UpstreamConfig) -> None:
        if self._closing or self._codec is not None:
            raise TransportError("this OpenAI Realtime transport was already used")
        self._model = config.model or self.options.model
        self._log = _log.bind(session_id=config.session_id, model=self._model)
        if config.client_encoding in wire.G711_ENCODINGS:
            # A phone call: the GA session takes and produces its G.711 law (µ-law or A-law)
            # itself, so its audio passes through the gateway untouched (no decoding, no
            # resampling) both ways.
            self.capabilities = replace(
                type(self).capabilities,
                input_rate=wire.G711_RATE,
                output_rate=wire.G711_RATE,
                encoding=config.client_encoding,
            )
        self._codec = RealtimeCodec(config, transcription_model=self.options.transcription_model)
        try:
            if self._client is None:
                self._client = _shared_client(
                    self.options.api_key, self.options.base_url, self.options.ws_url
                )
        except OpenAIError as exc:
            raise TransportError(f"OpenAI client: {exc}") from None
        self._conn = await self._open()
        self._reader = asyncio.create_task(self._read())

    # -- Prewarm: connections opened before their session ------------------------------------

    async def open_warm(self, model: str | None) -> WarmRealtime:
        """A connection for a later session on ``model`` (None: the configured one): open,
        its ``session.created`` received; ``TransportError`` when it cannot be opened."""
        name = model or self.options.model
        try:
            client = self._client or _shared_client(
                self.options.api_key, self.options.base_url, self.options.ws_url
            )
            async with asyncio.timeout(self.options.connect_timeout_s):
                return await open_warm(client, name)
        except BaseException as exc:
            error = connect_error(exc, "session.created", self.options.connect_timeout_s)
            if error is None:
                raise
            raise error from None

    async def connect_warm(self, config: UpstreamConfig, warm: WarmUpstream) -> None:
        """``connect``, on ``warm`` when it is one of ours for the same model and still open
        (else it is closed, and a new connection is opened)."""
        model = config.model or self.options.model
        if isinstance(warm, WarmRealtime) and warm.alive and warm.model == model:
            self._warm = warm
        else:
            await warm.close()
        try:
            await self.connect(config)
        finally:
            if self._warm is not None:  # not used (the connect failed before it)
                await self._warm.close()
                self._warm = None

    def set_audio_sink(self, sink: AudioSink | None) -> None:
        """Audio deltas go to ``sink`` at once when no event is queued before them."""
        self._audio_sink = sink

    async def truncate(self, response_id: str, played_ms: int) -> None:
        await self._do(lambda c: c.truncate(response_id, played_ms))

    async def update(
        self,
        *,
        mode: Mode | None = None,
        instructions: str | None = None,
        turn_detection: TurnDetection | None = None,
        tool_choice: ToolChoice | None = None,
    ) -> None:
        await self._do(
            lambda c: c.update(
                mode=mode,
                instructions=instructions,
                turn_detection=turn_detection,
                tool_choice=tool_choice,
            )
        )

    async def say_holding_line(self, instructions: str) -> bool:
        """``HoldingLines``: an out-of-band response while a slow tool call runs."""
        asked = False

        def ask(codec: RealtimeCodec) -> None:
            nonlocal asked
            asked = codec.holding_line(instructions)

        await self._do(ask)
        return asked

    async def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        for timer in self._timers:
            timer.cancel()
        # The reader first: it may be reconnecting, and must not open anything new.
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2):
                    await conn.close()
        for task in list(self._side_tasks):
            task.cancel()
        self._queue.put_nowait(None)

    # -- connecting --------------------------------------------------------------------------

    async def _open(self) -> RealtimeSocket:
        """A new server session, configured, with the conversation replayed; or TransportError."""
        assert self._client is not None
        assert self._codec is not None
        codec = self._codec
        conn: RealtimeSocket | None = None
        waiting_for = "session.created"
        try:
            async with asyncio.timeout(self.options.connect_timeout_s):
                warm, self._warm = self._warm, None
                if warm is not None and warm.alive:  # opened by a pool: created already
                    conn = warm.taken()
                    codec.receive(warm.created)
                else:
                    if self._sdk_socket:
                        manager = self._client.realtime.connect(model=self._model)
                        conn = SdkSocket(await manager.enter())
                    else:
                        conn = await open_socket(self._client, self._model)
                    codec.receive(await expect(conn, waiting_for))
                await conn.send(codec.session_update())
                waiting_for = "session.updated"
                codec.receive(await expect(conn, waiting_for))
                codec.outbox.extend(codec.resume())
        except BaseException as exc:
            await _close_quietly(conn)
            error = connect_error(exc, waiting_for, self.options.connect_timeout_s)
            if error is None:
                raise
            raise error from None
        self._conn = conn
        await self._flush()
        self._log.info("upstream_connected", upstream_session=codec.session_id)
        return conn

    # -- reading -----------------------------------------------------------------------------

    async def _read(self) -> None:
        try:
            while not self._closing:
                assert self._conn is not None
                code = await self._pump(self._conn)
                await _close_quietly(self._conn)  # closed by the server; free what it holds
                if self._closing or not await self._recover(code):
                    break
        except Exception as exc:  # a bug here must end the session, not hang it
            self._log.exception("upstream_reader_failed")
            self._queue.put_nowait(ev.UpstreamFailed(f"OpenAI Realtime reader failed: {exc!r}"))
        finally:
            self._queue.put_nowait(None)

    async def _pump(self, conn: RealtimeSocket) -> int:
        """Relay one connection's events until it closes; returns the close code."""
        conn.push(self._on_message)
        code = await conn.wait_closed()
        if self._failure is not None:
            raise self._failure
        return code

    def _on_message(self, data: str | bytes) -> None:
        """One server event, as the socket parsed it (the hot path: no await)."""
        codec = self._codec
        if codec is None or self._closing:
            return
        try:
            event = orjson.loads(data)
        except orjson.JSONDecodeError:
            self._log.warning("upstream_frame_unreadable", size=len(data))
            return
        if type(event) is not dict:
            return
        try:
            neutrals = codec.receive(event)
        except Exception:  # one malformed event must not end the session
            self._log.exception("upstream_event_unreadable", type=str(event.get("type")))
            return
        try:
            queue = self._queue
            for neutral in neutrals:
                if type(neutral) is ev.AudioDelta:  # no task switch when nothing waits before it
                    sink = self._audio_sink
                    if sink is None or not queue.empty() or not sink(neutral):
                        queue.put_nowait(neutral)
                    continue
                queue.put_nowait(neutral)
                if type(neutral) is ev.SpeechStarted:
                    self._guard_barge_in()
            if codec.outbox:
                self._flush_now()
            if codec.notes:
                self._log_notes()
        except Exception as exc:  # a bug here must end the session, not hang it
            self._failure = exc
            conn = self._conn
            if conn is not None:
                self._spawn(conn.close())

    async def _recover(self, code: int) -> bool:
        codec = self._codec
        assert codec is not None
        if code not in RECOVERABLE_CLOSES and not codec.expired:
            self._queue.put_nowait(
                ev.UpstreamFailed(f"OpenAI Realtime closed the session (code {code})")
            )
            return False
        reason = "session expired" if codec.expired else f"closed with code {code}"
        self._log.info("upstream_reconnecting", reason=reason)
        for neutral in codec.connection_lost():
            self._queue.put_nowait(neutral)
        # A server going away may still be listening while it shuts down: the first attempt
        # waits one initial backoff instead of landing on it (an expiry reconnects at once).
        going_away = code == GOING_AWAY and not codec.expired

        def delay(attempt: int) -> float:
            if going_away and attempt == 1:
                return self.options.reconnect_initial_s
            return backoff_delay(attempt, self.options)

        return await self._reconnect_with(
            self._open,
            provider="OpenAI Realtime",
            reason=reason,
            progress=lambda: codec.completed_responses,
            attempts=self.options.reconnect_attempts,
            delay=delay,
        )

    # -- writing -----------------------------------------------------------------------------

    def _sender(self) -> Callable[[str], Awaitable[None]] | None:
        return None if self._conn is None else self._conn.send

    def accepts_audio_now(self) -> bool:
        """``send_audio_now`` may be called: connected, and the socket is not full (while it
        is, audio takes ``send_audio``, whose await is the backpressure on the client)."""
        return self._codec is not None and not self._closing and self._flush_task is None

    def send_audio_now(self, pcm: bytes, encoded: str | None = None) -> None:
        codec = self._codec
        assert codec is not None
        codec.audio(pcm, encoded)
        if codec.outbox:
            self._flush_now()

    def _flush_now(self) -> None:
        """Write the codec's frames without waiting, all in one write (a tool's output and the
        ``response.create`` after it cost one system call); what the socket cannot take now
        waits for one async flush (frames keep their order: see ``CodecShell._flush``)."""
        codec, conn = self._codec, self._conn
        if codec is None or conn is None or self._flush_task is not None:
            return
        outbox = codec.outbox
        if not outbox or not codec.connected:
            return
        if conn.send_many_now(outbox):
            outbox.clear()
            return
        self._flush_task = asyncio.create_task(self._flush_later())
        self._side_tasks.add(self._flush_task)
        self._flush_task.add_done_callback(self._side_tasks.discard)

    async def _flush(self) -> None:
        """A session input's frames: at once if the socket takes them, else after the pending
        flush (whose waits for the socket to drain hold the input back)."""
        self._flush_now()
        task = self._flush_task
        if task is not None:
            await asyncio.shield(task)

    async def _flush_later(self) -> None:
        try:
            await super()._flush()
        finally:
            self._flush_task = None

    def _guard_barge_in(self) -> None:
        codec = self._codec
        if codec is None or codec.active_response_id is None or not codec.interrupt_response:
            return
        response_id = codec.active_response_id
        loop = asyncio.get_running_loop()

        def overdue() -> None:
            self._timers.discard(timer)
            if self._codec is not None and not self._closing:
                self._codec.cancel_overdue(response_id)
                self._spawn(self._flush())

        timer = loop.call_later(self.options.cancel_grace_s, overdue)
        self._timers.add(timer)

    def _spawn(self, work: Any) -> None:
        task: asyncio.Task[None] = asyncio.create_task(work)
        self._side_tasks.add(task)
        task.add_done_callback(self._side_tasks.discard)


def warm_up(options: RealtimeOptions) -> None:
    """Build the SDK client every session shares now rather than in the first session: that
    imports most of the SDK (about 600 modules, 50k objects) and loads the CA bundle."""
    endpoint(_shared_client(options.api_key, options.base_url, options.ws_url), options.model)


@functools.lru_cache(maxsize=8)
def _shared_client(api_key: str, base_url: str | None, ws_url: str | None) -> AsyncOpenAI:
    """One client per configuration, shared by every session: building one loads the CA bundle
    (about 20 ms), and the realtime connections only borrow its URL and headers."""
    return AsyncOpenAI(api_key=api_key, base_url=base_url, websocket_base_url=ws_url, max_retries=0)


async def _close_quietly(conn: RealtimeSocket | None) -> None:
    if conn is not None:
        with contextlib.suppress(Exception):
            await conn.close()


if TYPE_CHECKING:  # mypy proves that the class satisfies the Transport protocol
    _conforms: Transport = OpenAIRealtimeTransport(RealtimeOptions(api_key="x"))
