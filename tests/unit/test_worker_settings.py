"""``GATEWAY_WORKERS``: more than one worker needs Redis (they share sessions through it) and a
fixed port (they share it); ``auto`` is one per core."""

from __future__ import annotations

import os

import pytest
from pydantic import SecretStr, ValidationError

from gateway.config import Settings

REDIS = SecretStr("redis://127.0.0.1:6379/0")


@pytest.fixture(autouse=True)
def _no_gateway_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.upper().startswith("GATEWAY_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("GATEWAY_AUTH", "none")


def test_one_worker_needs_nothing_more() -> None:
    assert Settings(workers="1").worker_count() == 1


def test_auto_is_one_per_core() -> None:
    assert Settings(workers="auto", redis_url=REDIS).worker_count() == (os.cpu_count() or 1)


def test_several_workers_need_redis() -> None:
    with pytest.raises(ValidationError, match="GATEWAY_WORKERS above 1 needs GATEWAY_REDIS_URL"):
        Settings(workers="2")


@pytest.mark.parametrize("ports", [{"port": 0}, {"metrics_port": 0}])
def test_several_workers_need_fixed_ports(ports: dict[str, int]) -> None:
    with pytest.raises(ValidationError, match="needs a fixed GATEWAY_PORT"):
        Settings(workers="2", redis_url=REDIS, **ports)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["0", "-1", "two", "1000"])
def test_a_bad_count_is_refused(bad: str) -> None:
    with pytest.raises(ValidationError, match="workers"):
        Settings(workers=bad)
