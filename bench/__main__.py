"""``python -m bench SUBCOMMAND``: see ``scripts/bench --help``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench import gateway_bench, registry_bench


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench")
    parser.add_argument("target", choices=["registry", "gateway"], help="what to measure")
    parser.add_argument("--out", type=Path, default=Path("build/bench"))
    parser.add_argument(
        "--registry", type=Path, default=Path("build/tool_registry.json"), help="for gateway"
    )
    args = parser.parse_args(argv)
    if args.target == "registry":
        return registry_bench.main(args.out)
    if args.target == "gateway":
        return gateway_bench.main(args.registry, args.out)
    return 2


if __name__ == "__main__":
    sys.exit(main())
