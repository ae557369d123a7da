"""The gateway session of one ``/v1/realtime`` socket, opened as the client connects.

``SessionOpener`` opens it at once with the session ``session.created`` shows (``opening``
says what that start is, and how a later wish reaches an open session). Before the client's
first event that needs the model:

- ``shape`` (a ``session.update``): what cannot change in place (voice, tools) opens a new
  session at once, the one before ended unused once it is open (never cut halfway: a start
  cut could leave an upstream open); then it waits for the open session and gives it the
  rest in place (modality, instructions, turn detection, tool choice), so that
  ``session.updated`` goes out with the upstream configured, as ``session.started`` does on
  ``/v1/session``. A start refused meanwhile is left for the first use.
- ``in_use`` (the first event that needs the model): the open session, made what the client
  asked. A start refused earlier is tried again, as a first start would be, unless it was
  fatal (the upstream unavailable) and the client already waited for it (at a
  ``session.update``, or at this very event) for a session that differs at most in what
  changes in place: then that refusal is the answer, without a second wait for another.

Every opening is awaited by the next one (or by ``close``), so none is left running or
unretrieved.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from gateway.edges.realtime.opening import REOPEN, reconfiguration
from gateway.protocol import SessionStart, SessionUpdate
from gateway.session.refusals import StartRefused
from gateway.session.session import Session

__all__ = ["EndUnused", "OpenSession", "SessionOpener"]

_log = structlog.get_logger("realtime_compat")

OpenSession = Callable[[SessionStart], Awaitable[Session]]
# Ends a session the client never used, telling it nothing (a new one replaces it).
EndUnused = Callable[[Session], Awaitable[None]]


class SessionOpener:
    def __init__(self, open_session: OpenSession, end_unused: EndUnused) -> None:
        self._open_session = open_session
        self._end_unused = end_unused
        self.session: Session | None = None  # the latest one open
        self._opening: asyncio.Task[Session | None] | None = None
        self._start: SessionStart | None = None  # what the latest opening opens
        self._config: SessionStart | None = None  # ... and what it is with the changes in place
        self._wish: SessionStart | None = None  # what the client's session shows
        self._failure_awaited = False  # the client waited for the latest opening's refusal
        self._closing = False

    def open(self, start: SessionStart) -> None:
        """Open a session as ``start`` (the one before, if any, ended unused once open)."""
        self._start = self._config = self._wish = start
        self._failure_awaited = False
        self._opening = asyncio.create_task(self._replace(self._opening, start))

    async def shape(self, wanted: SessionStart) -> None:
        """A ``session.update`` before the first use: the session made ``wanted``."""
        assert self._config is not None
        self._wish = wanted
        if reconfiguration(self._config, wanted) is REOPEN:
            self.open(wanted)
        try:
            session = await self._opened()
        except Exception:  # the first use tries again, or tells the client
            return
        if session is not None:
            await self._in_place(session, wanted)

    async def in_use(self, wanted: SessionStart) -> Session:
        """The session for the client's first event that needs the model (``StartRefused``:
        the answer to its start)."""
        assert self._config is not None
        assert self._start is not None
        self._wish = wanted
        try:
            session = await self._opened()
        except StartRefused as refused:
            same = reconfiguration(self._start, wanted) is not REOPEN  # what failed, but in place
            if refused.fatal and self._failure_awaited and same:
                raise
            session = None
        except Exception:
            session = None
        if session is None or reconfiguration(self._config, wanted) is REOPEN:
            self.open(wanted)
            session = await self._opened()
            assert session is not None  # the latest opening: nothing came to supersede it
        else:
            await self._in_place(session, wanted)
        return session

    def ready(self) -> Session | None:
        """The open session when it is already what the client asked (nothing to wait for or
        to change: ``in_use`` would give it as it is), for the audio's hot path."""
        opening = self._opening
        if opening is None or not opening.done() or opening.cancelled():
            return None
        if opening.exception() is not None or self._config is not self._wish:
            return None
        return opening.result()

    def failed(self) -> bool:
        """The latest opening was refused (``in_use`` tries again, or says why)."""
        opening = self._opening
        if opening is None or not opening.done() or opening.cancelled():
            return False
        return opening.exception() is not None

    async def close(self) -> Session | None:
        """No more openings; the session open (the latest, once it is), if any."""
        self._closing = True
        if self._opening is None:
            return None
        try:
            return await self._opened()
        except (Exception, asyncio.CancelledError):
            return None

    async def _in_place(self, session: Session, wanted: SessionStart) -> None:
        assert self._config is not None
        change = reconfiguration(self._config, wanted)
        if isinstance(change, SessionUpdate):
            await session.on_client_event(change)
        if change is not REOPEN:
            self._config = wanted

    async def _opened(self) -> Session | None:
        """What the latest opening gave, once it has (its session, or what it raised)."""
        opening = self._opening
        assert opening is not None
        waited = not opening.done()
        try:
            return await _settled(opening)
        except Exception:
            self._failure_awaited = self._failure_awaited or waited
            raise

    async def _replace(
        self, previous: asyncio.Task[Session | None] | None, start: SessionStart
    ) -> Session | None:
        if previous is not None:
            try:
                unused = await _settled(previous)
            except Exception as failed:  # the next start is tried all the same
                _log.info("realtime_compat_early_start_failed", error=type(failed).__name__)
                unused = None
            if unused is not None:
                if self.session is unused:
                    self.session = None
                await self._end_unused(unused)
        if start is not self._start or self._closing:
            return None  # superseded meanwhile (the next opening opens), or the socket closed
        session = await self._open_session(start)
        self.session = session
        return session


async def _settled(opening: asyncio.Task[Session | None]) -> Session | None:
    """What ``opening`` gave, once it has: its session, or what it raised. A caller cancelled
    meanwhile leaves it running."""
    await asyncio.wait((opening,))
    return opening.result()
