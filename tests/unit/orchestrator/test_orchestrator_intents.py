"""``IntentState``: suppression windows, ending a voice session, pending messages.

Time is a plain monotonic float (seconds); response ends are counted by calling
``response_ended``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gateway.orchestrator import IntentState
from tools._core import (
    EndVoiceSession,
    Intent,
    SetPendingMessage,
    SuppressAudio,
    SuppressTranscript,
    intent_from_dict,
)

T0 = 1000.0

# The two suppression channels, each with its intent type and its query.
Channel = tuple[
    type[SuppressAudio] | type[SuppressTranscript], Callable[[IntentState, float], bool]
]
AUDIO: Channel = (SuppressAudio, IntentState.audio_suppressed)
TRANSCRIPT: Channel = (SuppressTranscript, IntentState.transcript_suppressed)
CHANNELS = pytest.mark.parametrize(("channel", "other"), [(AUDIO, TRANSCRIPT), (TRANSCRIPT, AUDIO)])


# --------------------------------------------------------------------------------------------
# helpers


def applied(
    *intents: Intent,
    mode: str = "voice",
    response_active: bool = True,
    now: float = T0,
    state: IntentState | None = None,
) -> tuple[IntentState, list[str]]:
    state = state or IntentState()
    names = state.apply(intents, mode=mode, response_active=response_active, now=now)
    return state, names


def ends_until_session_ends(state: IntentState, limit: int = 10) -> int | None:
    """How many response ends until ``response_ended`` says the session must end."""
    for count in range(1, limit + 1):
        if state.response_ended():
            return count
    return None


def suppressed_after_ends(state: IntentState, channel: Channel, ends: int) -> list[bool]:
    """Suppressed now, then after each of ``ends`` response ends (time does not move)."""
    _, query = channel
    seen = [query(state, T0)]
    for _ in range(ends):
        state.response_ended()
        seen.append(query(state, T0))
    return seen


# --------------------------------------------------------------------------------------------
# a fresh state


def test_a_fresh_state_suppresses_nothing_and_never_ends() -> None:
    state = IntentState()
    assert not state.audio_suppressed(T0)
    assert not state.transcript_suppressed(T0)
    assert ends_until_session_ends(state) is None
    assert state.take_pending_messages() == []


# --------------------------------------------------------------------------------------------
# SUPPRESS_AUDIO / SUPPRESS_TRANSCRIPT


@CHANNELS
def test_suppression_without_duration_covers_the_active_response_and_the_reply(
    channel: Channel, other: Channel
) -> None:
    intent_type, _ = channel
    state, names = applied(intent_type(), response_active=True)
    assert names == [intent_type().type.value]
    assert suppressed_after_ends(state, channel, 3) == [True, True, False, False]
    assert suppressed_after_ends(state, other, 0) == [False]


@CHANNELS
def test_suppression_without_duration_and_no_active_response_covers_only_the_reply(
    channel: Channel, other: Channel
) -> None:
    intent_type, _ = channel
    state, _ = applied(intent_type(), response_active=False)
    assert suppressed_after_ends(state, channel, 2) == [True, False, False]
    assert suppressed_after_ends(state, other, 0) == [False]


@CHANNELS
def test_suppression_without_duration_does_not_expire_with_time(
    channel: Channel, other: Channel
) -> None:
    intent_type, query = channel
    state, _ = applied(intent_type())
    assert query(state, T0 + 3600.0)


@CHANNELS
def test_suppression_with_duration_covers_by_time(channel: Channel, other: Channel) -> None:
    intent_type, query = channel
    _, other_query = other
    state, _ = applied(intent_type(duration_ms=1500), response_active=True)
    assert query(state, T0)
    assert query(state, T0 + 1.499)
    assert not query(state, T0 + 1.5)
    assert not query(state, T0 + 60.0)
    assert not other_query(state, T0)


@CHANNELS
def test_suppression_with_duration_ignores_response_ends(channel: Channel, other: Channel) -> None:
    intent_type, query = channel
    state, _ = applied(intent_type(duration_ms=10_000))
    for _ in range(5):
        state.response_ended()
    assert query(state, T0 + 9.0)
    assert not query(state, T0 + 10.0)


@CHANNELS
def test_a_shorter_duration_never_shortens_the_window(channel: Channel, other: Channel) -> None:
    intent_type, query = channel
    state, _ = applied(intent_type(duration_ms=10_000))
    applied(intent_type(duration_ms=1000), now=T0 + 1.0, state=state)
    assert query(state, T0 + 9.9)
    assert not query(state, T0 + 10.0)


@CHANNELS
def test_a_later_duration_extends_the_window(channel: Channel, other: Channel) -> None:
    intent_type, query = channel
    state, _ = applied(intent_type(duration_ms=1000))
    applied(intent_type(duration_ms=1000), now=T0 + 0.5, state=state)
    assert query(state, T0 + 1.2)
    assert not query(state, T0 + 1.5)


@CHANNELS
def test_repeated_suppression_does_not_stack_response_counts(
    channel: Channel, other: Channel
) -> None:
    intent_type, _ = channel
    state, _ = applied(intent_type(), intent_type(), intent_type(), response_active=True)
    assert suppressed_after_ends(state, channel, 2) == [True, True, False]


@CHANNELS
def test_suppression_while_active_extends_a_remaining_count(
    channel: Channel, other: Channel
) -> None:
    intent_type, _ = channel
    state, _ = applied(intent_type(), response_active=False)  # 1 end left
    applied(intent_type(), response_active=True, state=state)  # now 2
    assert suppressed_after_ends(state, channel, 2) == [True, True, False]


@CHANNELS
def test_duration_and_count_windows_both_hold(channel: Channel, other: Channel) -> None:
    intent_type, query = channel
    state, _ = applied(intent_type(), intent_type(duration_ms=5000), response_active=False)
    state.response_ended()  # the count window is over ...
    assert query(state, T0 + 4.0)  # ... the time window is not
    assert not query(state, T0 + 5.0)


def test_audio_and_transcript_windows_are_independent() -> None:
    state, _ = applied(SuppressAudio(), SuppressTranscript(duration_ms=3000), response_active=True)
    state.response_ended()
    state.response_ended()
    assert not state.audio_suppressed(T0 + 1.0)
    assert state.transcript_suppressed(T0 + 1.0)
    assert not state.transcript_suppressed(T0 + 3.0)


# --------------------------------------------------------------------------------------------
# END_VOICE_SESSION


@pytest.mark.parametrize(("response_active", "ends"), [(True, 2), (False, 1)])
def test_end_voice_session_ends_after_the_reply(response_active: bool, ends: int) -> None:
    state, names = applied(EndVoiceSession(), mode="voice", response_active=response_active)
    assert names == ["END_VOICE_SESSION"]
    assert ends_until_session_ends(state) == ends


def test_end_voice_session_keeps_saying_end_once_due() -> None:
    state, _ = applied(EndVoiceSession(), response_active=False)
    assert state.response_ended()
    assert state.response_ended()


def test_end_voice_session_is_ignored_in_text_mode() -> None:
    state, names = applied(EndVoiceSession(), mode="text", response_active=True)
    assert names == []
    assert state.end_after is None
    assert ends_until_session_ends(state) is None


def test_text_mode_still_applies_the_other_intents() -> None:
    state, names = applied(
        EndVoiceSession(),
        SuppressTranscript(),
        SetPendingMessage("follow up"),
        mode="text",
        response_active=False,
    )
    assert names == ["SUPPRESS_TRANSCRIPT", "SET_PENDING_MESSAGE"]
    assert state.transcript_suppressed(T0)
    assert ends_until_session_ends(state) is None
    assert state.take_pending_messages() == ["follow up"]


def test_end_voice_session_with_suppression_counts_the_same_ends() -> None:
    state, _ = applied(EndVoiceSession(), SuppressAudio(), response_active=True)
    assert not state.response_ended()
    assert state.audio_suppressed(T0)
    assert state.response_ended()
    assert not state.audio_suppressed(T0)


# --------------------------------------------------------------------------------------------
# SET_PENDING_MESSAGE


def test_pending_messages_are_queued_in_order_and_taken_once() -> None:
    state, names = applied(SetPendingMessage("first"), SetPendingMessage("second"))
    applied(SetPendingMessage("third"), state=state, response_active=False)
    assert names == ["SET_PENDING_MESSAGE", "SET_PENDING_MESSAGE"]
    assert state.take_pending_messages() == ["first", "second", "third"]
    assert state.take_pending_messages() == []


def test_pending_messages_wait_for_the_next_turn_not_for_response_ends() -> None:
    state, _ = applied(SetPendingMessage("ask about dizziness"))
    for _ in range(3):
        state.response_ended()
    assert state.pending_messages == ["ask about dizziness"]
    assert state.take_pending_messages() == ["ask about dizziness"]


def test_a_message_queued_after_taking_waits_for_the_following_turn() -> None:
    state, _ = applied(SetPendingMessage("one"))
    assert state.take_pending_messages() == ["one"]
    applied(SetPendingMessage("two"), state=state)
    assert state.take_pending_messages() == ["two"]


# --------------------------------------------------------------------------------------------
# mixed, as a tool returns them


def test_intents_from_a_tool_envelope_apply_in_order() -> None:
    intents = [
        intent_from_dict(raw)
        for raw in (
            {"type": "SUPPRESS_AUDIO", "duration_ms": 2000},
            {"type": "SUPPRESS_TRANSCRIPT", "duration_ms": 2000},
            {"type": "SET_PENDING_MESSAGE", "message": "resume"},
            {"type": "END_VOICE_SESSION"},
        )
    ]
    state, names = applied(*intents, mode="voice", response_active=False)
    assert names == [
        "SUPPRESS_AUDIO",
        "SUPPRESS_TRANSCRIPT",
        "SET_PENDING_MESSAGE",
        "END_VOICE_SESSION",
    ]
    assert state.audio_suppressed(T0 + 1.0)
    assert state.transcript_suppressed(T0 + 1.0)
    assert not state.audio_suppressed(T0 + 2.0)
    assert state.take_pending_messages() == ["resume"]
    assert ends_until_session_ends(state) == 1
