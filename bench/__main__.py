"""``python -m bench SUBCOMMAND``: see ``scripts/bench --help``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench import gateway_bench, registry_bench, relay_bench


def _session_counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of counts: {text}") from None
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError(f"session counts must be ≥ 1: {text}")
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench")
    parser.add_argument("target", choices=["registry", "gateway", "relay"], help="what to measure")
    parser.add_argument("--out", type=Path, default=Path("build/bench"))
    parser.add_argument(
        "--registry", type=Path, default=Path("build/tool_registry.json"), help="for gateway"
    )
    relay = parser.add_argument_group("relay")
    relay.add_argument("--sessions", type=_session_counts, default=[1, 50], help="e.g. 1,50")
    relay.add_argument("--fps", type=float, default=50.0, help="frames per second per session")
    relay.add_argument("--seconds", type=float, default=10.0, help="measured, after warm-up")
    relay.add_argument("--reps", type=int, default=3, help="repetitions, interleaved")
    relay.add_argument(
        "--provider",
        choices=["openai", "gemini"],
        default="openai",
        help="whose fake (echo) is behind the gateway and the direct target",
    )
    args = parser.parse_args(argv)
    if args.target == "registry":
        return registry_bench.main(args.out)
    if args.target == "gateway":
        return gateway_bench.main(args.registry, args.out)
    if args.target == "relay":
        if args.reps < 1 or args.seconds <= 0 or args.fps <= 0:
            parser.error("relay needs --reps ≥ 1, --seconds > 0 and --fps > 0")
        return relay_bench.main(
            args.sessions, args.fps, args.seconds, args.reps, args.out, args.provider
        )
    return 2


if __name__ == "__main__":
    sys.exit(main())
