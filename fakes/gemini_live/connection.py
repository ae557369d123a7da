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

The stall faults (``fakes.faults``) filter the session's actions on their way out (``stalls``).

Every frame in both directions is logged (``log``, unless ``log_frames=False``): client
messages as sent, server messages as built. ``received`` / ``sent`` / ``wait_for`` look messages
up by key (client messages normalised to camelCase), and ``wait_for`` wakes on each new frame, so
tests wait for events instead of sleeping. ``setup`` (the declarations' ``behavior`` included),
``history`` (every ``functionResponse`` as sent, ``scheduling`` and ``willContinue`` included),
``ignored`` and ``open_calls`` show what the fake made of them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from aiohttp import WSMessage, WSMsgType, web

from fakes.faults import UpstreamFaults
from fakes.gemini_live.memory import SessionStore
from fakes.gemini_live.options import FakeGeminiOptions
from fakes.gemini_live.session import FakeGeminiSession
from fakes.gemini_live.stalls import TurnStalls
from fakes.gemini_live.wire import (
    INTERNAL,
    Action,
    Begin,
    Close,
    CloseAfter,
    Halt,
    Send,
    SendRaw,
    Step,
    fit_reason,
    normalise,
)
from fakes.shell import ConnectionShell

__all__ = ["MAX_SERVER_FRAME", "FakeGeminiConnection"]

_log = logging.getLogger(__name__)
_BUG_REASON = "Internal error occurred"
MAX_SERVER_FRAME = 2**20  # the SDK's websockets client refuses bigger frames
_SUB_KEYED = ("serverContent", "realtimeInput", "clientContent", "toolCall")
_HANG = Step(hang=True)  # a held-back turn's generation waits here until it is halted

_Frame = tuple[bytes, Any]  # (frame, message to log)


def _index_keys(message: Mapping[str, Any]) -> list[str]:
    """The keys ``wait_for`` knows a message by: its top-level keys, and ``key.sub`` for the
    fields of ``serverContent`` / ``realtimeInput`` / ``clientContent`` / ``toolCall``."""
    keys = []
    for key, value in message.items():
        keys.append(key)
        if isinstance(value, dict) and key in _SUB_KEYED:
            keys.extend(f"{key}.{sub}" for sub in value)
    return keys


class FakeGeminiConnection(ConnectionShell[FakeGeminiOptions, int, _Frame]):
    """One accepted WebSocket: the session, its frame log and the tasks that serve it."""

    def __init__(
        self,
        options: FakeGeminiOptions,
        store: SessionStore,
        request: web.Request,
        number: int,
        faults: UpstreamFaults | None = None,
    ) -> None:
        super().__init__(options, request, number)
        self._stalls = TurnStalls(faults or UpstreamFaults())  # the stall faults
        self.path: str = request.path
        self.close_reason: str | None = None
        self.session = FakeGeminiSession(options, store)
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

    @property
    def open_calls(self) -> list[str]:
        """Ids of the NON_BLOCKING calls still open (no final response yet), in call order."""
        return list(self.session.open_calls)

    def received(self, key: str) -> list[dict[str, Any]]:
        """Client messages (normalised to camelCase) with that top-level key, or ``key.sub``."""
        return list(self._index.get(("in", key), ()))

    def sent(self, key: str) -> list[dict[str, Any]]:
        """Server messages with that top-level key, or ``serverContent.<field>`` and the like."""
        return list(self._index.get(("out", key), ()))

    async def wait_for(
        self,
        key: str,
        count: int = 1,
        direction: str = "out",
        timeout: float = 5.0,  # noqa: ASYNC109 (the public test API takes a timeout)
    ) -> dict[str, Any]:
        """The ``count``-th logged message with that key (see ``sent``); ``TimeoutError`` if it
        does not come, ``ConnectionError`` if the connection closes without it."""
        return await self._wait_logged(direction, key, count, timeout)

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
        await self._await_closed()

    # Serving --------------------------------------------------------------------------------

    async def serve(self, ws: web.WebSocketResponse) -> None:
        await self._serve(ws, self._start)

    def _start(self) -> None:
        lifetime = self.options.connection_lifetime_s
        if lifetime is not None:
            lead = min(self.options.go_away_lead_s, lifetime)
            loop = asyncio.get_running_loop()
            timer = loop.call_later(lifetime - lead, self._lifetime_over, lead)
            self._timers.append(timer)

    def _failed(self) -> None:
        _log.exception("fake Gemini connection %d failed", self.number)
        self._apply([*self.session.close(INTERNAL, _BUG_REASON)])

    def _shut_down(self) -> None:
        self._apply(self.session.shut_down())

    def _peer_closed(self, message: WSMessage) -> None:
        self.close_code = int(message.data)
        self.close_reason = message.extra or ""

    def _lost_code(self, ws: web.WebSocketResponse) -> int:
        # the peer vanished, or sent a frame too big
        return ws.close_code if ws.close_code is not None else 1006

    async def _on_frame(self, data: str | bytes) -> None:
        try:
            raw = orjson.loads(data)
        except orjson.JSONDecodeError as error:
            text = data if isinstance(data, str) else data.decode("utf-8", "replace")
            self._record("in", {"raw": text[:200]}, None)
            actions = self.session.invalid_frame(str(error).split(":", 1)[0])
        else:
            if self._sees_frames:
                logged = raw if isinstance(raw, dict) else {"raw": raw}
                self._record("in", logged, normalise(raw) if isinstance(raw, dict) else None)
            noted = len(self.session.ignored)
            actions = self.session.handle(raw)
            for note in self.session.ignored[noted:]:
                _log.info("fake Gemini connection %d ignored %s", self.number, note)
        self._apply(actions)
        await self._notify()

    async def _close_socket(self, ws: web.WebSocketResponse, close: Close) -> None:
        if not ws.closed:  # else the peer closed first, and its code stands
            self.close_code, self.close_reason = close.code, close.reason
            await ws.close(code=close.code, message=close.reason.encode())

    async def _send(self, ws: web.WebSocketResponse, item: _Frame) -> None:
        frame, message = item
        if len(frame) >= MAX_SERVER_FRAME:
            _log.error("fake Gemini frame of %d bytes is over 1 MiB", len(frame))
        try:
            await ws.send_frame(frame, self._opcode)
        except ConnectionError:
            return
        if self._sees_frames:
            logged = message if message is not None else orjson.loads(frame)
            self._record("out", logged, logged)
            await self._notify()

    def _lifetime_over(self, time_left_s: float) -> None:
        self._apply(self.session.go_away(time_left_s))

    def _close_now(self, code: int, reason: str) -> None:
        self._apply(self.session.close(code, reason))

    def _next_step(self, key: int) -> Step | None:
        if self._stalls.hung(key):
            return _HANG
        return self.session.next_step(key)

    def _delivery_failed(self, key: int) -> None:
        _log.exception("fake Gemini generation %d failed", key)
        self._apply(self.session.close(INTERNAL, _BUG_REASON))

    def _apply(self, actions: Sequence[Action]) -> None:
        for action in self._stalls.filter(actions):
            if isinstance(action, Send):
                if not self._closing:  # serialised only when it is to be sent
                    self._queue((orjson.dumps(action.message), action.message))
            elif isinstance(action, SendRaw):
                self._queue((action.frame, None))
            elif isinstance(action, Close):
                self._queue(action)
            elif isinstance(action, CloseAfter):
                loop = asyncio.get_running_loop()
                timer = loop.call_later(action.delay_s, self._close_now, action.code, action.reason)
                self._timers.append(timer)
            elif isinstance(action, Begin):
                self._begin(action.generation)
            elif isinstance(action, Halt):
                self._halt(action.generation)

    def _record(
        self, direction: str, logged: dict[str, Any], indexed: Mapping[str, Any] | None
    ) -> None:
        message = {} if indexed is None else dict(indexed)
        self._log_frame(direction, logged, _index_keys(message), message)
