"""The HTTP tool row of ``scripts/bench dispatch``: what the gateway adds to one call of an HTTP
API, against the same call made directly with aiohttp, from the same process to the same server.

The server is the example care API (``python -m fakes.care_api``, its own process, on the load
core with the rest of the bench). The measuring process (``python -m bench.dispatch.http_tool``,
alone on the relay core, on uvloop as ``gateway serve``) alternates, call after call:

- ``direct``: ``aiohttp.ClientSession.get`` of ``/v1/appointments?status=scheduled`` with the
  user's bearer token, the body read and parsed as JSON;
- ``http_tool``: ``ToolRunner.run`` of ``care_api_get_appointments {"status": "scheduled"}``,
  the path every model call takes: arguments parsed and validated, the HTTP tool's handler (the
  URL built, the shared client, the bounded read, the status mapped), the envelope, the
  ``resultAllowlist`` projection and the audit line (JSON, written to /dev/null as a gateway
  writes it to stderr).

Both keep their connections alive. Each call is timed with ``perf_counter_ns`` around its await;
the first ``WARMUP`` of each path are not kept. ``run_http_row`` (the dispatch bench calls it)
starts both processes and returns the durations; ``bench.dispatch.stats.summarize_http`` and
``render_http`` make the row.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import jwt
import orjson

from bench.dispatch.procs import ROOT, build_registry
from bench.relay.procs import ChildProcess, free_port, wait_for_log_line
from gateway.http_tools.shared_client import close_shared_http_client
from gateway.observability import configure_logging
from gateway.registry import load_registry
from gateway.toolrun import Caller, StructlogAuditSink, ToolCall, ToolRunner

__all__ = ["WARMUP", "run_http_row"]

WARMUP = 50  # calls per path not kept
TOOL = "care_api_get_appointments"
ARGS = {"status": "scheduled"}
_SECRET = "bench-care-api-secret-0123456789abcdef"
_TIMEOUT_S = 300.0


def start_care_api(log_dir: Path, timeout_s: float = 20.0) -> tuple[ChildProcess, str]:
    """The example care API on a free port; returns it and its base URL."""
    argv = [sys.executable, "-m", "fakes.care_api", "--port", str(free_port())]
    argv += ["--jwt-secret", _SECRET]
    child = ChildProcess("care API", argv, os.environ, log_dir / "care_api.log", cwd=ROOT)
    try:
        line = wait_for_log_line(child, "listening http://", timeout_s)
    except BaseException:
        child.stop()
        raise
    return child, line.split("listening ", 1)[1].strip()


def run_http_row(work: Path, calls: int, core: int | None) -> dict[str, list[float]]:
    """Start the API and the measuring process (pinned to ``core``); the kept durations (ms)
    of each path."""
    registry = build_registry(work / "http_registry.json")
    api, url = start_care_api(work)
    try:
        out = work / "http_durations.json"
        argv = [sys.executable, "-m", "bench.dispatch.http_tool", "--url", url]
        argv += ["--registry", str(registry), "--calls", str(calls), "--out", str(out)]
        if core is not None:
            argv += ["--core", str(core)]
        measurer = ChildProcess("HTTP tool measurer", argv, os.environ, work / "http.log", ROOT)
        deadline = time.monotonic() + _TIMEOUT_S
        while measurer.alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        if measurer.alive():
            measurer.stop()
            raise TimeoutError(f"the HTTP row did not finish in {_TIMEOUT_S:.0f} s")
        if not out.exists():
            raise RuntimeError(f"the HTTP row failed:\n{measurer.log_tail()}")
        durations: dict[str, list[float]] = json.loads(out.read_text())
        return durations
    finally:
        api.stop()


# -- the measuring process -------------------------------------------------------------------


def _quiet_json_logs() -> None:
    """The gateway's JSON logging, written to /dev/null: the audit line is formatted and
    written as in production, without flooding the bench's output."""
    configure_logging("json", "info")
    handler = logging.getLogger().handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(open(os.devnull, "w"))  # noqa: SIM115 (open for the process's life)


async def _measure(url: str, registry_path: Path, calls: int) -> dict[str, list[float]]:
    registry = load_registry(registry_path, environ={"CARE_API_URL": url})
    bearer = jwt.encode({"sub": "bench", "exp": int(time.time()) + 3600}, _SECRET, "HS256")
    headers = {"Authorization": f"Bearer {bearer}", "Accept": "application/json"}
    listing = f"{url}/v1/appointments"
    caller = Caller("bench", "bench", (), "text", auth_token=bearer)
    numbers = iter(range(1, 1 << 30))
    kept: dict[str, list[float]] = {"direct": [], "http_tool": []}
    connector = aiohttp.TCPConnector(limit=100, limit_per_host=20)
    with tempfile.TemporaryDirectory(prefix="bench-http-") as data_dir:
        runner = ToolRunner(registry, data_dir=Path(data_dir), audit=StructlogAuditSink())
        async with aiohttp.ClientSession(connector=connector) as http:

            async def direct() -> None:
                async with http.get(listing, params=ARGS, headers=headers) as got:
                    orjson.loads(await got.read())
                    if got.status != 200:
                        raise RuntimeError(f"direct: {got.status}")

            async def tool() -> None:
                outcome = await runner.run(ToolCall(f"b{next(numbers)}", TOOL, ARGS), caller)
                if not outcome.ok:
                    raise RuntimeError(f"http_tool: {outcome.envelope}")

            paths: dict[str, Callable[[], Awaitable[None]]] = {"direct": direct, "http_tool": tool}
            for index in range(WARMUP + calls):
                order = list(paths) if index % 2 == 0 else list(paths)[::-1]
                for name in order:
                    began = time.perf_counter_ns()
                    await paths[name]()
                    took_ms = (time.perf_counter_ns() - began) / 1e6
                    if index >= WARMUP:
                        kept[name].append(round(took_ms, 4))
        await close_shared_http_client()
    return kept


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.dispatch.http_tool")
    parser.add_argument("--url", required=True, help="the care API's base URL")
    parser.add_argument("--registry", type=Path, required=True)
    parser.add_argument("--calls", type=int, default=1000, help="kept calls per path")
    parser.add_argument("--out", type=Path, required=True, help="the durations, JSON")
    parser.add_argument("--core", type=int, help="pin this process to that core")
    args = parser.parse_args(argv)
    if args.core is not None:
        os.sched_setaffinity(0, {args.core})
    _quiet_json_logs()
    try:
        import uvloop
    except ImportError:  # gateway serve falls back to asyncio's loop too
        kept = asyncio.run(_measure(args.url, args.registry, args.calls))
    else:
        kept = uvloop.run(_measure(args.url, args.registry, args.calls))
    args.out.write_text(json.dumps(kept) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
