"""The load generator of ``scripts/bench relay``: sessions sending stamped 20 ms frames on a clock.

Two ways to reach the same echoing upstream (the provider's fake), one codec each
(``bench.relay.targets``):

- ``direct``: the provider's own protocol straight to the fake (OpenAI Realtime over ``ws://``,
  or Gemini Live over ``wss://`` trusting the fake's certificate, after its ``setup``);
- ``gateway``: the gateway's client protocol, ``session.start`` at the provider's rates, then
  binary PCM16 frames both ways.

Every session sends frame ``n`` at ``start + n × period`` on the loop clock (so a late send does
not push the later ones back), the sessions' starts spread over one period. A frame's round trip
runs from its send to the moment the same frame (matched by its stamp) is back; the first
``warmup_frames`` of each session are not measured (``scripts/bench relay`` measures from the
first: 0), those of each session's first second are also kept apart, and a frame not back
``grace_s`` after the session's last send is lost. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from bench.relay.stats import CpuSnapshot, parse_frame, stamp_frame
from bench.relay.targets import (
    PROVIDERS,
    Codec,
    GatewayCodec,
    ProviderSpec,
    Target,
    gemini_setup,
    is_setup_complete,
    make_codec,
)

__all__ = ["LoadPlan", "LoadResult", "Target", "run_load"]

_OPEN_TIMEOUT_S = 10.0
_SETUP_TIMEOUT_S = 60.0  # all sessions together
_CLOSE_TIMEOUT_S = 10.0
_PARALLEL_OPENS = 10
SLOW_FRAME_S = 0.003  # measured frames slower than this are kept, with when they came back
_SLOW_FRAMES_KEPT = 20_000


@dataclass(frozen=True)
class LoadPlan:
    target: Target
    url: str  # the gateway's /v1/session, or the fake's (ws://…/v1/realtime?model=…, wss://…)
    sessions: int
    fps: float
    seconds: float  # measured, after the warm-up
    warmup_frames: int
    provider: ProviderSpec = PROVIDERS["openai"]
    ca_file: Path | None = None  # the certificate a wss:// fake is trusted by
    grace_s: float = 2.0
    api_key: str = "sk-bench"
    bearer: str | None = None  # ``gateway``: the sessions' credential, when auth is on

    @property
    def period_s(self) -> float:
        return 1.0 / self.fps

    @property
    def frames_per_session(self) -> int:
        return self.warmup_frames + round(self.seconds * self.fps)


@dataclass
class LoadResult:
    round_trips_s: list[float] = field(default_factory=list)  # measured frames only
    # each session's first second (its first fps frames), measured or not
    first_second_s: list[float] = field(default_factory=list)
    sent: int = 0  # measured frames sent
    returned: int = 0  # measured frames back
    lost: int = 0  # measured frames sent and not back in time
    lost_in_warmup: int = 0
    corrupt: int = 0  # back, but not byte-identical
    stray: int = 0  # unstamped, another session's, unknown or duplicate
    rechunked: int = 0  # audio messages that were not exactly one frame
    send_lags_s: list[float] = field(default_factory=list)
    # (arrival, from the first frame's due time; session; round trip) of frames over SLOW_FRAME_S
    slow_frames: list[tuple[float, int, float]] = field(default_factory=list)
    setup_s: float = 0.0
    events: Counter[str] = field(default_factory=Counter)  # error codes, session.ended reasons
    before: CpuSnapshot | None = None  # the measured window's CPU snapshots
    after: CpuSnapshot | None = None


@dataclass
class _Session:
    index: int
    ws: ClientConnection
    codec: Codec
    send_times: dict[int, float] = field(default_factory=dict)  # sequence → loop time
    done_sending: bool = False


async def _open(
    plan: LoadPlan, index: int, events: Counter[str], tls: ssl.SSLContext | None
) -> _Session:
    gemini = plan.target == "direct" and plan.provider.name == "gemini"
    headers: dict[str, str] = {}
    if plan.target == "direct":
        headers = (
            {"x-goog-api-key": plan.api_key}
            if gemini
            else {"Authorization": f"Bearer {plan.api_key}"}
        )
    elif plan.bearer is not None:
        headers = {"Authorization": f"Bearer {plan.bearer}"}
    ws = await connect(
        plan.url,
        additional_headers=headers,
        compression=None,
        max_size=None,
        ping_interval=None,
        open_timeout=_OPEN_TIMEOUT_S,
        close_timeout=2.0,
        ssl=tls,
    )
    try:
        async with asyncio.timeout(_OPEN_TIMEOUT_S):
            if gemini:
                await ws.send(gemini_setup())
                await _expect_gemini_setup(ws)
            elif plan.target == "direct":
                await _expect(ws, "session.created")
            else:
                await ws.send(plan.provider.gateway_start())
                await _expect(ws, "session.started")
            return _Session(index, ws, make_codec(plan.target, plan.provider, events))
    except BaseException:
        await ws.close()
        raise


async def _expect_gemini_setup(ws: ClientConnection) -> None:
    """Gemini Live answers ``setup`` with ``setupComplete`` (JSON in a binary frame)."""
    while not is_setup_complete(await ws.recv()):
        pass


async def _expect(ws: ClientConnection, kind: str) -> None:
    while True:
        message = await ws.recv()
        if isinstance(message, bytes):
            continue
        event = orjson.loads(message)
        if event.get("type") == kind:
            return
        if event.get("type") in ("error", "session.ended"):
            raise RuntimeError(f"waiting for {kind}: {message[:300]}")


async def _send_frames(plan: LoadPlan, session: _Session, start: float, result: LoadResult) -> None:
    loop = asyncio.get_running_loop()
    try:
        for sequence in range(plan.frames_per_session):
            due = start + sequence * plan.period_s
            delay = due - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            now = loop.time()
            session.send_times[sequence] = now
            try:
                frame = stamp_frame(session.index, sequence, plan.provider.frame_bytes)
                await session.ws.send(session.codec.encode(frame))
            except ConnectionClosed:
                session.send_times.pop(sequence, None)  # never sent, so never lost
                raise
            if sequence >= plan.warmup_frames:
                result.sent += 1
                result.send_lags_s.append(now - due)
    except ConnectionClosed:
        result.events["closed_while_sending"] += 1
    finally:
        session.done_sending = True


async def _receive_frames(
    plan: LoadPlan, session: _Session, start: float, deadline: float, result: LoadResult
) -> None:
    loop = asyncio.get_running_loop()
    pending = session.send_times
    back = 0
    try:
        async with asyncio.timeout_at(deadline):
            while back < plan.frames_per_session and not (session.done_sending and not pending):
                message = await session.ws.recv()
                arrived = loop.time()
                for frame in session.codec.decode(message):
                    stamp = parse_frame(frame, plan.provider.frame_bytes)
                    sent_at = None
                    if stamp is not None and stamp.session == session.index:
                        sent_at = pending.pop(stamp.sequence, None)
                    if stamp is None or sent_at is None:
                        result.stray += 1
                        continue
                    back += 1
                    if not stamp.intact:
                        result.corrupt += 1
                    if stamp.sequence < plan.fps:
                        result.first_second_s.append(arrived - sent_at)
                    if stamp.sequence >= plan.warmup_frames:
                        trip = arrived - sent_at
                        result.returned += 1
                        result.round_trips_s.append(trip)
                        if trip > SLOW_FRAME_S and len(result.slow_frames) < _SLOW_FRAMES_KEPT:
                            result.slow_frames.append((arrived - start, session.index, trip))
    except TimeoutError:
        pass
    except ConnectionClosed:
        result.events["closed_while_receiving"] += 1
    for sequence in pending:
        if sequence >= plan.warmup_frames:
            result.lost += 1
        else:
            result.lost_in_warmup += 1
    pending.clear()


async def _close(plan: LoadPlan, session: _Session) -> None:
    with contextlib.suppress(ConnectionClosed, OSError):
        if plan.target == "gateway":
            await session.ws.send('{"type":"session.end"}')
        await session.ws.close()


async def run_load(plan: LoadPlan, snapshot: Callable[[], CpuSnapshot]) -> LoadResult:
    """Open ``plan.sessions`` sessions, run the frames, close; ``snapshot`` brackets the window."""
    result = LoadResult()
    loop = asyncio.get_running_loop()
    gate = asyncio.Semaphore(_PARALLEL_OPENS)
    tls = None
    if plan.url.startswith("wss://"):
        tls = ssl.create_default_context(cafile=None if plan.ca_file is None else str(plan.ca_file))

    async def open_one(index: int) -> _Session:
        async with gate:
            return await _open(plan, index, result.events, tls)

    began = loop.time()
    opening = [asyncio.create_task(open_one(index)) for index in range(plan.sessions)]
    try:
        async with asyncio.timeout(_SETUP_TIMEOUT_S):
            sessions = await asyncio.gather(*opening)
    except BaseException:
        for pending_open in opening:
            pending_open.cancel()
        done = await asyncio.gather(*opening, return_exceptions=True)
        opened = [s for s in done if isinstance(s, _Session)]
        await asyncio.wait_for(asyncio.gather(*(_close(plan, s) for s in opened)), 10)
        raise
    result.setup_s = loop.time() - began

    try:
        start = loop.time() + 0.2
        last_send = start + (plan.frames_per_session - 1) * plan.period_s
        deadline = last_send + plan.period_s + plan.grace_s
        tasks: list[asyncio.Task[None]] = []
        for session in sessions:
            offset = session.index / plan.sessions * plan.period_s
            tasks.append(asyncio.create_task(_send_frames(plan, session, start + offset, result)))
            receive = _receive_frames(plan, session, start, deadline + offset, result)
            tasks.append(asyncio.create_task(receive))
        window_opens = start + plan.warmup_frames * plan.period_s
        await asyncio.sleep(max(0.0, window_opens - loop.time()))
        result.before = snapshot()
        try:
            async with asyncio.timeout_at(deadline + plan.period_s + 1.0):
                await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
        result.after = snapshot()
    finally:
        closing = asyncio.gather(*(_close(plan, s) for s in sessions))
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(closing, _CLOSE_TIMEOUT_S)
    for session in sessions:
        if isinstance(session.codec, GatewayCodec):
            result.rechunked += session.codec.reassembler.rechunked
    return result
