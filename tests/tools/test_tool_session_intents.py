"""The tools that act only through intents: end_voice_session, ignore_user,
remember_for_next_turn."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from tools._core import (
    EndVoiceSession,
    IntentType,
    SetPendingMessage,
    SuppressAudio,
    SuppressTranscript,
    ToolErrorType,
    ToolResponse,
)

RunTool = Callable[..., Awaitable[ToolResponse]]


@pytest.mark.parametrize("args", [{}, {"reason": "user said goodbye"}])
async def test_end_voice_session(run_tool: RunTool, args: dict[str, str]) -> None:
    response = await run_tool("end_voice_session", args)
    assert response.ok
    assert response.data == {"ending": True}
    assert response.intents == (EndVoiceSession(),)
    envelope = response.to_envelope({})
    assert envelope["intents"] == [{"type": "END_VOICE_SESSION"}]


async def test_ignore_user_defaults_to_ten_seconds(run_tool: RunTool) -> None:
    response = await run_tool("ignore_user", {})
    assert response.ok
    assert response.data == {"suppressed_ms": 10_000}
    assert response.intents == (
        SuppressAudio(duration_ms=10_000),
        SuppressTranscript(duration_ms=10_000),
    )


async def test_ignore_user_with_duration(run_tool: RunTool) -> None:
    response = await run_tool("ignore_user", {"duration_ms": 20_000, "reason": "on the phone"})
    assert response.data == {"suppressed_ms": 20_000}
    assert response.to_envelope({})["intents"] == [
        {"type": "SUPPRESS_AUDIO", "duration_ms": 20_000},
        {"type": "SUPPRESS_TRANSCRIPT", "duration_ms": 20_000},
    ]


async def test_remember_for_next_turn_queues_the_message(run_tool: RunTool) -> None:
    response = await run_tool(
        "remember_for_next_turn", {"message": "  Ask about dizziness after the new dose. "}
    )
    assert response.ok
    assert response.data == {"queued": True}
    assert response.intents == (SetPendingMessage("Ask about dizziness after the new dose."),)
    assert response.intent_names == [IntentType.SET_PENDING_MESSAGE.value]


async def test_remember_for_next_turn_refuses_a_blank_message(run_tool: RunTool) -> None:
    response = await run_tool("remember_for_next_turn", {"message": "   "})
    assert not response.ok
    assert response.error is not None
    assert response.error.type is ToolErrorType.VALIDATION
