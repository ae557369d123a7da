"""``python -m gateway chat`` against a live gateway: the newcomer's first tool call."""

from __future__ import annotations

import asyncio
import io
import os
import sys
from collections.abc import Callable

from harness import SECRET, Gateway, token

from gateway.chat_client import run_chat

PARIS = '/tool get_current_time {"timezone":"Europe/Paris"}'
DENTIST = '/tool calendar_create_event {"title":"Dentist","start":"2026-12-01T10:00:00+01:00"}'


def lines(*given: str) -> Callable[[], str]:
    queue = [line + "\n" for line in given]
    return lambda: queue.pop(0) if queue else ""


def ws_url(gateway: Gateway) -> str:
    return gateway.url.replace("http://", "ws://") + "/v1/session"


async def test_chat_runs_a_tool_and_a_confirmation(gateway: Gateway) -> None:
    out = io.StringIO()
    code = await run_chat(
        ws_url(gateway), token("newcomer"), read_line=lines(PARIS, DENTIST, "/approve"), out=out
    )
    text = out.getvalue()
    assert code == 0
    assert text.startswith("connected: session sess_")
    assert '  [tool] get_current_time {"timezone":"Europe/Paris"}\n' in text
    assert "  [tool ok] get_current_time (" in text
    assert '"timezone":"Europe/Paris"' in text.split("[tool ok] get_current_time", 1)[1]
    assert "assistant> Tool results: get_current_time=" in text
    assert "  [tool needs confirmation] calendar_create_event: CONFIRMATION_REQUIRED" in text
    assert "  [confirmation approved] conf_" in text
    assert "  [tool ok] calendar_create_event (" in text
    assert text.rstrip().endswith("session ended (client): chat client quit")
    assert gateway.decisions("calendar_create_event") == [
        ("calendar_create_event", "confirmation_pending"),
        ("calendar_create_event", "confirmed"),
    ]


async def test_chat_survives_errors_and_a_session_the_server_ends(gateway: Gateway) -> None:
    out = io.StringIO()
    code = await run_chat(
        ws_url(gateway),
        token("newcomer"),
        read_line=lines("/approve conf_nope", "/error boom", "/fail", "after the end"),
        out=out,
    )
    text = out.getvalue()
    assert "  [error] confirmation_not_found: no open confirmation conf_nope" in text
    assert "  [error] upstream_error: the model reported an error: boom" in text
    assert "(response failed)" in text
    assert "session ended (upstream_failed)" in text
    assert code == 1  # the session did not end the way sessions should


async def test_chat_reports_a_refused_connection(gateway: Gateway) -> None:
    out = io.StringIO()
    code = await run_chat(ws_url(gateway), "not-a-jwt", read_line=lines(), out=out)
    assert code == 2
    assert "refused the connection (HTTP 401)" in out.getvalue()


async def test_the_cli_mints_a_token_and_chats(gateway: Gateway) -> None:
    env = {**os.environ, "GATEWAY_AUTH_SECRET": SECRET}
    env.pop("GATEWAY_TOKEN", None)
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        "chat",
        "--url",
        ws_url(gateway),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    stdout, stderr = await asyncio.wait_for(process.communicate((PARIS + "\n").encode()), 30)
    assert process.returncode == 0, stderr.decode()
    text = stdout.decode()
    assert "  [tool ok] get_current_time (" in text
    assert "Europe/Paris" in text
