"""Found by the soak: a voice session's ``confirm_late`` turn answered 4 s after the spoken reply
that asked for the confirmation, and that reply alone took 4 s: the answer came at the TTL
(8 s then), the confirmation expired as it was sent, and the driver, which had read the
``confirmation.resolved`` while idling, waited for another one and reported the turn stuck.

``confirm_late`` now answers ``LATE_S`` after ``confirmation.requested`` (at once after the reply
when that took longer), and a confirmation that closes while the driver idles is reported as
what it is. Played against a scripted gateway on a virtual clock."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from soak.context import SessionContext, SoakLogs
from soak.records import SessionRecord
from soak.turns import LATE_S, confirm_turn

ASKED_AT = 0.2  # confirmation.requested, as the reply that asks for it begins


class VirtualClock:
    def __init__(self) -> None:
        self.t = 0.0

    def now(self) -> float:
        return self.t


class ScriptedGateway:
    """The gateway's side of one confirmation turn: the request at ``ASKED_AT``, the reply
    asking for it done ``reply_s`` later; an answer before ``ttl_s`` after the request resolves
    it (then a reply), a later one is refused ``confirmation_expired``; at ``ttl_s`` an
    unanswered one resolves ``expired`` (and the model is not asked to reply)."""

    def __init__(self, *, reply_s: float, ttl_s: float) -> None:
        self.clock = VirtualClock()
        self.expires_at = ASKED_AT + ttl_s
        self.answered = False
        self.answers: list[tuple[float, str]] = []
        self._queue: list[tuple[float, dict[str, Any]]] = [
            (ASKED_AT, {"type": "confirmation.requested", "confirmation_id": "c1"}),
            (ASKED_AT + reply_s, {"type": "response.done", "status": "completed", "text": "ok?"}),
            (
                self.expires_at,
                {"type": "confirmation.resolved", "confirmation_id": "c1", "decision": "expired"},
            ),
        ]

    def _push(self, at: float, event: dict[str, Any]) -> None:
        self._queue.append((at, event))
        self._queue.sort(key=lambda item: item[0])

    async def event(self, within: float) -> dict[str, Any]:
        await asyncio.sleep(0)
        if self._queue and self._queue[0][0] <= self.clock.t + within:
            at, event = self._queue.pop(0)
            self.clock.t = max(self.clock.t, at)
            return event
        self.clock.t += within
        raise TimeoutError

    async def until(self, kind: str, within: float, **match: Any) -> dict[str, Any]:
        deadline = self.clock.t + within
        while True:
            event = await self.event(max(deadline - self.clock.t, 0.0))
            if event["type"] == kind and all(event.get(k) == v for k, v in match.items()):
                return event

    async def send(self, type_: str, **fields: Any) -> None:
        now = self.clock.t
        if type_ != "confirmation.respond":
            return
        self.answers.append((now, fields["decision"]))
        if now < self.expires_at and not self.answered:
            self.answered = True
            self._queue = [(at, e) for at, e in self._queue if e.get("decision") != "expired"]
            self._push(
                now,
                {"type": "confirmation.resolved", "confirmation_id": "c1", "decision": "approved"},
            )
            self._push(now + 0.5, {"type": "response.done", "status": "completed", "text": "done"})
        else:
            self._push(now, {"type": "error", "code": "confirmation_expired"})


def context(clock: VirtualClock) -> SessionContext:
    record = SessionRecord(
        number=1, kind="voice_openai", provider="openai", tag="t", created_at=0.0
    )
    return SessionContext(record, random.Random(7), clock, SoakLogs(), asyncio.Event())  # type: ignore[arg-type]


@pytest.mark.parametrize("reply_s", [0.5, 3.0])
async def test_the_late_answer_comes_late_s_after_the_request_however_long_the_reply(
    reply_s: float,
) -> None:
    gateway = ScriptedGateway(reply_s=reply_s, ttl_s=8.0)
    ctx = context(gateway.clock)
    await confirm_turn(ctx, gateway, "confirm_late")  # type: ignore[arg-type]
    assert gateway.answers == [(pytest.approx(ASKED_AT + LATE_S), "approve")]
    assert ctx.record.problems == []


async def test_a_reply_longer_than_late_s_is_answered_as_soon_as_it_is_done() -> None:
    gateway = ScriptedGateway(reply_s=LATE_S + 1.5, ttl_s=15.0)
    ctx = context(gateway.clock)
    await confirm_turn(ctx, gateway, "confirm_late")  # type: ignore[arg-type]
    assert gateway.answers == [(pytest.approx(ASKED_AT + LATE_S + 1.5), "approve")]
    assert ctx.record.problems == []


async def test_a_confirmation_that_expires_while_the_user_waits_is_reported_not_stuck() -> None:
    gateway = ScriptedGateway(reply_s=1.0, ttl_s=LATE_S - 1.0)  # shorter than the wait
    ctx = context(gateway.clock)
    await confirm_turn(ctx, gateway, "confirm_late")  # type: ignore[arg-type]
    assert gateway.answers == []  # nothing left to answer
    assert ctx.record.problems == [
        f"confirm_late: resolved expired {LATE_S - 1.0:.1f} s after the request, before the answer"
    ]
