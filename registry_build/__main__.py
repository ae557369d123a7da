"""``python -m registry_build [--tools DIR ...] [--out FILE] [--quiet]``."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from registry_build.build import build_registry, serialize_artifact

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m registry_build", description=__doc__)
    parser.add_argument(
        "--tools",
        action="append",
        type=Path,
        help="a folder of tool folders (repeatable; default: tools/)",
    )
    parser.add_argument("--out", type=Path, default=Path("build/tool_registry.json"))
    parser.add_argument("--quiet", action="store_true", help="print only errors")
    args = parser.parse_args(argv)
    roots = [p.resolve() for p in (args.tools or [Path("tools")])]

    result = build_registry(roots)
    if result.artifact is None:
        print(f"registry build failed: {len(result.errors)} error(s)", file=sys.stderr)
        for error in result.errors:
            print(f"  {error}", file=sys.stderr)
        return 1
    out: Path = args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_bytes(serialize_artifact(result.artifact))
    os.replace(tmp, out)  # atomic: a running gateway never reads half an artifact
    if not args.quiet:
        names = ", ".join(t["toolId"] for t in result.artifact["tools"])
        print(f"built {out} version {result.artifact['version']}: {result.tool_count} tools")
        print(f"  {names}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
