"""The fakes' fault modes (``fakes.faults``): ``fail_next`` counts down and then the fake
serves normally, what it refuses to mean, and the fault flags of each fake's command line, end
to end. What a client of each fake sees is in each fake's folder (``test_*_fake_faults.py``)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import openai
import pytest
import websockets
from cli_kit import served
from fault_kit import (
    TIMEOUT_S,
    chat_text,
)
from websockets.exceptions import InvalidMessage

from fakes.chat.cli import _parse_args as chat_args
from fakes.faults import FaultKind, Refuse, UpstreamFaults
from fakes.gemini_live.server import _parse_args as gemini_args
from fakes.openai_realtime.server import _parse_command_line as openai_args

# The pure record and the command lines ---------------------------------------------------------


def test_fail_next_counts_down_then_switches_the_mode_off() -> None:
    seen: list[FaultKind] = []
    faults = UpstreamFaults(on_applied=seen.append)
    faults.fail_next("refuse", 1)
    faults.fail_next("status", 2, status=429)
    outcomes = [faults.take_connection_fault() for _ in range(4)]
    assert outcomes == [Refuse(), 429, 429, None]  # refuse first, while both are on
    assert (faults.refuse, faults.status, faults.remaining) == (False, None, {})
    faults.fail_next("stall_mid", 1, after=2)
    assert not faults.take_stall_mid(1)  # not yet: a count is used up only by a cut
    assert faults.take_stall_mid(2)
    assert not faults.take_stall_mid(3)
    faults.stall_first_output = True  # set directly: on until switched off
    assert all([faults.take_stall_first() for _ in range(3)])
    assert faults.take_whole_answer_stall()
    faults.clear()
    assert not faults.take_stall_first()
    assert not faults.take_whole_answer_stall()
    assert faults.applied == {"refuse": 1, "status": 2, "stall_mid": 1, "stall_first": 4}
    assert seen == ["refuse", "status", "status", "stall_mid", *["stall_first"] * 4]


def test_fail_next_refuses_what_it_cannot_mean() -> None:
    faults = UpstreamFaults()
    with pytest.raises(ValueError, match="status="):
        faults.fail_next("status", 1)
    with pytest.raises(ValueError, match="status must be one of"):
        faults.fail_next("status", 1, status=418)
    with pytest.raises(ValueError, match="after="):
        faults.fail_next("stall_first", 1, after=3)
    with pytest.raises(ValueError, match=">= 0"):
        faults.fail_next("stall_mid", 1, after=-1)
    with pytest.raises(ValueError, match="count"):
        faults.fail_next("refuse", 0)
    with pytest.raises(ValueError, match="status must be one of"):
        UpstreamFaults(status=200)
    assert faults.remaining == {}
    assert not faults.applied


def test_each_command_line_takes_the_fault_flags(tmp_path: Path) -> None:
    *_, faults = openai_args(["--fault", "503", "--fault-count", "2"])
    assert (faults.status, faults.remaining) == (503, {"status": 2})
    *_, faults = gemini_args(["--cert-dir", str(tmp_path), "--fault", "stall-mid"])
    assert (faults.stall_mid_response_after, faults.remaining) == (1, {})
    *_, faults = chat_args(["--fault", "stall-mid", "--stall-after", "4", "--fault-count", "1"])
    assert (faults.stall_mid_response_after, faults.remaining) == (4, {"stall_mid": 1})
    *_, faults = chat_args(["--fault", "refuse"])
    assert faults.refuse
    *_, faults = chat_args(["--fault", "429", "--retry-after-s", "7"])
    assert (faults.status, faults.retry_after_s) == (429, 7)
    *_, faults = chat_args(["--fault", "stall-first"])
    assert faults.stall_first_output
    *_, faults = chat_args([])
    off = (faults.refuse, faults.status, faults.stall_first_output, faults.stall_mid_response_after)
    assert off == (False, None, False, None)
    for wrong in (
        ["--fault", "teapot"],
        ["--fault", "418"],
        ["--fault-count", "2"],
        ["--fault", "refuse", "--fault-count", "0"],
        ["--fault", "stall-mid", "--stall-after", "-1"],
    ):
        with pytest.raises(SystemExit):
            chat_args(wrong)


# The command lines, end to end -----------------------------------------------------------------


async def test_the_chat_command_line_fails_the_next_request() -> None:
    args = ("--port", "0", "--fault", "503", "--fault-count", "1")
    listening = rb"listening (http://127\.0\.0\.1:\d+/v1)\n"
    async with served("fakes.chat", *args, listening=listening) as cli:
        base_url = cli.match.group(1).decode()
        async with openai.AsyncOpenAI(base_url=base_url, api_key="k", max_retries=0) as client:
            with pytest.raises(openai.InternalServerError):
                await chat_text(client)
            assert await chat_text(client) == "hello"
        assert await cli.terminate() == 0


async def test_the_openai_command_line_refuses_the_next_connection() -> None:
    args = ("--port", "0", "--fault", "refuse", "--fault-count", "1")
    listening = rb"listening (ws://127\.0\.0\.1:\d+/v1)\n"
    async with served("fakes.openai_realtime", *args, listening=listening) as cli:
        url = cli.match.group(1).decode() + "/realtime?model=gpt-realtime"
        async with asyncio.timeout(TIMEOUT_S):
            with pytest.raises(InvalidMessage):
                async with websockets.connect(url):
                    pass
            async with websockets.connect(url) as ws:
                assert json.loads(await ws.recv())["type"] == "session.created"
        assert await cli.terminate() == 0
