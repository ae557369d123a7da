"""``python -m tests.autobahn``: the Autobahn cases against our WebSocket code and two references.

``scripts/autobahn`` runs it. It prints a markdown table of verdicts (rows) per target
(columns: ours, ``websockets`` and aiohttp, each as server and as client), then every case that
is not OK per target, with the time each target took. ``--json FILE`` also writes every verdict
(``test_autobahn.py`` reads it). The exit status is 1 when a case of ours FAILED (the
references' failures are theirs).

Always a process of its own, never inside pytest's: kosoku puts its Autobahn shims (a
``pkg_resources`` of its own among them) at the front of ``sys.path``, and its native runtime
may wake a Python awaiter from one of its threads while the interpreter finalizes, which aborts
the process (SIGABRT: 4 runs in 100 on this machine, every verdict already written). So this
process flushes its output and ends with ``os._exit``: no finalization to race with.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import structlog
import uvloop

from tests.autobahn.autobahn_kit import (
    CASES,
    CLIENTS,
    SERVERS,
    VERDICTS,
    CaseVerdict,
    run_client,
    run_server,
    verdict_counts,
)

SIDES = ("server", "client")
TARGETS = [f"{name} {side}" for name in ("ours", "websockets", "aiohttp") for side in SIDES]
LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "uvloop": uvloop.new_event_loop,  # gateway serve's loop
    "asyncio": asyncio.new_event_loop,
}


async def run_target(target: str, cases: list[str]) -> list[CaseVerdict]:
    name, side = target.split(" ")
    if side == "server":
        return await run_server(SERVERS[name], cases)
    return await run_client(CLIENTS[name], name, cases)


def table(results: dict[str, list[CaseVerdict]]) -> str:
    columns = list(results)
    counts = {target: verdict_counts(results[target]) for target in columns}
    lines = [
        "| verdict | " + " | ".join(columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for verdict in VERDICTS:
        lines.append(
            f"| {verdict} | " + " | ".join(str(counts[t][verdict]) for t in columns) + " |"
        )
    return "\n".join(lines)


def as_json(results: dict[str, list[CaseVerdict]], took: dict[str, float]) -> str:
    return json.dumps(
        {
            target: {
                "seconds": round(took[target], 1),
                "counts": verdict_counts(verdicts),
                "cases": [{**dataclasses.asdict(case), "line": case.line()} for case in verdicts],
            }
            for target, verdicts in results.items()
        },
        indent=1,
    )


def main() -> int:
    parser = argparse.ArgumentParser(prog="scripts/autobahn", description=__doc__)
    parser.add_argument(
        "--cases",
        default=",".join(CASES),
        help="comma-separated case ids or globs (default: %(default)s)",
    )
    parser.add_argument(
        "--targets",
        default=",".join(TARGETS),
        help="comma-separated targets, e.g. 'ours server,ours client' (default: all six)",
    )
    parser.add_argument("--loop", choices=list(LOOPS), default="uvloop")
    parser.add_argument("--json", type=Path, help="also write every verdict to this file")
    args = parser.parse_args()
    cases = [case.strip() for case in args.cases.split(",") if case.strip()]
    targets = [target.strip() for target in args.targets.split(",") if target.strip()]
    unknown = [target for target in targets if target not in TARGETS]
    if unknown:
        parser.error(f"unknown targets {unknown}; choose from {TARGETS}")
    # Our sockets log every protocol violation a case provokes: only errors here.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    versions = ", ".join(
        f"{package} {version(package)}" for package in ("kosoku", "websockets", "aiohttp")
    )
    print(f"Autobahn cases {','.join(cases)} on {args.loop}, {versions}", file=sys.stderr)
    results: dict[str, list[CaseVerdict]] = {}
    took: dict[str, float] = {}
    for target in targets:
        started = time.monotonic()
        with asyncio.Runner(loop_factory=LOOPS[args.loop]) as runner:
            results[target] = runner.run(run_target(target, cases))
        took[target] = time.monotonic() - started
        counts = verdict_counts(results[target])
        print(f"  {target}: {counts} in {took[target]:.1f} s", file=sys.stderr)
    if args.json is not None:
        args.json.write_text(as_json(results, took))
    print(table(results))
    print()
    for target, verdicts in results.items():
        print(f"{target} ({len(verdicts)} cases, {took[target]:.1f} s), not OK:")
        for case in verdicts:
            if case.verdict != "OK":
                print(f"  {case.verdict:13} {case.line()}")
    print(f"\n{versions}, {args.loop}")
    ours_failed = any(
        case.verdict == "FAILED"
        for target, verdicts in results.items()
        if target.startswith("ours ")
        for case in verdicts
    )
    return 1 if ours_failed else 0


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)  # see the module docstring: no interpreter finalization
