"""``--baseline REV``: the gateway as it was at another commit, beside today's, in the same run.

A detached git worktree of ``REV`` under ``build/baseline/<sha>`` (made once, reused), with its
own tool registry built by its own ``registry_build``. Its gateway runs with that worktree as the
working directory, so ``python -m gateway`` imports the worktree's packages (the current
directory comes before the editable install on ``sys.path``); the dependencies are this
environment's. The row is ``gateway_base``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

__all__ = ["prepare_baseline"]


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=root, check=True, capture_output=True, text=True, timeout=120
    )
    return done.stdout.strip()


def prepare_baseline(root: Path, rev: str) -> Path:
    """The worktree of ``rev`` (a commit, branch or tag), ready to serve; raises
    ``ValueError`` for a revision git does not know."""
    try:
        sha = _git(root, "rev-parse", "--verify", f"{rev}^{{commit}}")
    except subprocess.CalledProcessError:
        raise ValueError(f"--baseline: git knows no commit {rev!r}") from None
    tree = root / "build" / "baseline" / sha[:12]
    if not (tree / "gateway" / "__init__.py").is_file():
        _git(root, "worktree", "prune")
        tree.parent.mkdir(parents=True, exist_ok=True)
        _git(root, "worktree", "add", "--force", "--detach", str(tree), sha)
    registry = tree / "build" / "tool_registry.json"
    build = ["registry_build", "--tools", "tools", "--out", str(registry), "--quiet"]
    subprocess.run(
        [sys.executable, "-m", *build],
        cwd=tree,
        check=True,
        timeout=120,
    )
    return tree
