"""``scripts/bench gateway``: what the gateway adds on top of the model, measured side by side.

One process, the embedded local model at full speed (``local_pace=0``), a real socket on a free
loopback port. Each gateway measurement is paired with the same work done directly on a
``LocalTransport`` (no socket, no session), so the difference is the gateway's own cost:

- text turn: ``text.send`` → ``response.done`` through the gateway vs ``send_text`` →
  ``ResponseDone`` on the transport;
- tool turn: ``/tool get_current_time`` → the reply with its result (decide, validate, run,
  audit, two responses) vs the same directly on the transport with the runner in between;
- voice uplink: 500 frames of 20 ms (10 s of speech and silence) relayed per frame vs fed to the
  transport directly;
- session start, and turns per second with 50 concurrent sessions.

The client (aiohttp) runs in the same process, so its cost is included in the gateway numbers.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from gateway.app import build_server
from gateway.audio import silence, tone
from gateway.clock import SystemClock
from gateway.config import Settings
from gateway.observability import configure_logging
from gateway.registry import load_registry
from gateway.toolrun import Caller, MemoryAuditSink, ResultCache, ToolCall, ToolRunner
from transports.base import ToolResult, UpstreamConfig
from transports.events import ResponseDone, ToolCallsRequested, UpstreamEvent
from transports.local import LocalBrain, LocalTransport

__all__ = ["main"]

SECRET = "bench-secret-0123456789abcdef-0123456789"
TURNS = 1000
FRAMES = 500
CONCURRENT = 50
TURNS_EACH = 10
TOOL = '/tool get_current_time {"timezone":"Europe/Paris"}'


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50": statistics.median(ordered) * 1000,
        "p95": ordered[int(len(ordered) * 0.95) - 1] * 1000,
        "n": len(ordered),
    }


async def _start_gateway(registry_path: Path, data_dir: Path) -> tuple[str, web.AppRunner]:
    settings = Settings(
        auth="none",
        registry=registry_path,
        data_dir=data_dir,
        local_pace=0.0,
        client_events_per_s=10_000,
        client_events_burst=10_000,
        log_level="error",
    )
    server = build_server(settings, audit=MemoryAuditSink())
    runner = server.runner()
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return f"ws://127.0.0.1:{runner.addresses[0][1]}/v1/session", runner


async def _until(ws: aiohttp.ClientWebSocketResponse, kind: str, text_prefix: str = "") -> None:
    while True:
        msg = await ws.receive(timeout=10)
        if msg.type != aiohttp.WSMsgType.TEXT:
            continue
        event = json.loads(msg.data)
        if event["type"] == kind and str(event.get("text", "")).startswith(text_prefix):
            return


async def _gateway_turns(url: str, text: str, reply_prefix: str) -> list[float]:
    async with aiohttp.ClientSession() as http, http.ws_connect(url) as ws:
        await ws.send_json({"type": "session.start", "mode": "text"})
        await _until(ws, "session.started")
        samples = []
        for _ in range(TURNS):
            started = time.perf_counter()
            await ws.send_json({"type": "text.send", "text": text})
            await _until(ws, "response.done", reply_prefix)
            samples.append(time.perf_counter() - started)
        return samples


async def _next_done(events: Any) -> UpstreamEvent:
    async for event in events:
        if isinstance(event, ResponseDone | ToolCallsRequested):
            return event
    raise RuntimeError("the transport stopped")


async def _direct_turns(registry_path: Path, data_dir: Path, *, tool: bool) -> list[float]:
    registry = load_registry(registry_path)
    clock = SystemClock()
    runner = ToolRunner(
        registry, data_dir=data_dir, audit=MemoryAuditSink(), clock=clock, cache=ResultCache(clock)
    )
    caller = Caller(session_id="bench", user_id="bench", roles=(), mode="text", turn=1)
    transport = LocalTransport(LocalBrain(), pace=0.0)
    await transport.connect(UpstreamConfig(mode="text", instructions="", tools=()))
    events = transport.events().__aiter__()
    samples = []
    for _ in range(TURNS):
        started = time.perf_counter()
        await transport.send_text(TOOL if tool else "hello")
        event = await _next_done(events)
        if isinstance(event, ToolCallsRequested):
            await _next_done(events)  # the tool-call response's own end
            call = event.calls[0]
            outcome = await runner.run(ToolCall(call.call_id, call.name, call.arguments), caller)
            await transport.send_tool_results(
                [ToolResult(call.call_id, call.name, outcome.envelope)]
            )
            await _next_done(events)
        samples.append(time.perf_counter() - started)
    await transport.close()
    return samples


def _speech_frames() -> list[bytes]:
    frames: list[bytes] = []
    pattern = tone(440, 600, 16000) + silence(400, 16000)  # a 600 ms utterance a second
    for _ in range(10):
        frames.extend(pattern[i : i + 640] for i in range(0, len(pattern), 640))
    return frames[:FRAMES]


async def _gateway_uplink(url: str, frames: list[bytes]) -> float:
    async with aiohttp.ClientSession() as http, http.ws_connect(url) as ws:
        await ws.send_json({"type": "session.start", "mode": "voice"})
        await _until(ws, "session.started")
        started = time.perf_counter()
        for frame in frames:
            await ws.send_bytes(frame)
        await ws.send_json({"type": "ping", "id": "end"})
        while True:  # the pong comes after every frame before it was handled
            msg = await ws.receive(timeout=30)
            if msg.type == aiohttp.WSMsgType.TEXT and json.loads(msg.data).get("id") == "end":
                break
        return (time.perf_counter() - started) / len(frames)


async def _direct_uplink(frames: list[bytes]) -> float:
    transport = LocalTransport(LocalBrain(), pace=0.0)
    await transport.connect(UpstreamConfig(mode="voice", instructions="", tools=()))
    started = time.perf_counter()
    for frame in frames:
        await transport.send_audio(frame)
    elapsed = (time.perf_counter() - started) / len(frames)
    await transport.close()
    return elapsed


async def _session_starts(url: str, count: int = 100) -> list[float]:
    samples = []
    async with aiohttp.ClientSession() as http:
        for _ in range(count):
            started = time.perf_counter()
            async with http.ws_connect(url) as ws:
                await ws.send_json({"type": "session.start", "mode": "text"})
                await _until(ws, "session.started")
                samples.append(time.perf_counter() - started)
                await ws.send_json({"type": "session.end"})
    return samples


async def _concurrent(url: str) -> float:
    async def one(http: aiohttp.ClientSession) -> None:
        async with http.ws_connect(url) as ws:
            await ws.send_json({"type": "session.start", "mode": "text"})
            await _until(ws, "session.started")
            for _ in range(TURNS_EACH):
                await ws.send_json({"type": "text.send", "text": TOOL})
                await _until(ws, "response.done", "Tool results")

    async with aiohttp.ClientSession() as http:
        started = time.perf_counter()
        await asyncio.gather(*(one(http) for _ in range(CONCURRENT)))
        return CONCURRENT * TURNS_EACH / (time.perf_counter() - started)


async def run(registry_path: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-gateway-") as tmp:
        data = Path(tmp)
        url, runner = await _start_gateway(registry_path, data)
        try:
            frames = _speech_frames()
            results = {
                "text_turn_gateway_ms": _ms(await _gateway_turns(url, "hello", "You said")),
                "text_turn_direct_ms": _ms(await _direct_turns(registry_path, data, tool=False)),
                "tool_turn_gateway_ms": _ms(await _gateway_turns(url, TOOL, "Tool results")),
                "tool_turn_direct_ms": _ms(await _direct_turns(registry_path, data, tool=True)),
                "uplink_frame_gateway_us": await _gateway_uplink(url, frames) * 1e6,
                "uplink_frame_direct_us": await _direct_uplink(frames) * 1e6,
                "session_start_ms": _ms(await _session_starts(url)),
                "tool_turns_per_s_50_sessions": await _concurrent(url),
            }
        finally:
            await runner.cleanup()
    return results


def render(r: dict[str, Any]) -> str:
    def pair(label: str, key: str) -> list[str]:
        g, d = r[f"{key}_gateway_ms"], r[f"{key}_direct_ms"]
        return [
            f"{label:<34} gateway p50 {g['p50']:6.2f} ms  p95 {g['p95']:6.2f} ms | "
            f"direct p50 {d['p50']:6.2f} ms | gateway adds {g['p50'] - d['p50']:.2f} ms",
        ]

    lines = pair(f"text turn (n={TURNS})", "text_turn") + pair(
        f"tool turn (n={TURNS})", "tool_turn"
    )
    gw, direct = r["uplink_frame_gateway_us"], r["uplink_frame_direct_us"]
    lines.append(
        f"{'voice uplink, per 20 ms frame':<34} gateway {gw:7.1f} µs | direct {direct:7.1f} µs"
        f" | gateway adds {gw - direct:.1f} µs ({(gw - direct) / 20_000 * 100:.2f}% of a core"
        " per live stream)"
    )
    s = r["session_start_ms"]
    lines.append(
        f"{'session start (connect → started)':<34} p50 {s['p50']:.2f} ms  p95 {s['p95']:.2f} ms"
    )
    lines.append(
        f"{f'tool turns/s, {CONCURRENT} concurrent sessions':<34} "
        f"{r['tool_turns_per_s_50_sessions']:.0f}"
    )
    return "\n".join(lines)


def main(registry_path: Path, out_dir: Path) -> int:
    configure_logging("console", "warning")
    results = asyncio.run(run(registry_path))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "gateway.json").write_text(json.dumps(results, indent=2) + "\n")
    print(render(results))
    return 0
