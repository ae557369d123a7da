"""No Docker engine runs here, so the Dockerfile is kept a checked mirror of scripts/serve."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = (REPO / "Dockerfile").read_text()
SETUP = (REPO / "scripts" / "_setup.sh").read_text()
SERVE = (REPO / "scripts" / "serve").read_text()


def _instructions(keyword: str) -> list[str]:
    joined = DOCKERFILE.replace("\\\n", " ")
    return [
        line.strip()[len(keyword) :].strip()
        for line in joined.splitlines()
        if line.strip().startswith(keyword + " ")
    ]


def test_every_copied_path_exists() -> None:
    copies = [c for c in _instructions("COPY") if not c.startswith("--from")]
    assert copies
    for copy in copies:
        *sources, _dest = shlex.split(copy)
        for source in sources:
            assert (REPO / source).exists(), f"Dockerfile copies missing {source}"


def test_it_builds_the_registry_like_the_scripts() -> None:
    build_runs = [r for r in _instructions("RUN") if "registry_build" in r]
    assert len(build_runs) == 1
    in_docker = shlex.split(build_runs[0])
    in_scripts = next(
        shlex.split(line) for line in SETUP.splitlines() if "-m registry_build" in line
    )
    assert [a for a in in_scripts if a != "--quiet"] == in_docker


def test_it_serves_like_scripts_serve() -> None:
    (cmd,) = _instructions("CMD")
    assert cmd == '["gateway", "serve"]'
    assert "python -m gateway serve" in SERVE
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["gateway"] == "gateway.__main__:main"


def test_two_stages_non_root_and_healthcheck() -> None:
    assert len(_instructions("FROM")) == 2
    assert re.search(r"^USER (?!root)\S+", DOCKERFILE, re.MULTILINE)
    (health,) = _instructions("HEALTHCHECK")
    assert "/healthz" in health
    # Handler paths in the artifact are absolute: both stages must use the same WORKDIR.
    workdirs = set(_instructions("WORKDIR"))
    assert workdirs == {"/app"}
