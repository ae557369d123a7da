"""A client process of ``scripts/bench webrtc``: ``python -m bench.webrtc.worker SPEC.json``.

The aiortc peers are heavy (Opus both ways, DTLS/SRTP, a decoder thread each), so the bench runs
its lanes in worker processes, never in its own. A worker opens its lanes (``concurrency`` at a
time), writes ``ready_path``, waits for ``go_path`` (the common start on ``time.monotonic``,
which every process of the machine shares) and plays every lane from there, lane ``i`` shifted
by its ``offset_s``; then it closes them and writes ``result_path`` (JSON: one record per lane,
and the lanes that did not open). Every wait is bounded: the go by ``GO_TIMEOUT_S``, the run by
the schedule's end plus ``GRACE_S``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import av
import numpy as np
from aiortc import rtp as aiortc_rtp

from bench.latency.audio import utterance
from bench.latency.turns import TurnSchedule
from bench.webrtc.lanes import Lane, LaneConfig, LaneRun, WebRtcLane, WsLane
from bench.webrtc.mic import RATE

__all__ = ["GRACE_S", "WorkerSpec", "main", "record", "write_whole"]

GO_TIMEOUT_S = 300.0
GRACE_S = 2.0


class WorkerSpec:
    def __init__(self, data: dict[str, Any]) -> None:
        self.gateway_url: str = data["gateway_url"]
        self.lanes = [LaneConfig(**lane) for lane in data["lanes"]]
        self.schedule = TurnSchedule(**data["schedule"])
        self.concurrency: int = data.get("concurrency", 4)
        self.ready_path = Path(data["ready_path"])
        self.go_path = Path(data["go_path"])
        self.result_path = Path(data["result_path"])


def write_whole(path: Path, text: str) -> None:
    """``text`` into ``path`` at once (written aside, then renamed): a reader that sees the
    file sees all of it."""
    aside = path.with_name(path.name + ".tmp")
    aside.write_text(text)
    aside.rename(path)


def _ms(values: list[float | None]) -> list[float | None]:
    return [None if value is None else round(value * 1000, 3) for value in values]


def record(run: LaneRun, warmup: int) -> dict[str, Any]:
    """A lane's run as JSON: per measured turn its latency (ms) or ``None``, and its counts."""
    lags = sorted(run.send_lags_s)
    result: dict[str, Any] = {
        "kind": run.config.kind,
        "group": run.config.group,
        "latencies_ms": _ms(run.tracker.latencies_s(warmup)),
        "counts": run.tracker.counts(warmup),
        "setup_s": round(run.setup_s, 3),
        "frames_in": run.frames_in,
        "send_lag_p99_ms": round(lags[int(0.99 * (len(lags) - 1))] * 1000, 2) if lags else None,
        "send_lag_max_ms": round(lags[-1] * 1000, 2) if lags else None,
        "closed_early": run.closed_early,
        "events": dict(run.events),
    }
    if run.rtp_tracker is not None:
        result["rtp_latencies_ms"] = _ms(run.rtp_tracker.latencies_s(warmup))
    return result


async def _open_all(lanes: list[Lane], concurrency: int) -> list[str]:
    gate = asyncio.Semaphore(concurrency)
    failures: list[str] = []

    async def open_one(lane: Lane) -> None:
        async with gate:
            try:
                await lane.open()
            except Exception as error:
                failures.append(f"{lane.run.config.group}: {type(error).__name__}: {error}")
                await lane.close()
                raise

    results = await asyncio.gather(*(open_one(lane) for lane in lanes), return_exceptions=True)
    opened = [lane for lane, result in zip(lanes, results, strict=True) if result is None]
    lanes[:] = opened
    return failures


async def _wait_for_go(path: Path) -> float:
    async with asyncio.timeout(GO_TIMEOUT_S):
        while True:
            with contextlib.suppress(OSError, ValueError):  # renamed into place: whole
                return float(await asyncio.to_thread(path.read_text))
            await asyncio.sleep(0.02)


async def run(spec: WorkerSpec) -> dict[str, Any]:
    audio = utterance("pcm16", RATE, spec.schedule.speech_ms)
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        lanes: list[Lane] = []
        for config in spec.lanes:
            if config.kind == "webrtc":
                lanes.append(WebRtcLane(config, spec.gateway_url, spec.schedule, audio, http))
            else:
                lanes.append(WsLane(config, spec.gateway_url, spec.schedule, audio))
        failures = await _open_all(lanes, spec.concurrency)
        ready = {"opened": len(lanes), "failures": failures}
        write_whole(spec.ready_path, json.dumps(ready))
        start = await _wait_for_go(spec.go_path)
        duration = spec.schedule.duration_s
        try:
            plays = [
                lane.play(start + lane.run.config.offset_s, start + duration + GRACE_S)
                for lane in lanes
            ]
            async with asyncio.timeout(duration + 3 * GRACE_S + max(0.0, start - time.monotonic())):
                await asyncio.gather(*plays)
        finally:
            await asyncio.gather(*(lane.close() for lane in lanes), return_exceptions=True)
    warmup = spec.schedule.warmup
    return {
        "pid": os.getpid(),
        "lanes": [record(lane.run, warmup) for lane in lanes],
        "open_failures": failures,
    }


def _audio_level_dbov(frame: av.AudioFrame) -> int:
    """``aiortc.rtp.compute_audio_level_dbov`` (RFC 6465's level, sent with every packet) in
    numpy: aiortc's loops over the samples in Python, the largest single cost of a sender."""
    samples = np.frombuffer(bytes(frame.planes[0]), "<i2").astype(np.float64)
    rms = math.sqrt(float(np.dot(samples, samples)) / (frame.samples * 32767 * 32767))
    return round(min(max(20 * math.log10(rms), -127), 0)) if rms > 0 else -127


def main(argv: list[str]) -> int:
    spec = WorkerSpec(json.loads(Path(argv[0]).read_text()))
    # The client is the instrument: it is made cheaper where it costs without measuring
    # anything (the gateway's own senders keep aiortc's loop).
    aiortc_rtp.compute_audio_level_dbov = _audio_level_dbov
    # asyncio's own loop: its clock is time.monotonic (uvloop's is in whole, cached ms)
    result = asyncio.run(run(spec))
    write_whole(spec.result_path, json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
