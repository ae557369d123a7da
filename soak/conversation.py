"""One soak session on the client protocol, across its sockets: start, events, resume, end.

``Conversation.event`` is the only way the session's logic reads events, so the bookkeeping
every invariant needs happens in one place: tool calls and their results, errors (a client
fault code in a session that sent no bad input is another session's harm), ``session.moving``
(remembered: the next resume uses its token), ``session.ended`` (raises ``SessionOver``) and the
socket's end (raises ``Interrupted``: the caller resumes with ``recover`` and goes on).

A failover (``session.provider_changed``, docs/routing.md) is recorded with the provider the
session is on from then on. The reply it cut ends ``response.done`` ``interrupted`` just
before it: that one is kept from the session's logic (recorded as the failover's cut), so a
turn goes on waiting for the new model's reply, as a user who never noticed the change would.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

import aiohttp

from soak.link import Link, LinkClosed
from soak.nodes import NodeDirectory, user_token
from soak.records import (
    CLIENT_FAULT_CODES,
    END_REASONS,
    CallSeen,
    Clock,
    FailoverSeen,
    SessionRecord,
)
from soak.routing import targets_of

__all__ = ["Conversation", "Interrupted", "SessionOver"]

RETRY_FOR_S = 25.0  # how long a start or a resume is retried (the resume window is 30 s)
EVENT_WITHIN_S = 20.0
RECENT_EVENTS = 8
# After a ``response.done`` ``interrupted``: how long to look for a ``session.provider_changed``
# right behind it (the gateway sends the two back to back).
FAILOVER_PEEK_S = 0.5
_RETRYABLE = frozenset({"store_unavailable", "rate_limited", "unavailable"})


class SessionOver(Exception):
    """``session.ended`` came."""


class Interrupted(Exception):
    """The socket is gone (moved, dropped, closed) without ``session.ended``."""


class Conversation:
    def __init__(
        self,
        record: SessionRecord,
        nodes: NodeDirectory,
        http: aiohttp.ClientSession,
        clock: Clock,
    ) -> None:
        self.record = record
        self.nodes = nodes
        self.http = http
        self.clock = clock
        self.link: Link | None = None
        self.mode = "text"  # what the session was started in (a resume says it again)
        self.token = user_token(f"soak-{record.number}")
        self.resume_token = ""
        self.moving_token: str | None = None
        self.moving_after_s = 0.0  # session.moving's retry_after_ms
        self.ended = False
        # The last events, to say what a stuck turn was waiting after.
        self.recent: deque[str] = deque(maxlen=RECENT_EVENTS)
        self._held: deque[dict[str, Any]] = deque()  # read while looking for a failover

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    # Opening and resuming ---------------------------------------------------------------------

    async def open(self, mode: str, **start: Any) -> bool:
        """Start the session on some node; False (``record.refused``) if no node would."""
        deadline = self.clock.now() + RETRY_FOR_S
        last = "no node up"
        while self.clock.now() < deadline:
            answer = await self._attempt(None, {"mode": mode, **start})
            if answer is None or answer.get("type") == "error":
                last = "no answer" if answer is None else str(answer.get("code"))
                if answer is not None:
                    self.record.start_errors.append((self.clock.now(), last))
                await asyncio.sleep(0.5)
                continue
            self._began(answer)
            return True
        self.record.refused = last
        return False

    async def recover(self) -> bool:
        """Resume on another node after the socket went; False (``record.lost``) if it failed."""
        if self.ended:
            return False
        old = self.link
        held = [*self._held]
        self._held.clear()
        if old is not None:
            await old.close()
            held += old.unread()
        try:  # what came before the end: a session.moving's token, or the end itself
            for event in held:
                self._note(event)
        except SessionOver:
            return False
        avoid = old.node if old is not None else None
        self.record.disturb(self.clock.now())
        self.record.broke(self.clock.now(), "socket lost")
        if self.moving_token is not None and self.moving_after_s > 0:
            await asyncio.sleep(self.moving_after_s)  # as session.moving asks
        deadline = self.clock.now() + RETRY_FOR_S
        last = "no node up"
        while self.clock.now() < deadline:
            token = self.moving_token or self.resume_token
            resume = {"session_id": self.record.session_id, "resume_token": token}
            answer = await self._attempt(avoid, {"mode": self.mode, "resume": resume})
            if answer is not None and answer.get("type") == "session.started":
                self.moving_token = None
                self.record.resumes += 1
                if answer.get("recovery"):
                    self.record.recoveries += 1
                self._began(answer)
                return True
            if answer is not None and answer.get("code") == "resume_failed":
                which = "session.moving's" if token == self.moving_token else "its last"
                self.record.lost = (
                    f"resume_failed with {which} token: {answer.get('message')} "
                    f"(after {list(self.recent)})"
                )
                return False
            last = "no answer" if answer is None else str(answer.get("code"))
            avoid = None
            await asyncio.sleep(0.3)
        self.record.lost = f"could not resume: {last}"
        return False

    async def _attempt(self, avoid: str | None, start: dict[str, Any]) -> dict[str, Any] | None:
        """One socket to one node, one ``session.start``; the first answer, or None."""
        node = self.nodes.pick(avoid)
        if node is None:
            return None
        try:
            link = await Link.open(self.http, node.session_url, node.name, self.headers)
        except (aiohttp.ClientError, OSError):
            return None
        self.mode = start["mode"]
        try:
            await link.send_json({"type": "session.start", **start})
            while True:
                event = await link.next(EVENT_WITHIN_S)
                if event["type"] == "session.started":
                    self.link = link
                    return event
                if event["type"] == "error":
                    await link.close()
                    return event
        except (LinkClosed, TimeoutError, aiohttp.ClientError, ConnectionError):
            await link.close()
            return None

    def _began(self, answer: dict[str, Any]) -> None:
        record = self.record
        record.session_id = answer["session_id"]
        self.resume_token = answer["resume_token"]
        if record.started_at is None:
            record.started_at = self.clock.now()
        assert self.link is not None
        record.nodes.append(self.link.node)
        provider = str(answer.get("provider"))
        expected = targets_of(record.alias) or (record.provider,)
        if provider not in expected:
            record.problem(
                f"session.started on provider {provider!r}, not one of {', '.join(expected)}"
            )
        if record.started_on is None:
            record.started_on = provider
        elif provider != record.upstream:  # resumed where another target serves it
            record.broke(self.clock.now(), f"resumed on {provider}")
        record.upstream = provider

    # Events -------------------------------------------------------------------------------------

    async def event(self, within: float = EVENT_WITHIN_S) -> dict[str, Any]:
        event = self._held.popleft() if self._held else await self._next(within)
        self._note(event)
        if event.get("type") == "response.done" and event.get("status") == "interrupted":
            follower = await self._peek()
            if follower is not None and follower.get("type") == "session.provider_changed":
                self._note(follower)
                self.record.failovers[-1].cut = True
                return follower  # the cut reply's end stays with the failover
            if follower is not None:
                self._held.append(follower)
        return event

    async def _next(self, within: float) -> dict[str, Any]:
        if self.link is None:
            raise Interrupted
        try:
            return await self.link.next(within)
        except LinkClosed as closed:
            if self.ended:
                raise SessionOver from None
            raise Interrupted from closed

    async def _peek(self) -> dict[str, Any] | None:
        """The event right behind, if one comes soon (the socket's end is left for later)."""
        if self.link is None:
            return None
        try:
            return await self.link.next(FAILOVER_PEEK_S)
        except (TimeoutError, LinkClosed):
            return None

    def _note(self, event: dict[str, Any]) -> None:
        record, now, kind = self.record, self.clock.now(), event.get("type")
        self.recent.append(_brief(event, now))
        if kind == "session.moving":
            self.moving_token = event.get("resume_token")
            self.moving_after_s = float(event.get("retry_after_ms") or 0) / 1000
            record.disturb(now)
            record.broke(now, "moved")
        elif kind == "session.provider_changed":
            provider = str(event.get("provider"))
            seen = FailoverSeen(now, str(event.get("reason")), provider, str(event.get("previous")))
            record.failovers.append(seen)
            record.disturb(now)
            if provider not in targets_of(record.alias):
                record.problem(f"moved to provider {provider!r}, not of alias {record.alias!r}")
            record.upstream = provider
        elif kind == "session.ended":
            self.ended = True
            record.end_reason = str(event.get("reason"))
            record.ended_at = now
            if record.end_reason not in END_REASONS:
                record.problem(f"session.ended with an unknown reason {record.end_reason!r}")
            raise SessionOver
        elif kind == "error":
            code = str(event.get("code"))
            record.errors.append((now, code))
            if code in CLIENT_FAULT_CODES and not record.bad_input:
                record.problem(f"error {code} without bad input of its own: {event.get('message')}")
        elif kind == "tool.started":
            record.calls[str(event["call_id"])] = CallSeen(str(event.get("name")), now)
        elif kind == "tool.finished":
            call = record.calls.setdefault(
                str(event["call_id"]), CallSeen(str(event.get("name")), now)
            )
            call.finished_at, call.ok = now, bool(event.get("ok"))
            data = event.get("data")
            if isinstance(data, dict) and isinstance(data.get("run"), str):
                call.run = data["run"]
            error = event.get("error")
            if isinstance(error, dict):
                call.error_type = str(error.get("type"))
        elif kind == "response.done" and event.get("status") == "completed" and event.get("text"):
            for call in record.calls.values():
                if call.ok and call.finished_at is not None and not call.answered_after:
                    call.answered_after = True

    async def until(
        self, kind: str, within: float = EVENT_WITHIN_S, **match: Any
    ) -> dict[str, Any]:
        """Events up to the first of ``kind`` whose fields match."""
        deadline = self.clock.now() + within
        while True:
            left = deadline - self.clock.now()
            if left <= 0:
                raise TimeoutError(f"no {kind} within {within:g} s")
            event = await self.event(left)
            if event.get("type") == kind and all(event.get(k) == v for k, v in match.items()):
                return event

    async def send(self, type_: str, **fields: Any) -> None:
        if self.link is None:
            raise Interrupted
        try:
            await self.link.send(type_, **fields)
        except (ConnectionError, aiohttp.ClientError, RuntimeError) as error:
            raise Interrupted from error

    # The end ----------------------------------------------------------------------------------

    async def end(self) -> None:
        """``session.end``, then wait for ``session.ended`` (resuming if the socket goes)."""
        for _ in range(2):
            try:
                await self.send("session.end")
                while True:
                    await self.event(10.0)
            except SessionOver:
                break
            except Interrupted:
                if not await self.recover():
                    break
            except TimeoutError:
                self.record.problem("no session.ended within 10 s of session.end")
                break
        await self.close()

    async def close(self) -> None:
        if self.link is not None:
            await self.link.close()


def _brief(event: dict[str, Any], at: float) -> str:
    kind = str(event.get("type"))
    for key in ("status", "code", "name", "decision", "reason"):
        if key in event:
            return f"{at:.1f} {kind} {key}={event[key]}"
    return f"{at:.1f} {kind}"
