"""A resume over the node's rate waits for its turn at ``ResumeGate`` (up to
``GATEWAY_RESUME_QUEUE_S``, 4 s) before it claims the session. If the node began draining
meanwhile, the drain may be over by the time the wait is: a session claimed and reopened then
would end with ``shutdown`` as the node stops. After its wait the resume is refused like any
resume on a draining node (retryable; the client goes to another node), nothing claimed."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from gateway.clock import Clock, SystemClock
from gateway.config import Settings
from gateway.observability import Metrics
from gateway.protocol import ErrorCode, ErrorEvent, Mode, Resume, SessionStart
from gateway.session.refusals import StartRefused
from gateway.session.resume import Resumes
from gateway.session.session import Session, SessionUser
from gateway.store import MemoryStore, SessionRecord, SessionSnapshot, hash_token

NODE = "node-b"
TOKEN = "resume-token-of-s1"
ALICE = SessionUser("alice")


@dataclass
class DrainingNode:
    """The session manager as ``Resumes`` sees it (``ManagerView``); it reopens nothing."""

    settings: Settings
    store: MemoryStore
    metrics: Metrics = field(default_factory=Metrics)
    clock: Clock = field(default_factory=SystemClock)
    node_id: str = NODE
    draining: bool = False
    sessions: dict[str, Session] = field(default_factory=dict)
    reopened: list[str] = field(default_factory=list)

    def refuse_while_draining(self, start: SessionStart) -> None:
        if self.draining:
            raise StartRefused(
                ErrorEvent(
                    code=ErrorCode.UPSTREAM_UNAVAILABLE,
                    message="the gateway is shutting down; connect again to another node",
                    retryable=True,
                    event_id=start.event_id,
                )
            )

    async def open(self, session_id: str, *args: Any, **kwargs: Any) -> Session:
        self.reopened.append(session_id)
        raise AssertionError("a session was reopened on a draining node")

    async def announce(self, session: Session, **kwargs: Any) -> None:
        raise AssertionError("nothing is announced here")

    async def forget(self, session: Session) -> None: ...

    async def release_local(self, session: Session) -> None: ...

    async def keep_slot(self, session: Session) -> None: ...


async def parked_elsewhere(store: MemoryStore) -> None:
    snapshot = SessionSnapshot(
        provider="local",
        mode="text",
        input_rate=16000,
        output_rate=16000,
        enabled_tools=None,
        instructions="",
    )
    record = SessionRecord(
        session_id="s1",
        user_id="alice",
        tenant=None,
        token_hash=hash_token(TOKEN),
        owner=NODE,
        epoch=1,
        state="parked",
        snapshot=snapshot,
        saved_at=0.0,
    )
    await store.register(record, ttl_s=30.0)


async def test_a_resume_that_waited_at_the_gate_while_the_drain_began_is_refused() -> None:
    store = MemoryStore(SystemClock())
    await parked_elsewhere(store)
    node = DrainingNode(
        Settings(auth="none", resumes_per_s=20.0, resume_burst=1, resume_queue_s=4.0), store
    )
    resumes = Resumes(node)
    resumes.gate.reserve(node.clock.monotonic())  # the burst is spent: the next one waits 50 ms
    start = SessionStart(
        mode=Mode.TEXT, resume=Resume(session_id="s1", resume_token=TOKEN), event_id="r1"
    )
    resuming = asyncio.create_task(resumes.resume(start, ALICE, outbound=None))  # type: ignore[arg-type]
    await asyncio.sleep(0)  # it reserved its turn and waits for it
    assert not resuming.done()
    node.draining = True  # SIGTERM meanwhile

    with pytest.raises(StartRefused) as refused:
        await resuming
    assert (refused.value.event.code, refused.value.event.retryable) == (
        ErrorCode.UPSTREAM_UNAVAILABLE,
        True,
    )
    assert node.reopened == []
    owner = await store.owner("s1")
    assert owner == (NODE, 1)  # not claimed: still parked at its epoch, for another node
