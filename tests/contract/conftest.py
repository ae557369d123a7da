"""Fixtures of the transport contract: each test runs once per transport and event loop (ids:
``asyncio-openai``, ``uvloop-chat``…), against its own fake started on 127.0.0.1 port 0 and
stopped after the test."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from contract_kit import (
    BEHAVIOURS,
    TIMEOUT_S,
    OpenSubject,
    Subject,
    TransportUnderTest,
    check_well_formed,
    config,
)
from transports_under_test import TRANSPORTS

from transports.base import Mode, Transport


@pytest.fixture(scope="session")
def cert_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where a TLS fake keeps its self-signed certificate (made once, reused)."""
    return tmp_path_factory.mktemp("contract-certs")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "behaviour(name): the contract behaviour a test checks; it runs for every transport "
        "whose entry does not say (with the reason) that it does not apply",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Each behaviour runs on the transports it applies to; the others are not generated (not
    skipped: the suite never skips, and ``test_what_does_not_apply_says_why`` lists them)."""
    if "under_test" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("behaviour")
    assert marker is not None, "every contract test names its behaviour"
    behaviour = marker.args[0]
    assert behaviour in BEHAVIOURS, behaviour
    entries = [entry for entry in TRANSPORTS if behaviour not in entry.not_applicable]
    metafunc.parametrize("under_test", entries, ids=[entry.name for entry in entries])


@pytest.fixture
async def upstream(under_test: TransportUnderTest, cert_dir: Path) -> AsyncIterator[object]:
    async with under_test.start_upstream(cert_dir) as running:
        yield running


@pytest.fixture
async def open_subject(
    under_test: TransportUnderTest, upstream: object
) -> AsyncIterator[OpenSubject]:
    """``await open_subject(mode)``: a new transport connected to the fake in that mode (with a
    tool declared), its events recorded; every one is checked well formed and closed after."""
    subjects: list[Subject] = []

    async def open_one(mode: Mode) -> Subject:
        transport: Transport = under_test.build(upstream)
        await transport.connect(config(mode))
        subjects.append(Subject(under_test, upstream, transport, mode))
        return subjects[-1]

    yield open_one
    for subject in subjects:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(subject.run.close(), TIMEOUT_S)
    for subject in subjects:
        check_well_formed(subject.events)


@pytest.fixture
def build(under_test: TransportUnderTest, upstream: object) -> Callable[[], Transport]:
    """A new transport pointed at the fake, not connected (to read its capabilities)."""
    return lambda: under_test.build(upstream)
