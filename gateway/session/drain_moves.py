"""A draining node's attached sessions, sent to other nodes (``Resumes.move_all`` lets the parked
ones go first).

Each session moves at its next turn boundary (no reply streaming to the client), at the latest
at the drain's deadline: the client gets ``session.moving`` with a fresh token and its own
``retry_after_ms`` (``MoveSpread``: the sessions' resumes spread over a window), the record is
parked, and the session is handed off here (calls still running finish into the ledger for the
next owner). A phone call or a ``/v1/realtime`` session cannot move (``Session.movable``): it
may finish before the deadline.

The list of sessions to move is taken when the drain begins, but a session whose start (or
resume) was under way then, its upstream still connecting, arrives later: it moves too, as
soon as it is there (``move_if_draining``), instead of ending with ``shutdown`` when the drain
is over. Until the last moved session's resume is due (and ``RELEASE_WAIT_S`` more) the node
stays, to answer the new owners' ``moved`` at once (gone, each would wait that long).
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Mapping
from typing import Protocol

import structlog

from gateway.config import Settings
from gateway.observability import Metrics
from gateway.protocol import SessionMoving
from gateway.session.resume_pacing import MoveSpread
from gateway.session.session import Session
from gateway.store import Fenced, SessionStore, StoreUnavailable, hash_token

__all__ = ["BOUNDARY_POLL_S", "RELEASE_WAIT_S", "DrainMoves"]

_log = structlog.get_logger("sessions.resume")

# How long a node waits for another to let a session go before it takes it anyway.
RELEASE_WAIT_S = 1.0
# How often a draining node looks whether a session reached a turn boundary.
BOUNDARY_POLL_S = 0.05


class MoverView(Protocol):
    """What moving needs of the session manager."""

    settings: Settings
    store: SessionStore
    metrics: Metrics

    @property
    def sessions(self) -> Mapping[str, Session]: ...

    async def release_local(self, session: Session) -> None: ...


class DrainMoves:
    def __init__(self, manager: MoverView) -> None:
        self._m = manager
        # Once the drain began: its deadline (loop time) and resume times; the moves under way;
        # whether a session moved (else nobody's resume is to wait for).
        self._deadline: float | None = None
        self._spread: MoveSpread | None = None
        self._moving: set[asyncio.Task[None]] = set()
        self._moved = False

    def begin(self, deadline: float) -> None:
        self._deadline = deadline

    async def move_attached(self) -> None:
        """Move every attached movable session (its resume time from ``MoveSpread``), and those
        that arrive meanwhile; return once all have moved and the last one's resume is due."""
        m = self._m
        movers = [s for s in list(m.sessions.values()) if s.movable and s.outbound is not None]
        self._spread = MoveSpread.plan(
            len(movers),
            per_session_ms=m.settings.drain_spread_per_session_ms,
            # never more than half the resume window: a session told to wait must still have
            # time to resume before its record expires
            max_window_ms=min(
                m.settings.drain_spread_max_ms, int(m.settings.resume_window_s * 500)
            ),
            now=asyncio.get_running_loop().time(),
        )
        for session in movers:
            self._move_later(session)
        await self.moves_done()

    def move_if_draining(self, session: Session) -> None:
        """A session that started or resumed here after the drain began: it moves as well."""
        if self._deadline is not None:
            self._move_later(session)

    def _move_later(self, session: Session) -> None:
        assert self._deadline is not None
        task = asyncio.create_task(self._move_when_ready(session, self._deadline))
        self._moving.add(task)
        task.add_done_callback(self._moving.discard)

    async def moves_done(self) -> None:
        """Every move under way has been made (those that begin meanwhile too), and the last
        moved session's resume time is ``RELEASE_WAIT_S`` past."""
        loop = asyncio.get_running_loop()
        while True:
            if self._moving:
                await asyncio.wait(set(self._moving))
                continue
            if self._spread is None or not self._moved:
                return
            left = self._spread.last_resume_at + RELEASE_WAIT_S - loop.time()
            if left <= 0:
                return
            # in short steps: a session arriving meanwhile is moved, and waited for, too
            await asyncio.sleep(min(left, BOUNDARY_POLL_S))

    async def _move_when_ready(self, session: Session, deadline: float) -> None:
        loop = asyncio.get_running_loop()
        while not session.at_turn_boundary() and loop.time() < deadline:
            if session.ended.is_set():
                return
            await asyncio.sleep(BOUNDARY_POLL_S)
        # (a phone call or a /v1/realtime session is marked unmovable as its start returns,
        # before this task first runs)
        if session.ended.is_set() or session.outbound is None or not session.movable:
            return
        try:
            await self.move(session)
        except StoreUnavailable:
            _log.warning("session_not_moved", session_id=session.session_id, reason="no store")

    async def move(self, session: Session) -> None:
        """Send the client to another node: a fresh token in ``session.moving``, the record
        parked, our copy handed off. Raises ``StoreUnavailable``."""
        async with session.moving() as may_move:
            if may_move:  # else its end began first: it ends here, as its client asked
                await self._move(session)

    async def _move(self, session: Session) -> None:
        m = self._m
        token = secrets.token_urlsafe(24)
        # Its resume time is taken before the write: the sessions moving together take
        # consecutive times, whatever order their writes come back in.
        now = asyncio.get_running_loop().time()
        wait_ms = 0 if self._spread is None else self._spread.retry_after_ms(now)
        try:
            # a confirmation whose key the store missed: written first, for the next owner
            await session.ownership.record_unrecorded_confirmations()
            await m.store.save(
                session.session_id,
                session.ownership.epoch,
                session.snapshot(),
                token_hash=hash_token(token),
                parked=True,
                ttl_s=m.settings.resume_window_s,
            )
        except Fenced:
            session.lost()
            return
        session.resume_token_hash = hash_token(token)
        session.emit(
            SessionMoving(session_id=session.session_id, resume_token=token, retry_after_ms=wait_ms)
        )
        self._moved = True
        m.metrics.sessions_moved.inc()
        await m.release_local(session)
