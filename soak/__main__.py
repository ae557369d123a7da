"""``python -m soak [--minutes N] [--sessions N] [--fault-rate R] …``: one soak run; the report
and the plots go to ``build/soak/`` (``--out``); ``--docs-plots`` writes the plots into
``docs/soak/`` instead, to refresh the documentation's pictures. Exit status 1 on any invariant
violation, 2 when the fleet could not be set up."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from soak.config import DOCS_PLOTS, SoakConfig
from soak.runner import run_soak


def parse(argv: Sequence[str] | None) -> SoakConfig:
    defaults = SoakConfig()
    parser = argparse.ArgumentParser(prog="scripts/soak", description=__doc__)
    parser.add_argument("--minutes", type=float, default=defaults.minutes)
    parser.add_argument("--sessions", type=int, default=defaults.sessions)
    parser.add_argument(
        "--fault-rate", type=float, default=defaults.fault_rate, help="faults per minute"
    )
    parser.add_argument(
        "--calm-fraction",
        type=float,
        default=defaults.calm_fraction,
        help="the first part of the run has no faults (the latency baseline)",
    )
    parser.add_argument(
        "--restart-every-s",
        type=float,
        default=defaults.restart_every_s,
        help="SIGTERM one node this often, alternating (0: never)",
    )
    parser.add_argument("--no-redis-restart", action="store_true")
    parser.add_argument(
        "--seed",
        type=int,
        default=defaults.seed,
        help="fixes the schedule: which fault at which second, aimed at which session slot",
    )
    parser.add_argument(
        "--out", type=Path, default=defaults.out, help="folder for the report and the logs"
    )
    plots = parser.add_mutually_exclusive_group()
    plots.add_argument(
        "--plots", metavar="DIR", help="folder for the plots, or 'none' (default: --out's)"
    )
    plots.add_argument(
        "--docs-plots",
        action="store_true",
        help="write the plots into docs/soak/, refreshing the documentation's pictures "
        "(tracked files)",
    )
    parser.add_argument("--sample-every-s", type=float, default=defaults.sample_every_s)
    args = parser.parse_args(argv)
    try:
        return SoakConfig(
            minutes=args.minutes,
            sessions=args.sessions,
            fault_rate=args.fault_rate,
            calm_fraction=args.calm_fraction,
            restart_every_s=args.restart_every_s,
            redis_restart=not args.no_redis_restart,
            seed=args.seed,
            out=args.out,
            plots=_plots_folder(args.plots, args.docs_plots, args.out),
            sample_every_s=args.sample_every_s,
        )
    except ValueError as error:
        parser.error(str(error))


def _plots_folder(plots: str | None, docs_plots: bool, out: Path) -> Path | None:
    if docs_plots:
        return DOCS_PLOTS
    if plots is None:
        return out
    return None if plots == "none" else Path(plots)


def main(argv: Sequence[str] | None = None) -> int:
    config = parse(argv)
    loop_factory: Callable[[], asyncio.AbstractEventLoop] = asyncio.new_event_loop
    try:
        import uvloop

        loop_factory = uvloop.new_event_loop
    except ImportError:  # pragma: no cover (uvloop is a dependency where it builds)
        pass
    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            report = runner.run(run_soak(config))
    except RuntimeError as error:
        print(f"soak: the fleet could not run: {error}", file=sys.stderr)
        return 2
    print((config.out / "report.md").read_text())
    return 1 if report["violations"] else 0


if __name__ == "__main__":
    sys.exit(main())
