"""``python -m bench SUBCOMMAND``: see ``scripts/bench --help``.

- ``registry``, ``gateway``: the tool registry and the gateway's own micro-benchmarks;
- ``relay``: latency added and CPU per frame pair, every target (``bench.suite.relay``);
  ``--provider gemini`` runs the older direct-vs-gateway bench on the Gemini fake;
- ``capacity``: the session ramp, knee, setup time, memory (``bench.suite.capacity``);
- ``dispatch``: tool dispatch overhead (``bench.dispatch.bench``);
- ``scale``: session setup and resume with Redis, relay CPU with Redis on and off, one worker
  against two (``bench.suite.scale``; needs ``redis-server``);
- ``all``: relay, capacity, dispatch, then the plots in ``docs/bench/`` (``bench.suite.all``);
- ``latency``: voice-to-voice latency added per audio path, OpenAI and Gemini fakes, against
  direct (``bench.latency.bench``); ``latency.png`` into ``--docs``.
- ``budgets``: what budgets cost with Redis: a charged response's added latency and relay
  CPU, budgets on against off, with an A/A row (``bench.budgets.bench``);
- ``setup``: session set-up time, the warm connection pool on against off, the upstream fake
  taking 200 ms to connect: a native session's start, a phone call's greeting, with an A/A
  row (``bench.setup.bench``; ``--sessions N`` per repetition, 50, ``--quick`` 5);
- ``trace``: one real trace of a voice turn with an HTTP tool call, drawn as a waterfall into
  ``docs/img/trace-voice-turn.png`` (``bench.trace_waterfall``).
- ``failover``: a voice session's failover from its first target to the next, per kind of fault
  (refused, 429, lost, stalls), ``--faults`` of each (``bench.failover.bench``);
  ``failover.png`` into ``--docs``.
- ``webrtc``: the WebRTC edge against ``/v1/session`` on one gateway and the OpenAI fake: added
  voice-to-voice latency with A/A rows, CPU per session, the session ramp; ``--memory``: RSS of
  ``--sessions`` (20) sessions held ``--minutes`` (10), and what is left after they close
  (``bench.webrtc``; into ``build/bench-webrtc/`` unless ``--out``).
- ``console``: what the operator console's live updates cost the relay: relay CPU per frame
  pair on one of two nodes on Redis, a console stream open on each node against none, with an
  A/A row (``bench.console``; ``--reps`` 5, ``--sessions N`` 50; into ``build/bench-console/``
  unless ``--out``).

``--quick`` shrinks every plan to a smoke run (1 rep, 3 s, 10 sessions).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from bench import gateway_bench, registry_bench

ROOT = Path(__file__).resolve().parent.parent
SUBCOMMANDS = [
    "registry",
    "gateway",
    "relay",
    "capacity",
    "dispatch",
    "scale",
    "all",
    "latency",
    "trace",
    "budgets",
    "setup",
    "failover",
    "webrtc",
    "console",
]


def _counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of counts: {text}") from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"session counts must be ≥ 1: {text}")
    return counts


def _targets(text: str) -> tuple[str, ...]:
    from bench.suite.targets import ALL_TARGETS

    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [name for name in names if name not in ALL_TARGETS]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown target(s) {unknown}; known: {ALL_TARGETS}")
    # direct is the reference of every "added" figure: always measured, first
    return tuple(dict.fromkeys(["direct", *names]))


def _with_baseline(targets: tuple[str, ...], baseline: Path | None) -> tuple[str, ...]:
    """Each baseline row right after ours when there is a baseline (``gateway_base`` always,
    ``gateway_compat_base`` with ``gateway_compat``); never without one."""
    from bench.suite.targets import BASELINE_ROWS

    rows = tuple(t for t in targets if t not in BASELINE_ROWS.values())
    if baseline is None:
        return rows
    if "gateway" not in rows:
        rows = (*rows, "gateway_base")
    with_base: list[str] = []
    for row in rows:
        with_base.append(row)
        if row in BASELINE_ROWS:
            with_base.append(BASELINE_ROWS[row])
    return tuple(with_base)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scripts/bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("target", choices=SUBCOMMANDS, help="what to measure")
    parser.add_argument("--out", type=Path, default=Path("build/bench"))
    parser.add_argument("--docs", type=Path, default=Path("docs/bench"), help="all, latency: plots")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1 rep, 3 s, 10 sessions")
    parser.add_argument(
        "--registry", type=Path, default=Path("build/tool_registry.json"), help="for gateway"
    )
    suite = parser.add_argument_group("relay, capacity and dispatch")
    suite.add_argument("--targets", type=_targets, help="comma-separated; default: all")
    suite.add_argument("--reps", type=int, help="relay: repetitions (default 3)")
    suite.add_argument("--levels", type=_counts, help="capacity: ramp, e.g. 25,50,100")
    suite.add_argument(
        "--baseline",
        metavar="REV",
        help="also run the gateway as it was at commit REV (row gateway_base, and "
        "gateway_compat_base beside gateway_compat), same load, same run",
    )
    failover = parser.add_argument_group("failover")
    failover.add_argument(
        "--faults", type=int, help="faults injected per kind (default 100; --quick 5)"
    )
    webrtc = parser.add_argument_group("webrtc")
    webrtc.add_argument(
        "--memory", action="store_true", help="the memory run (--sessions, --minutes) instead"
    )
    webrtc.add_argument("--minutes", type=float, help="--memory: how long (default 10)")
    webrtc.add_argument(
        "--parts", help="comma-separated, some of latency,cpu,ramp (default: all three)"
    )
    gemini = parser.add_argument_group("relay --provider gemini (the older bench)")
    gemini.add_argument("--provider", choices=["openai", "gemini"], default="openai")
    gemini.add_argument("--sessions", type=_counts, default=[1, 50], help="e.g. 1,50")
    gemini.add_argument("--fps", type=float, default=50.0)
    gemini.add_argument("--seconds", type=float, default=10.0)
    return parser


def _webrtc(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    out = Path("build/bench-webrtc") if args.out == parser.get_default("out") else args.out
    sessions = None
    if args.sessions is not parser.get_default("sessions"):  # given: one count
        if len(args.sessions) != 1:
            parser.error("webrtc: --sessions takes one count")
        sessions = args.sessions[0]
    if args.memory:
        from bench.webrtc import memory

        mplan = memory.MemoryPlan.quick() if args.quick else memory.MemoryPlan()
        if sessions is not None:
            mplan = dataclasses.replace(mplan, sessions=sessions)
        if args.minutes is not None:
            if args.minutes <= 0:
                parser.error("--minutes must be > 0")
            mplan = dataclasses.replace(mplan, minutes=args.minutes)
        return memory.main(out, mplan)
    from bench.webrtc import bench as webrtc_bench

    wplan = webrtc_bench.WebRtcPlan.quick() if args.quick else webrtc_bench.WebRtcPlan()
    if args.reps:
        wplan = dataclasses.replace(wplan, reps=args.reps)
    if sessions is not None:
        wplan = dataclasses.replace(wplan, cpu_sessions=sessions)
    if args.levels:
        wplan = dataclasses.replace(wplan, ramp_levels=tuple(args.levels))
    if args.parts:
        parts = tuple(part.strip() for part in args.parts.split(",") if part.strip())
        if not parts or set(parts) - {"latency", "cpu", "ramp"}:
            parser.error("--parts: some of latency,cpu,ramp")
        wplan = dataclasses.replace(wplan, parts=parts)
    return webrtc_bench.main(out, wplan)


def _console(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from bench.console import bench as console_bench

    out = Path("build/bench-console") if args.out == parser.get_default("out") else args.out
    plan = console_bench.ConsolePlan.quick() if args.quick else console_bench.ConsolePlan()
    if args.sessions is not parser.get_default("sessions"):  # given: one count
        if len(args.sessions) != 1:
            parser.error("console: --sessions takes one count")
        plan = dataclasses.replace(plan, sessions=args.sessions[0])
    if args.reps:
        plan = dataclasses.replace(plan, reps=args.reps)
    return console_bench.main(out, plan)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.reps is not None and args.reps < 1:
        parser.error("--reps must be ≥ 1")
    if args.target == "registry":
        return registry_bench.main(args.out)
    if args.target == "trace":
        from bench import trace_waterfall

        return trace_waterfall.main(args.docs, args.out)
    if args.target == "gateway":
        return gateway_bench.main(args.registry, args.out)
    if args.target == "budgets":
        from bench.budgets import bench as budgets_bench

        quick = args.quick
        return budgets_bench.main(
            args.reps or (1 if quick else 5), 10 if quick else 50, 3.0 if quick else 30.0, args.out
        )
    if args.target == "setup":
        from bench.setup import bench as setup_bench

        setup_plan = setup_bench.SetupPlan.quick() if args.quick else setup_bench.SetupPlan()
        if args.sessions is not parser.get_default("sessions"):  # given: one count
            if len(args.sessions) != 1:
                parser.error("setup: --sessions takes one count")
            setup_plan = dataclasses.replace(setup_plan, sessions=args.sessions[0])
        if args.reps:
            setup_plan = dataclasses.replace(setup_plan, reps=args.reps)
        return setup_bench.main(args.out, setup_plan)
    if args.target == "failover":
        from bench.failover import bench as failover_bench

        fplan = failover_bench.FailoverPlan.quick() if args.quick else failover_bench.FailoverPlan()
        if args.faults is not None:
            if args.faults < 1:
                parser.error("--faults must be ≥ 1")
            fplan = dataclasses.replace(fplan, faults=args.faults)
        return failover_bench.main(args.out, args.docs, fplan)
    if args.target == "webrtc":
        return _webrtc(parser, args)
    if args.target == "console":
        return _console(parser, args)
    if args.target == "relay" and args.provider == "gemini":
        from bench.relay import bench as relay_bench

        return relay_bench.main(
            args.sessions, args.fps, args.seconds, args.reps or 3, args.out, "gemini"
        )
    baseline = None
    if args.baseline is not None:
        if args.target not in ("relay", "capacity", "dispatch"):
            parser.error("--baseline goes with relay, capacity or dispatch")
        from bench.baseline import prepare_baseline

        try:
            baseline = prepare_baseline(ROOT, args.baseline)
        except ValueError as error:
            parser.error(str(error))
    if args.target == "relay":
        from bench.suite import relay as suite_relay

        plan = suite_relay.RelayPlan.quick() if args.quick else suite_relay.RelayPlan()
        if args.targets:
            plan = dataclasses.replace(plan, targets=args.targets)
        if args.reps:
            plan = dataclasses.replace(plan, reps=args.reps)
        plan = dataclasses.replace(plan, targets=_with_baseline(plan.targets, baseline))
        return suite_relay.main(ROOT, args.out, plan, baseline)
    if args.target == "capacity":
        from bench.suite import capacity as suite_capacity

        cplan = suite_capacity.CapacityPlan.quick() if args.quick else suite_capacity.CapacityPlan()
        if args.targets:
            cplan = dataclasses.replace(cplan, targets=args.targets)
        if args.levels:
            cplan = dataclasses.replace(cplan, levels=tuple(args.levels))
        cplan = dataclasses.replace(cplan, targets=_with_baseline(cplan.targets, baseline))
        return suite_capacity.main(ROOT, args.out, cplan, baseline)
    if args.target == "dispatch":
        from bench.dispatch import bench as dispatch_bench

        return dispatch_bench.main(args.out, quick=args.quick, baseline=baseline)
    if args.target == "latency":
        from bench.latency import bench as latency_bench

        lplan = latency_bench.LatencyPlan.quick() if args.quick else latency_bench.LatencyPlan()
        return latency_bench.main(args.out, args.docs, lplan)
    if args.target == "scale":
        from bench.suite import scale as suite_scale

        splan = suite_scale.ScalePlan.quick() if args.quick else suite_scale.ScalePlan()
        return suite_scale.main(ROOT, args.out, splan)
    from bench.suite import all as suite_all

    return suite_all.main(ROOT, args.out, args.docs, quick=args.quick)


if __name__ == "__main__":
    sys.exit(main())
