"""``python -m bench.latency``: ``scripts/bench latency`` with a choice of phases and upstreams.

``scripts/bench latency`` runs every phase on both upstreams (``bench.latency.bench``); this entry
runs a part of it, e.g. only the carriers' phones: ``python -m bench.latency --phases carriers``
(with ``--quick``, a smoke run). Needs the ``bench`` extra for the plot (``scripts/bench``
installs it; without it the run goes on, with no plot).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from bench.latency.bench import PHASES, LatencyPlan, main
from bench.latency.stats import UPSTREAMS

__all__ = ["run"]


def _names(known: tuple[str, ...]) -> Callable[[str], tuple[str, ...]]:
    """A comma-separated choice among ``known``, kept in ``known``'s order."""

    def parse(text: str) -> tuple[str, ...]:
        names = tuple(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
        unknown = [name for name in names if name not in known]
        if unknown or not names:
            raise argparse.ArgumentTypeError(f"choose among {', '.join(known)}: {text!r}")
        return tuple(name for name in known if name in names)

    return parse


def run(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.latency", description=__doc__)
    parser.add_argument(
        "--phases", type=_names(tuple(PHASES)), default=tuple(PHASES), help="main,carriers"
    )
    parser.add_argument(
        "--upstreams", type=_names(UPSTREAMS), default=UPSTREAMS, help="openai,gemini"
    )
    parser.add_argument("--quick", action="store_true", help="20 turns per lane, not 200")
    parser.add_argument("--out", type=Path, default=Path("build/bench"))
    parser.add_argument("--docs", type=Path, default=Path("docs/bench"), help="for latency.png")
    args = parser.parse_args(argv)
    changes = {"phases": args.phases, "upstreams": args.upstreams}
    plan = LatencyPlan.quick(**changes) if args.quick else LatencyPlan(**changes)
    return main(args.out, args.docs, plan)


if __name__ == "__main__":
    sys.exit(run())
