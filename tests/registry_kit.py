"""Building the tool registry in tests: the artifact of some tool folders, written to a file."""

from __future__ import annotations

from pathlib import Path

from registry_build import build_registry
from registry_build.build import serialize_artifact

__all__ = ["write_artifact"]


def write_artifact(roots: list[Path], out: Path) -> Path:
    """Build the registry of ``roots`` into ``out`` (any build error fails the test)."""
    result = build_registry(roots)
    assert result.artifact is not None, [str(e) for e in result.errors]
    out.write_bytes(serialize_artifact(result.artifact))
    return out
