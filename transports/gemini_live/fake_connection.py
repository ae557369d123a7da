"""One connection of the fake Gemini Live server: the async shell around ``FakeGeminiSession``.

Per connection there are:

- the handler task (``serve``), which reads frames in order (text or binary JSON) and feeds
  them to the pure session;
- one writer task, the only one that sends, so frames leave in the order the session made them;
  it also performs closes, after what was queued before. Server JSON is compact (orjson), in
  binary frames unless ``binary_frames=False``;
- one delivery task per generation, pulling ``next_step`` and waiting between steps (``pace``);
- timers: the connection lifetime (``goAway``, then close 1001) and the closes that follow a
  ``goAway``.

Every frame in both directions is logged (``log``, unless ``log_frames=False``): client
messages as sent, server messages as built. ``received`` / ``sent`` / ``wait_for`` look messages
up by key (client messages normalised to camelCase), and ``wait_for`` wakes on each new frame, so
tests wait for events instead of sleeping.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from aiohttp import WSMsgType, web

from transports.gemini_live.fake_memory import SessionStore
from transports.gemini_live.fake_options import FakeGeminiOptions
from transports.gemini_live.fake_session import FakeGeminiSession
from transports.gemini_live.fake_wire import (
    INTERNAL,
    Action,
    Begin,
    Close,
    CloseAfter,
    Halt,
    Send,
    SendRaw,
    fit_reason,
    normalise,
)

__all__ = ["MAX_SERVER_FRAME", "FakeGeminiConnection"]

_log = logging.getLogger(__name__)
_BUG_REASON = "Internal error occurred"
_CLOSE_GRACE_S = 2.0  # a peer that stopped reading can hold the writer; then the TCP goes
_HIGH_WATER = 64  # queued frames: a delivery waits above this, until the writer
_LOW_WATER = 16  # has brought the queue back down to this
MAX_SERVER_FRAME = 2**20  # the SDK's websockets client refuses bigger frames
_SUB_KEYED = ("serverContent", "realtimeInput", "clientContent", "toolCall")

_Outgoing = tuple[bytes, Any] | Close | None  # (frame, message to log); None stops the writer


def _index_keys(message: Mapping[str, Any]) -> list[str]:
    """The keys ``wait_for`` knows a message by: its top-level keys, and ``key.sub`` for the
    fields of ``serverContent`` / ``realtimeInput`` / ``clientContent`` / ``toolCall``."""
    keys = []
    for key, value in message.items():
        keys.append(key)
        if isinstance(value, dict) and key in _SUB_KEYED:
            keys.extend(f"{key}.{sub}" for sub in value)
    return keys


class FakeGeminiConnection:
    """One accepted WebSocket: the session, its frame log and the tasks that serve it."""

    def __init__(
        self, options: FakeGeminiOptions, store: SessionStore, request: web.Request, number: int
    ) -> None:
        self.options = options
        self.number = number
        self.path: str = request.path
        self.headers: Mapping[str, str] = request.headers
        self.log: list[tuple[str, dict[str, Any]]] = []
        self.close_code: int | None = None
        self.close_reason: str | None = None
        self.closed = asyncio.Event()
        self.session = FakeGeminiSession(options, store)
        self._request = request
        self._by_key: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self._changed = asyncio.Condition()
        self._waiters = 0
        self._outbox: asyncio.Queue[_Outgoing] = asyncio.Queue()
        self._drained = asyncio.Event()  # the outbox is at or below the low-water mark
        self._drained.set()
        self._closing = False  # a close is queued: nothing more is sent
        self._deliveries: dict[int, asyncio.Task[None]] = {}
        self._timers: list[asyncio.TimerHandle] = []
        self._opcode = WSMsgType.BINARY if options.binary_frames else WSMsgType.TEXT

    # Test API -------------------------------------------------------------------------------

    @property
    def setup(self) -> dict[str, Any]:
        """The normalised (camelCase) value of the ``setup`` message; ``{}`` before it."""
        return self.session.setup

    @property
    def resumed_from(self) -> str | None:
        return self.session.resumed_from

    @property
    def history(self) -> list[dict[str, Any]]:
        """The conversation turns as the fake keeps them (``role``, ``parts``)."""
        return self.session.history

    @property
    def ignored(self) -> list[str]:
        """Inputs accepted and ignored (a toolResponse for a cancelled id, video, …)."""
        return self.session.ignored

    def received(self, key: str) -> list[dict[str, Any]]:
        """Client messages (normalised to camelCase) with that top-level key, or ``key.sub``."""
        return list(self._by_key.get(("in", key), ()))

    def sent(self, key: str) -> list[dict[str, Any]]:
        """Server messages with that top-level key, or ``serverContent.<field>`` and the like."""
        return list(self._by_key.get(("out", key), ()))

    async def wait_for(
        self,
        key: str,
        count: int = 1,
        direction: str = "out",
        timeout: float = 5.0,  # noqa: ASYNC109 (the public test API takes a timeout)
    ) -> dict[str, Any]:
        """The ``count``-th logged message with that key (see ``sent``); ``TimeoutError`` if it
        does not come, ``ConnectionError`` if the connection closes without it."""
        if direction not in ("in", "out"):
            raise ValueError("direction is 'in' or 'out'")
        if not self.options.log_frames:
            raise RuntimeError("wait_for needs the frame log (log_frames=True)")
        index = (direction, key)
        async with asyncio.timeout(timeout), self._changed:
            self._waiters += 1
            try:
                while len(self._by_key.get(index, ())) < count:
                    if self.closed.is_set():
                        raise ConnectionError(
                            f"connection closed ({self.close_code}) before {direction} "
                            f"{key!r} #{count}"
                        )
                    await self._changed.wait()
            finally:
                self._waiters -= 1
        return self._by_key[index][count - 1]

    async def go_away(self, time_left_s: float = 1.0) -> None:
        """``goAway`` now, then close 1001 after ``time_left_s``."""
        self._apply(self.session.go_away(time_left_s))
        await asyncio.sleep(0)  # let the writer take it

    async def drop(self, code: int = 1011, reason: str = "Internal error occurred") -> None:
        """Abrupt server close: frames not yet sent are discarded (a close queued before
        included: this one replaces it)."""
        stop_writer = False
        while not self._outbox.empty():
            stop_writer |= self._outbox.get_nowait() is None  # serve() is finishing
        self._drained.set()
        self._apply(self.session.shut_down())
        self._closing = True
        self._outbox.put_nowait(Close(code, fit_reason(reason)))
        if stop_writer:
            self._outbox.put_nowait(None)
        try:
            async with asyncio.timeout(_CLOSE_GRACE_S):
                await self.closed.wait()
        except TimeoutError:  # the writer is stuck behind a peer that does not read
            if self.close_code is None:
                self.close_code = 1006  # no close frame could be sent
            if (transport := self._request.transport) is not None:
                transport.abort()  # close() would wait to flush what the peer never reads
            await self.closed.wait()

    # Serving --------------------------------------------------------------------------------

    async def serve(self, ws: web.WebSocketResponse) -> None:
        loop = asyncio.get_running_loop()
        writer = asyncio.create_task(self._write(ws))
        try:
            lifetime = self.options.connection_lifetime_s
            if lifetime is not None:
                lead = min(self.options.go_away_lead_s, lifetime)
                timer = loop.call_later(lifetime - lead, self._lifetime_over, lead)
                self._timers.append(timer)
            await self._read(ws)
        except Exception:
            _log.exception("fake Gemini connection %d failed", self.number)
            self._apply([*self.session.close(INTERNAL, _BUG_REASON)])
        finally:
            for timer in self._timers:
                timer.cancel()
            self._apply(self.session.shut_down())
            tasks = list(self._deliveries.values())
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._outbox.put_nowait(None)
            await writer
            if not ws.closed:
                await ws.close()
            if self.close_code is None:
                self.close_code = ws.close_code if ws.close_code is not None else 1006
            self.closed.set()
            await self._notify()

    async def _read(self, ws: web.WebSocketResponse) -> None:
        while True:
            message = await ws.receive()
            if message.type in (WSMsgType.TEXT, WSMsgType.BINARY):
                await self._on_frame(message.data)
            elif message.type is WSMsgType.CLOSE:
                if self.close_code is None:  # the client closed first
                    self.close_code = int(message.data)
                    self.close_reason = message.extra or ""
                return
            else:  # CLOSING (we closed), CLOSED or ERROR (the peer vanished, frame too big)
                if self.close_code is None:
                    self.close_code = ws.close_code if ws.close_code is not None else 1006
                return

    async def _on_frame(self, data: str | bytes) -> None:
        try:
            raw = orjson.loads(data)
        except orjson.JSONDecodeError as error:
            text = data if isinstance(data, str) else data.decode("utf-8", "replace")
            self._record("in", {"raw": text[:200]}, None)
            actions = self.session.invalid_frame(str(error).split(":", 1)[0])
        else:
            if self.options.log_frames:
                logged = raw if isinstance(raw, dict) else {"raw": raw}
                self._record("in", logged, normalise(raw) if isinstance(raw, dict) else None)
            noted = len(self.session.ignored)
            actions = self.session.handle(raw)
            for note in self.session.ignored[noted:]:
                _log.info("fake Gemini connection %d ignored %s", self.number, note)
        self._apply(actions)
        await self._notify()

    async def _write(self, ws: web.WebSocketResponse) -> None:
        while (item := await self._outbox.get()) is not None:
            if self._outbox.qsize() <= _LOW_WATER:
                self._drained.set()
            if isinstance(item, Close):
                if not ws.closed:  # else the peer closed first, and its code stands
                    self.close_code, self.close_reason = item.code, item.reason
                    await ws.close(code=item.code, message=item.reason.encode())
                return
            if ws.closed:
                continue
            frame, message = item
            if len(frame) >= MAX_SERVER_FRAME:
                _log.error("fake Gemini frame of %d bytes is over 1 MiB", len(frame))
            try:
                await ws.send_frame(frame, self._opcode)
            except ConnectionError:
                continue
            if self.options.log_frames:
                logged = message if message is not None else orjson.loads(frame)
                self._record("out", logged, logged)
                await self._notify()

    def _lifetime_over(self, time_left_s: float) -> None:
        self._apply(self.session.go_away(time_left_s))

    def _close_now(self, code: int, reason: str) -> None:
        self._apply(self.session.close(code, reason))

    async def _deliver(self, generation: int) -> None:
        """Send one generation's steps, paced by its audio; cancelled when it is halted."""
        loop = asyncio.get_running_loop()
        pace = self.options.pace
        origin, audio_s = loop.time(), 0.0
        try:
            while (step := self.session.next_step(generation)) is not None:
                self._apply(step.actions)
                if step.hang:
                    await loop.create_future()  # until the generation is halted
                if step.wait_s > 0:
                    await asyncio.sleep(step.wait_s)
                    origin, audio_s = loop.time(), 0.0
                    continue
                if self._outbox.qsize() > _HIGH_WATER:  # the peer reads slower than we make
                    self._drained.clear()
                    await self._drained.wait()
                audio_s += step.audio_s
                if pace > 0 and step.audio_s > 0:
                    # Against the generation's start, so waits do not drift.
                    await asyncio.sleep(max(0.0, origin + audio_s * pace - loop.time()))
                else:
                    await asyncio.sleep(0)  # let barge-in land between messages
        except Exception:
            _log.exception("fake Gemini generation %d failed", generation)
            self._apply(self.session.close(INTERNAL, _BUG_REASON))
        finally:
            if self._deliveries.get(generation) is asyncio.current_task():
                del self._deliveries[generation]

    def _apply(self, actions: Sequence[Action]) -> None:
        for action in actions:
            if isinstance(action, Send):
                if not self._closing:
                    self._outbox.put_nowait((orjson.dumps(action.message), action.message))
            elif isinstance(action, SendRaw):
                if not self._closing:
                    self._outbox.put_nowait((action.frame, None))
            elif isinstance(action, Close):
                if not self._closing:
                    self._closing = True
                    self._outbox.put_nowait(action)
            elif isinstance(action, CloseAfter):
                loop = asyncio.get_running_loop()
                timer = loop.call_later(action.delay_s, self._close_now, action.code, action.reason)
                self._timers.append(timer)
            elif isinstance(action, Begin):
                delivery = asyncio.create_task(self._deliver(action.generation))
                self._deliveries[action.generation] = delivery
            elif isinstance(action, Halt):
                task = self._deliveries.get(action.generation)
                if task is not None and task is not asyncio.current_task():
                    del self._deliveries[action.generation]
                    task.cancel()

    def _record(
        self, direction: str, logged: dict[str, Any], indexed: Mapping[str, Any] | None
    ) -> None:
        if not self.options.log_frames:
            return
        self.log.append((direction, logged))
        if indexed is None:
            return
        message = dict(indexed)
        for key in _index_keys(message):
            self._by_key.setdefault((direction, key), []).append(message)

    async def _notify(self) -> None:
        if self._waiters:
            async with self._changed:
                self._changed.notify_all()
