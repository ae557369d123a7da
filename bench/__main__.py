"""``python -m bench SUBCOMMAND``: see ``scripts/bench --help``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench import registry_bench


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench")
    parser.add_argument("target", choices=["registry"], help="what to measure")
    parser.add_argument("--out", type=Path, default=Path("build/bench"))
    args = parser.parse_args(argv)
    if args.target == "registry":
        return registry_bench.main(args.out)
    return 2


if __name__ == "__main__":
    sys.exit(main())
