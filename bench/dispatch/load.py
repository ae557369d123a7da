"""The sessions of ``scripts/bench dispatch``: one dispatching session and the echo background.

Three ways to reach the fake (``Endpoint.protocol``):

- ``openai`` (target ``direct``): the fake's own protocol, ``input_audio_buffer.append`` with
  base64 audio. Nothing stands between the fake and this client, so the client answers each
  tool call itself (a ``function_call_output`` and a ``response.create`` on ``response.done``):
  the physical limit of a dispatch;
- ``gateway``: the gateway's client protocol, ``session.start`` at 24 kHz in and out, then binary
  PCM16 frames both ways; the gateway runs the tool and answers the model;
- ``pcm`` (Pipecat): raw binary PCM16 both ways; Pipecat's registered handler answers.

Every session sends one 20 ms frame per period on an absolute schedule (a late send does not push
the later ones back). The dispatching session makes every ``every``-th frame a marker frame
(``fakes.openai_realtime.dispatch.marker_frame``): the fake answers it with a whole
call of the no-op tool instead of its echo. The background sessions send frames and count the
echo that comes back: from ``goload`` (``bench/goload``, a compiled load generator that leaves
the shared core to the fake) when it builds, else from this process. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from bench.goload_runner import run_goload
from fakes.openai_realtime.dispatch import marker_frame

__all__ = [
    "BackgroundResult",
    "DispatchPlan",
    "DispatcherResult",
    "Endpoint",
    "Protocol",
    "run_background",
    "run_dispatcher",
    "run_go_background",
]

Protocol = Literal["openai", "gateway", "pcm"]

FRAME_BYTES = 960  # 20 ms of 24 kHz mono PCM16: no resampling anywhere
_OPEN_TIMEOUT_S = 10.0
_PARALLEL_OPENS = 10
_GATEWAY_START = orjson.dumps(
    {
        "type": "session.start",
        "mode": "voice",
        "audio": {"input_rate": 24000, "output_rate": 24000},
    }
).decode()
_SILENCE = bytes(FRAME_BYTES)
_MARKER = marker_frame(FRAME_BYTES)


@dataclass(frozen=True)
class Endpoint:
    target: str  # direct, gateway, pipecat
    protocol: Protocol
    url: str
    api_key: str = "sk-bench"


@dataclass(frozen=True)
class DispatchPlan:
    dispatches: int  # marker frames sent, warm-up included
    every: int  # one frame in this many is a marker
    fps: float = 50.0

    @property
    def frames(self) -> int:
        return self.dispatches * self.every

    @property
    def seconds(self) -> float:
        return self.frames / self.fps


@dataclass
class DispatcherResult:
    markers_sent: int = 0
    answered_by_client: int = 0  # direct: the outputs this client sent
    events: Counter[str] = field(default_factory=Counter)  # errors, tool results, closes


@dataclass
class BackgroundResult:
    sessions: int = 0
    sent: int = 0
    back: int = 0  # frames' worth of echo received
    setup_s: float = 0.0
    events: Counter[str] = field(default_factory=Counter)
    # goload's own CPU, in cores over its window: not ours to count as "other processes"
    loadgen_cores: float = 0.0

    @property
    def lost(self) -> int:
        return max(0, self.sent - self.back)


def _encode(protocol: Protocol, frame: bytes) -> str | bytes:
    if protocol == "openai":
        audio = base64.b64encode(frame).decode("ascii")
        return orjson.dumps({"type": "input_audio_buffer.append", "audio": audio}).decode()
    return frame


async def _open(endpoint: Endpoint) -> ClientConnection:
    headers = (
        {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.protocol == "openai" else {}
    )
    ws = await connect(
        endpoint.url,
        additional_headers=headers,
        compression=None,
        max_size=None,
        ping_interval=None,
        open_timeout=_OPEN_TIMEOUT_S,
        close_timeout=2.0,
    )
    try:
        async with asyncio.timeout(_OPEN_TIMEOUT_S):
            if endpoint.protocol == "openai":
                await _expect(ws, "session.created")
            elif endpoint.protocol == "gateway":
                await ws.send(_GATEWAY_START)
                await _expect(ws, "session.started")
        return ws
    except BaseException:
        await ws.close()
        raise


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


async def _close(endpoint: Endpoint, ws: ClientConnection) -> None:
    with contextlib.suppress(ConnectionClosed, OSError, TimeoutError):
        async with asyncio.timeout(5.0):
            if endpoint.protocol == "gateway":
                await ws.send('{"type":"session.end"}')
            await ws.close()


async def _paced(ws: ClientConnection, frames: list[str | bytes], start: float, fps: float) -> None:
    loop = asyncio.get_running_loop()
    for index, message in enumerate(frames):
        delay = start + index / fps - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        await ws.send(message)


# The dispatching session -------------------------------------------------------------------------


def _calls_of(event: dict[str, Any]) -> list[str]:
    output = (event.get("response") or {}).get("output") or ()
    return [str(item["call_id"]) for item in output if item.get("type") == "function_call"]


async def _answer_calls(ws: ClientConnection, result: DispatcherResult) -> None:
    """``direct``: this client is the whole application; it answers each call at once."""
    async for message in ws:
        if isinstance(message, bytes):
            continue
        event = orjson.loads(message)
        kind = event.get("type")
        if kind == "response.done":
            for call_id in _calls_of(event):
                item = {"type": "function_call_output", "call_id": call_id, "output": "{}"}
                await ws.send(orjson.dumps({"type": "conversation.item.create", "item": item}))
                await ws.send('{"type":"response.create"}')
                result.answered_by_client += 1
        elif kind == "error":
            result.events[f"error:{(event.get('error') or {}).get('code')}"] += 1


async def _observe(ws: ClientConnection, result: DispatcherResult) -> None:
    """``gateway`` and ``pcm``: the target answers; its client only counts what it hears."""
    async for message in ws:
        if isinstance(message, bytes):
            continue
        event = orjson.loads(message)
        kind = event.get("type")
        if kind == "tool.finished":
            result.events[f"tool.finished:{'ok' if event.get('ok') else 'failed'}"] += 1
        elif kind == "error":
            result.events[f"error:{event.get('code')}"] += 1
        elif kind == "session.ended":
            result.events[f"session.ended:{event.get('reason')}"] += 1


async def run_dispatcher(
    endpoint: Endpoint, plan: DispatchPlan, settled: Callable[[], Awaitable[None]]
) -> DispatcherResult:
    """One session: ``plan.frames`` frames at ``plan.fps``, every ``plan.every``-th a marker;
    the session stays open until ``settled`` returns (the last calls are answered meanwhile)."""
    result = DispatcherResult()
    try:
        ws = await _open(endpoint)
    except (OSError, TimeoutError, RuntimeError, ConnectionClosed) as error:
        result.events[f"open_failed:{type(error).__name__}"] += 1
        return result
    listen = _answer_calls if endpoint.protocol == "openai" else _observe
    reader = asyncio.create_task(listen(ws, result))
    marker, silence = _encode(endpoint.protocol, _MARKER), _encode(endpoint.protocol, _SILENCE)
    frames = [
        marker if index % plan.every == plan.every - 1 else silence for index in range(plan.frames)
    ]
    try:
        start = asyncio.get_running_loop().time() + 0.05
        async with asyncio.timeout(plan.seconds + 30.0):
            await _paced(ws, frames, start, plan.fps)
        result.markers_sent = plan.dispatches
        await settled()
    except ConnectionClosed:
        result.events["closed_while_sending"] += 1
    finally:
        reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, ConnectionClosed):
            await reader
        await _close(endpoint, ws)
    return result


# The background ------------------------------------------------------------------------------


async def _count_echo(endpoint: Endpoint, ws: ClientConnection, result: BackgroundResult) -> None:
    received = 0  # bytes of echo
    try:
        async for message in ws:
            if isinstance(message, bytes):
                received += len(message)
                continue
            if endpoint.protocol != "openai":
                continue
            event = orjson.loads(message)
            if event.get("type") == "response.output_audio.delta":
                received += len(event["delta"]) * 3 // 4
    except ConnectionClosed:
        result.events["closed_while_receiving"] += 1
    finally:
        result.back += received // FRAME_BYTES


async def run_background(
    endpoint: Endpoint,
    sessions: int,
    stop: asyncio.Event,
    ready: asyncio.Event,
    fps: float = 50.0,
    grace_s: float = 1.0,
) -> BackgroundResult:
    """``sessions`` echo sessions at ``fps`` from when all are open (then ``ready`` is set) until
    ``stop`` is set; their starts spread over one period."""
    result = BackgroundResult(sessions=sessions)
    loop = asyncio.get_running_loop()
    gate = asyncio.Semaphore(_PARALLEL_OPENS)

    async def open_one() -> ClientConnection:
        async with gate:
            return await _open(endpoint)

    began = loop.time()
    opening = [asyncio.create_task(open_one()) for _ in range(sessions)]
    done = await asyncio.gather(*opening, return_exceptions=True)
    sockets = [ws for ws in done if isinstance(ws, ClientConnection)]
    for failure in (d for d in done if isinstance(d, BaseException)):
        result.events[f"open_failed:{type(failure).__name__}"] += 1
    result.setup_s = loop.time() - began
    silence = _encode(endpoint.protocol, _SILENCE)

    async def send(ws: ClientConnection, start: float) -> None:
        try:
            while not stop.is_set():
                delay = start + result_sent[ws] / fps - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                await ws.send(silence)
                result_sent[ws] += 1
        except ConnectionClosed:
            result.events["closed_while_sending"] += 1

    result_sent: Counter[ClientConnection] = Counter()
    start = loop.time() + 0.05
    senders = [
        asyncio.create_task(send(ws, start + index / max(1, len(sockets)) / fps))
        for index, ws in enumerate(sockets)
    ]
    receivers = [asyncio.create_task(_count_echo(endpoint, ws, result)) for ws in sockets]
    ready.set()
    try:
        await stop.wait()
        await asyncio.gather(*senders)
        await asyncio.sleep(grace_s)
    finally:
        for task in (*senders, *receivers):
            task.cancel()
        await asyncio.gather(*senders, *receivers, return_exceptions=True)
        result.sent = sum(result_sent.values())
        await asyncio.gather(*(_close(endpoint, ws) for ws in sockets))
    return result


async def run_go_background(
    binary: Path,
    endpoint: Endpoint,
    sessions: int,
    seconds: float,
    ready: asyncio.Event,
    cpu: int | None,
) -> BackgroundResult:
    """``sessions`` echo sessions from ``goload`` for one second of warm-up then ``seconds``;
    ``ready`` is set when its measured window begins."""
    loop = asyncio.get_running_loop()
    args = ["load", "-url", endpoint.url, "-proto", endpoint.protocol, "-c", str(sessions)]
    args += ["-rate", "50", "-dur", f"{seconds:.2f}", "-warmup", "50", "-grace", "1"]
    # Pipecat cuts its output into chunks of its own: count bytes, not stamped frames.
    args += ["-match", "bytes" if endpoint.protocol == "pcm" else "stamp"]
    args += ["-timeout", f"{seconds + 120:.0f}"]
    if endpoint.protocol == "openai":
        args += ["-header", f"Authorization: Bearer {endpoint.api_key}"]

    def window_started() -> None:  # on goload's reader thread
        loop.call_soon_threadsafe(ready.set)

    report = await asyncio.to_thread(
        run_goload,
        binary,
        args,
        on_window_start=window_started,
        on_window_end=lambda: None,
        timeout_s=seconds + 150,
        cpu=cpu,
    )
    ready.set()  # even when the window never began: the caller is not left waiting
    setup_ms = report.setup_ms("p50")
    cpu_s, window_s = report.loadgen_cpu_s, report.window_s
    events = Counter(
        {
            "errors": report.errors,
            "connect_failed": report.connect_failed,
            "mismatched": report.mismatched,
        }
    )
    return BackgroundResult(
        sessions=sessions,
        sent=report.sent,
        back=report.received,
        setup_s=0.0 if setup_ms is None else setup_ms / 1000,
        events=+events,
        loadgen_cores=cpu_s / window_s if cpu_s is not None and window_s else 0.0,
    )
