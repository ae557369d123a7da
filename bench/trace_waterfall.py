"""``scripts/bench trace``: one real trace of a voice turn with a tool call, drawn as a waterfall.

A gateway in this process, its spans kept by the SDK's in-memory exporter; the local model
running a script (an utterance → it calls ``care_api_get_appointments`` → it answers from the
result); the example care API (``fakes.care_api``) behind that HTTP tool; a client speaking 20 ms
PCM16 frames over a real socket. The finished spans are drawn one row each, indented by depth,
on the time axis of the session, into ``docs/img/trace-voice-turn.png``, and written as JSON
beside the run's other output (``build/bench/trace-voice-turn.json``), with the ``traceparent``
the API received.
"""

from __future__ import annotations

import asyncio
import json
import math
import tempfile
import time
from datetime import date
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import SecretStr

from fakes.care_api import FakeCareApi
from gateway.app import build_server
from gateway.config import Settings
from gateway.observability import Tracing
from gateway.registry import load_registry
from gateway.security import TokenAuthority

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]
SECRET = "bench-trace-secret-0123456789abcdef"
RATE = 16000
SCENARIO = {
    "name": "a voice turn with an HTTP tool",
    "steps": [
        {
            "expect": {"utterance": True},
            "reply": {
                "tools": [
                    {"name": "care_api_get_appointments", "arguments": {"status": "scheduled"}}
                ]
            },
        },
        {
            "expect": {"tool_results": ["care_api_get_appointments"]},
            "reply": {"say": "You have three appointments this week; the next is on Monday."},
        },
    ],
}


def _tone(ms: int) -> bytes:
    samples = RATE * ms // 1000
    return b"".join(
        int(8000 * math.sin(2 * math.pi * 440 * n / RATE)).to_bytes(2, "little", signed=True)
        for n in range(samples)
    )


async def _voice_turn(url: str, token: str) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.ws_connect(f"{url}/v1/session", headers={"Authorization": f"Bearer {token}"}) as ws,
    ):
        start = {"type": "session.start", "mode": "voice", "audio": {"input_rate": RATE}}
        await ws.send_str(json.dumps(start))
        pcm = _tone(800) + bytes(RATE * 2 * 700 // 1000)
        step = RATE * 2 * 20 // 1000
        spoken = False
        async for message in ws:
            if message.type != aiohttp.WSMsgType.TEXT:
                continue
            event = json.loads(message.data)
            if event["type"] == "session.started" and not spoken:
                spoken = True
                for at in range(0, len(pcm), step):  # paced as a microphone would send it
                    await ws.send_bytes(pcm[at : at + step])
                    await asyncio.sleep(0.02)
            elif event["type"] == "response.done" and event.get("text"):
                await ws.send_str(json.dumps({"type": "session.end"}))
            elif event["type"] == "session.ended":
                return


async def _record(work: Path) -> tuple[tuple[ReadableSpan, ...], str]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    scenario = work / "scenario.json"
    scenario.write_text(json.dumps(SCENARIO))
    async with FakeCareApi(jwt_secret=SECRET, today=date(2030, 1, 7)) as api:
        settings = Settings(
            auth="jwt",
            auth_secret=SecretStr(SECRET),
            data_dir=work / "data",
            provider="local",
            local_pace=1.0,
            local_scenario=scenario,
        )
        registry = load_registry(
            ROOT / "build" / "tool_registry.json", environ={"CARE_API_URL": api.base_url}
        )
        server = build_server(settings, registry=registry, tracing=Tracing(provider))
        runner = server.runner()
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        authority = TokenAuthority(SECRET, max_lifetime_s=3600)
        token = authority.mint_user("alice", now=time.time(), ttl_s=600)
        try:
            await asyncio.wait_for(_voice_turn(f"http://127.0.0.1:{port}", token), 30)
        finally:
            await runner.cleanup()
        traceparent = api.requests[0].headers.get("traceparent", "") if api.requests else ""
    provider.shutdown()
    return exporter.get_finished_spans(), traceparent


def _label(span: ReadableSpan) -> str:
    attrs = span.attributes or {}
    detail = next(
        (
            str(attrs[key])
            for key in (
                "gateway.tool.id",
                "gateway.turn.input",
                "gateway.response.status",
                "gateway.provider",
            )
            if key in attrs
        ),
        "",
    )
    return f"{span.name} ({detail})" if detail and detail not in span.name else span.name


def _draw(spans: tuple[ReadableSpan, ...], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ids = {s.context.span_id: s for s in spans if s.context is not None}

    def depth(span: ReadableSpan) -> int:
        d, parent = 0, span.parent
        while parent is not None and parent.span_id in ids:
            d, parent = d + 1, ids[parent.span_id].parent
        return d

    ordered = sorted(spans, key=lambda s: (s.start_time or 0, depth(s)))
    origin = min(s.start_time or 0 for s in spans)
    fig, ax = plt.subplots(figsize=(12, 0.42 * len(ordered) + 1.2))
    colors = {0: "#4c72b0", 1: "#55a868", 2: "#dd8452", 3: "#c44e52"}
    for row, span in enumerate(ordered):
        start = ((span.start_time or 0) - origin) / 1e6
        length = max(((span.end_time or 0) - (span.start_time or 0)) / 1e6, 0.4)
        level = depth(span)
        ax.barh(row, length, left=start, color=colors.get(level, "#8172b2"), height=0.6)
        ax.text(start + length + 15, row, f"{length:.1f} ms", va="center", fontsize=8)
        ax.set_yticks(range(len(ordered)))
    # Left-aligned, indented by depth: the tree reads from the labels.
    ax.set_yticklabels(
        [" " * 4 * depth(s) + ("└ " if depth(s) else "") + _label(s) for s in ordered],
        fontsize=8,
        ha="left",
        family="monospace",
    )
    ax.tick_params(axis="y", pad=330)
    ax.invert_yaxis()
    ax.set_xlabel("ms since the session span began")
    ax.set_title("One voice turn with an HTTP tool call: the gateway's spans (in-memory exporter)")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(docs: Path, out: Path) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        spans, traceparent = asyncio.run(_record(Path(tmp)))
    # A response and a tool call are GenAI spans: named after the model and the tool.
    names = sorted({str((s.attributes or {}).get("gen_ai.operation.name", s.name)) for s in spans})
    required = {"gateway.session", "gateway.turn", "execute_tool", "chat"}
    if not required <= set(names) or not traceparent:
        print(f"trace: incomplete ({names}, traceparent {traceparent!r})")
        return 1
    image = docs.parent / "img" / "trace-voice-turn.png"
    _draw(spans, image)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = [
        {
            "name": s.name,
            "span_id": format(s.context.span_id, "016x") if s.context else None,
            "parent_id": format(s.parent.span_id, "016x") if s.parent else None,
            "duration_ms": ((s.end_time or 0) - (s.start_time or 0)) / 1e6,
            "attributes": dict(s.attributes or {}),
        }
        for s in spans
    ]
    (out / "trace-voice-turn.json").write_text(
        json.dumps({"traceparent_at_api": traceparent, "spans": rows}, indent=2)
    )
    print(f"trace: {len(spans)} spans → {image}; the API saw traceparent {traceparent}")
    return 0
