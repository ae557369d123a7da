"""Fixtures shared by the whole suite: built registries over fixture tool folders."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
import uvloop
from redis_kit import RedisServer, running_redis
from registry_kit import write_artifact

from gateway.registry import Registry, load_registry

REPO = Path(__file__).resolve().parent.parent


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> Mapping[str, Callable[[], asyncio.AbstractEventLoop]]:
    """asyncio's loop for every test; a test marked ``both_loops`` runs on uvloop too (the loop
    ``gateway serve`` uses: its transports are not asyncio's classes)."""
    if item.get_closest_marker("both_loops") is not None:
        return {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}
    return {"asyncio": asyncio.new_event_loop}


FIXTURES = REPO / "tests" / "fixtures"


def build_and_load(roots: list[Path], out: Path) -> Registry:
    return load_registry(write_artifact(roots, out))


@pytest.fixture(scope="session")
def project_artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's tools, built; load it with the environment a test needs (HTTP tools)."""
    return write_artifact([REPO / "tools"], tmp_path_factory.mktemp("registry") / "project.json")


@pytest.fixture(scope="session")
def runner_registry(tmp_path_factory: pytest.TempPathFactory) -> Registry:
    out = tmp_path_factory.mktemp("registry") / "runner_registry.json"
    return build_and_load([FIXTURES / "runner_tools"], out)


@pytest.fixture(scope="session")
def project_registry(tmp_path_factory: pytest.TempPathFactory) -> Registry:
    out = tmp_path_factory.mktemp("registry") / "tool_registry.json"
    return build_and_load([REPO / "tools"], out)


@pytest.fixture(scope="session")
def full_registry(tmp_path_factory: pytest.TempPathFactory) -> Registry:
    """The project's tools plus the runner fixtures (slow, crashing, failing tools)."""
    out = tmp_path_factory.mktemp("registry") / "full_registry.json"
    return build_and_load([REPO / "tools", FIXTURES / "runner_tools"], out)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    """One real redis-server for the whole run (tests keep apart by key prefix)."""
    with running_redis(tmp_path_factory.mktemp("redis")) as server:
        yield server
