"""``GeminiLiveTransport``: the async shell around ``GeminiCodec`` (as ``turns.TurnsCodec``,
with the session's turn detection and tool choice), on the official SDK.

It opens each connection with ``client.aio.live.connect(model=…, config=LiveConnectConfig(...))``
(the SDK builds ``setup``, waits for ``setupComplete``, and handles the URL, key and TLS), then
works on the connection's raw frames: each server message decoded once with orjson, client
messages sent as the JSON the codec built. The SDK's ``receive()`` would parse every audio chunk
into pydantic models and stops at each ``turnComplete``.

One reader task owns every connection change:

- ``goAway``: the reader waits until no reply or tool call is in progress (or until shortly
  before the deadline), then opens a new connection with the last resumable handle and closes the
  old one; uplink audio sent meanwhile is buffered and replayed. The client notices nothing.
- an abnormal close: the same with backoff (the first attempt at once); a handle the server no
  longer knows falls back to a new session given the history as context. Attempts are counted
  until a reply completes again; then ``UpstreamFailed``.
- a mode change: Gemini's setup is fixed per connection (and voice and text use different
  models), so the session continues on a new connection with the history as context. A new
  turn detection or tool choice (also in the setup) continues on a new connection that resumes
  the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
import structlog
from google import genai
from google.genai import errors as genai_errors
from google.genai import types
from websockets.exceptions import ConnectionClosed, InvalidStatus, WebSocketException

from transports import events as ev
from transports.base import (
    Capabilities,
    Delivery,
    Mode,
    ToolChoice,
    ToolResult,
    Transport,
    TransportError,
    TurnDetection,
    UpstreamConfig,
)
from transports.codec_shell import CodecShell, backoff_delay
from transports.gemini_live import wire
from transports.gemini_live.turns import TurnsCodec

if TYPE_CHECKING:
    from google.genai.live import AsyncSession

__all__ = ["GeminiLiveTransport", "GeminiOptions", "warm_up"]

_log = structlog.get_logger("upstream.gemini")

# Codes after which the session is reopened; 1007 (bad request) and 1008 (policy, not found)
# are the client's fault and would only fail again.
_FATAL_CLOSES = frozenset({1002, 1003, 1007, 1008, 1009, 1010})


@dataclass(frozen=True, slots=True)
class GeminiOptions:
    api_key: str
    voice_model: str
    text_model: str
    base_url: str | None = None  # https://host:port of a Gemini-compatible endpoint
    ca_file: str | None = None  # a PEM bundle to trust for base_url
    api_version: str = "v1beta"
    connect_timeout_s: float = 10.0
    reconnect_attempts: int = 5
    reconnect_initial_s: float = 0.25
    reconnect_max_s: float = 4.0
    # After goAway, reconnect once idle, but at the latest this long before the deadline.
    go_away_margin_s: float = 1.0


class GeminiLiveTransport(CodecShell[TurnsCodec]):
    capabilities = Capabilities(
        input_rate=wire.INPUT_RATE,
        output_rate=wire.OUTPUT_RATE,
        server_vad=True,
        truncation=False,  # Gemini has no truncate; its server VAD cuts the turn itself
        resumable=True,
    )

    def __init__(self, options: GeminiOptions, *, client: genai.Client | None = None) -> None:
        super().__init__()
        self.options = options
        self._client = client
        self._session: AsyncSession | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._reader: asyncio.Task[None] | None = None
        self._switch: bool | None = None  # a requested reconnect: True resumes, False does not
        self._log = _log

    # -- Transport protocol ------------------------------------------------------------------

    async def connect(self, config: UpstreamConfig) -> None:
        if self._closing or self._codec is not None:
            raise TransportError("this Gemini Live transport was already used")
        if config.mode == "text" and "native-audio" in self.options.text_model:
            raise TransportError(
                f"GATEWAY_GEMINI_TEXT_MODEL={self.options.text_model} is a native-audio model, "
                "which cannot answer in TEXT; set a model that can (e.g. "
                "gemini-live-2.5-flash-preview)"
            )
        self._log = _log.bind(session_id=config.session_id)
        self._codec = TurnsCodec(config)
        if self._client is None:
            try:
                self._client = _shared_client(
                    self.options.api_key,
                    self.options.base_url,
                    self.options.ca_file,
                    self.options.api_version,
                )
            except (ValueError, OSError, ssl.SSLError) as exc:
                raise TransportError(f"Gemini client: {exc}") from None
        await self._open(resume=False)
        self._reader = asyncio.create_task(self._read())

    async def truncate(self, response_id: str, played_ms: int) -> None:
        return None  # capabilities.truncation is False

    async def send_scheduled_result(self, result: ToolResult, delivery: Delivery) -> None:
        """``ScheduledResults``: a background call's result, scheduled by Gemini itself."""
        await self._do(lambda c: c.scheduled_result(result, delivery))

    async def update(
        self,
        *,
        mode: Mode | None = None,
        instructions: str | None = None,
        turn_detection: TurnDetection | None = None,
        tool_choice: ToolChoice | None = None,
    ) -> None:
        codec = self._codec
        if codec is None or self._closing:
            return
        changed_mode = mode is not None and mode != codec.mode
        if mode is not None:
            codec.mode = mode
        if instructions is not None:
            codec.instructions = instructions
        # Turn detection and tools are in the setup too: a new connection (resumed) takes them.
        changed_setup = codec.reconfigure(turn_detection, tool_choice)
        if not changed_mode and instructions is None and not changed_setup:
            return
        # A new connection with the new setup (the same model may resume the session). Only the
        # reader changes connections: this stops sending here (inputs are kept for the next
        # connection) and closes the socket; the reader ends it and reconnects.
        # A pending mode switch (a new session) is not downgraded by a later instructions-only
        # change (which alone could resume).
        self._switch = (self._switch is None or self._switch) and not changed_mode
        codec.connected = False
        if self._session is not None:
            with contextlib.suppress(Exception):
                await self._session._ws.close()

    async def close(self) -> None:
        if self._closing:
            return
        self._closing = True
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        await self._drop_connection()
        self._queue.put_nowait(None)

    # -- connecting --------------------------------------------------------------------------

    def _model(self) -> str:
        assert self._codec is not None
        if self._codec.config.model:
            return self._codec.config.model
        return self.options.voice_model if self._codec.mode == "voice" else self.options.text_model

    async def _open(self, *, resume: bool) -> None:
        """A new connection, set up, with what the codec kept for it; or TransportError."""
        codec = self._codec
        assert codec is not None
        assert self._client is not None
        resume = resume and codec.handle is not None
        if not resume:
            codec.handle = None  # a new session: an older session's handle must not be used
        try:
            await self._connect(resume=resume)
        except TransportError as exc:
            if not (resume and exc.code == 1008):
                raise
            # The handle is unknown or expired: a new session, given the history as context.
            self._log.info("upstream_handle_refused", error=str(exc))
            codec.handle = None
            resume = False
            await self._connect(resume=False)
        codec.outbox.extend(codec.resume(resumed=resume))
        await self._flush()
        self._log.info("upstream_connected", resumed=resume, model=self._model())

    async def _connect(self, *, resume: bool) -> None:
        codec = self._codec
        assert codec is not None
        assert self._client is not None
        stack = contextlib.AsyncExitStack()
        try:
            async with asyncio.timeout(self.options.connect_timeout_s):
                session = await stack.enter_async_context(
                    self._client.aio.live.connect(
                        model=self._model(), config=codec.live_config(resume=resume)
                    )
                )
            if session.setup_complete is None:
                raise TransportError(
                    "Gemini Live did not answer setup with setupComplete", retryable=True
                )
            if self._closing:  # close() came while connecting: this socket must not stay open
                raise TransportError("the transport was closed while connecting")
            if not hasattr(session, "_ws"):
                raise TransportError("this google-genai version hides the Live connection")
        except BaseException as exc:
            with contextlib.suppress(Exception):
                await stack.aclose()
            error = self._connect_error(exc)
            if error is None:
                raise
            raise error from None
        await self._drop_connection()
        self._stack, self._session = stack, session

    def _connect_error(self, exc: BaseException) -> TransportError | None:
        if isinstance(exc, TransportError):
            return exc
        if isinstance(exc, TimeoutError):
            return TransportError(
                f"Gemini Live sent no setupComplete within {self.options.connect_timeout_s:g} s",
                retryable=True,
            )
        if isinstance(exc, genai_errors.APIError):
            code = exc.code if isinstance(exc.code, int) else 1011
            return TransportError(
                f"Gemini Live refused the session ({code}): {exc.message or exc.status or ''}",
                retryable=code not in _FATAL_CLOSES,
                code=code,
            )
        if isinstance(exc, InvalidStatus):
            status = exc.response.status_code
            return TransportError(
                f"Gemini Live refused the connection: HTTP {status}",
                retryable=status >= 500 or status == 429,
            )
        if isinstance(exc, OSError | WebSocketException):
            return TransportError(f"cannot reach Gemini Live: {exc}", retryable=True)
        if isinstance(exc, Exception):
            return TransportError(f"Gemini Live connection failed: {exc!r}")
        return None

    async def _drop_connection(self) -> None:
        stack, self._stack, self._session = self._stack, None, None
        if stack is not None:
            with contextlib.suppress(Exception):
                async with asyncio.timeout(2):
                    await stack.aclose()

    # -- reading -----------------------------------------------------------------------------

    async def _read(self) -> None:
        try:
            while not self._closing:
                outcome = await self._pump()
                if self._closing:
                    break
                if not await self._reconnect(outcome):
                    break
        except Exception as exc:
            self._log.exception("upstream_reader_failed")
            self._queue.put_nowait(ev.UpstreamFailed(f"Gemini Live reader failed: {exc!r}"))
        finally:
            self._queue.put_nowait(None)

    async def _pump(self) -> str | int:
        """Relay one connection until it closes (its close code) or must be left ("go_away",
        "switch")."""
        codec, session = self._codec, self._session
        assert codec is not None
        assert session is not None
        ws = session._ws
        put = self._queue.put_nowait
        loop = asyncio.get_running_loop()
        deadline: float | None = None
        if self._switch is not None:  # an update() came while this connection was opening
            return "switch"
        try:
            while True:
                if codec.go_away_s is not None and deadline is None:
                    deadline = loop.time() + codec.go_away_s - self.options.go_away_margin_s
                if deadline is not None and (codec.idle or loop.time() >= deadline):
                    return "go_away"
                if deadline is None:
                    data = await ws.recv(decode=False)
                else:
                    try:
                        async with asyncio.timeout(max(0.0, deadline - loop.time())):
                            data = await ws.recv(decode=False)
                    except TimeoutError:
                        return "go_away"
                try:
                    message = orjson.loads(data)
                    events = codec.receive(message) if isinstance(message, dict) else []
                except Exception:  # one malformed message must not end the session
                    self._log.warning("upstream_message_unreadable", size=len(data))
                    continue
                for event in events:
                    put(event)
                if codec.outbox:
                    await self._flush()
                if codec.notes:
                    self._log_notes()
        except ConnectionClosed as exc:
            if self._switch is not None:
                return "switch"
            return exc.rcvd.code if exc.rcvd is not None else 1006

    async def _reconnect(self, outcome: str | int) -> bool:
        codec = self._codec
        assert codec is not None
        resume = True
        planned = outcome in ("switch", "go_away")
        if outcome == "switch":
            resume, self._switch = bool(self._switch), None
        elif outcome == "go_away":
            self._log.info("upstream_go_away", idle=codec.idle)
        elif outcome in _FATAL_CLOSES:
            self._queue.put_nowait(
                ev.UpstreamFailed(f"Gemini Live closed the session (code {outcome})")
            )
            return False
        else:
            self._log.info("upstream_reconnecting", code=outcome)
        for event in codec.connection_lost():
            self._queue.put_nowait(event)
        await self._drop_connection()
        # A planned change is not a failure: it does not spend the attempts of an outage.
        return await self._reconnect_with(
            lambda: self._open(resume=resume),
            provider="Gemini Live",
            reason=f"closed ({outcome})",
            progress=lambda: codec.completed_turns,
            attempts=self.options.reconnect_attempts,
            delay=lambda attempt: backoff_delay(
                attempt, self.options.reconnect_initial_s, self.options.reconnect_max_s
            ),
            planned=planned,
        )

    # -- writing -----------------------------------------------------------------------------

    def _sender(self) -> Callable[[str], Awaitable[None]] | None:
        return None if self._session is None else self._session._ws.send


def warm_up(options: GeminiOptions) -> None:
    """Build the client every session shares now rather than in a node's first Gemini session
    (it loads a CA bundle, and its live module on first use); a configuration it refuses is
    reported by that session's ``connect``, as before."""
    with contextlib.suppress(ValueError, OSError, ssl.SSLError):
        client = _shared_client(
            options.api_key, options.base_url, options.ca_file, options.api_version
        )
        _ = client.aio.live


@functools.lru_cache(maxsize=8)
def _shared_client(
    api_key: str, base_url: str | None, ca_file: str | None, api_version: str
) -> genai.Client:
    """One client per configuration, shared by every session (building one loads CA bundles)."""
    # The SDK passes the async_client_args that websockets' connect() knows on to it: no
    # permessage-deflate (it costs CPU per audio chunk and PCM barely compresses).
    client_args: dict[str, Any] = {"compression": None}
    if ca_file:
        client_args["ssl"] = ssl.create_default_context(cafile=ca_file)
    return genai.Client(
        api_key=api_key,
        http_options=types.HttpOptions(
            base_url=base_url, api_version=api_version, async_client_args=client_args
        ),
    )


if TYPE_CHECKING:  # mypy proves that the class satisfies the Transport protocol
    _conforms: Transport = GeminiLiveTransport(GeminiOptions("k", "m", "t"))
