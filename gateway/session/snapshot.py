"""A session as plain data and back: what a resume (here, or on another node) needs. Pure.

A session is its ``Profile`` (what the client chose at ``session.start``; the mode and the
instructions may change later) and its ``Conversation`` (the turn's budgets, pending
confirmations and messages, the history replayed to a new upstream). ``snapshot`` writes both
into a ``SessionSnapshot`` for the store; ``restore`` puts a snapshot's conversation back into a
live ``Conversation`` in place, so that everything holding its parts keeps holding them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from gateway.orchestrator import ConfirmationBook, IntentState, TurnState
from gateway.protocol import (
    ProtocolError,
    tool_choice_of,
    tool_choice_wire,
    turn_detection_of,
    turn_detection_wire,
)
from gateway.store import SessionSnapshot
from gateway.usage import SessionUsage
from transports.base import ConversationItem, ToolChoice, TurnDetection

__all__ = ["HISTORY_ITEMS", "Conversation", "Profile", "restore", "snapshot"]

# Conversation items kept for a resume on another node (replayed to a new upstream).
HISTORY_ITEMS = 200


@dataclass(slots=True)
class Profile:
    provider: str
    mode: str
    input_rate: int
    output_rate: int
    enabled: frozenset[str] | None
    instructions: str
    model: str | None = None
    voice: str | None = None
    locale: str | None = None
    tool_dialect: str | None = None
    encoding: str = "pcm16"  # of the client's audio, both ways ("pcmu": a phone call)
    client_tools: tuple[Mapping[str, Any], ...] = ()  # fixed for the session's life
    turn_detection: TurnDetection = field(default_factory=TurnDetection)
    tool_choice: ToolChoice = "auto"
    alias: str | None = None  # the model alias asked for (failover follows its targets)

    @classmethod
    def of(cls, setup: SessionSnapshot) -> Profile:
        turns: TurnDetection = TurnDetection()
        choice: ToolChoice = "auto"
        try:  # checked when the session began; a stored value a newer rule refuses: defaults
            if setup.turn_detection is not None:
                turns = turn_detection_of(setup.turn_detection, event_type="session.start")
            if setup.tool_choice is not None:
                choice = tool_choice_of(setup.tool_choice, event_type="session.start")
        except ProtocolError:
            pass
        return cls(
            provider=setup.provider,
            mode=setup.mode,
            input_rate=setup.input_rate,
            output_rate=setup.output_rate,
            enabled=None if setup.enabled_tools is None else frozenset(setup.enabled_tools),
            instructions=setup.instructions,
            model=setup.model,
            voice=setup.voice,
            locale=setup.locale,
            tool_dialect=setup.tool_dialect,
            encoding=setup.audio_encoding,
            client_tools=setup.client_tools,
            turn_detection=turns,
            tool_choice=choice,
            alias=setup.alias,
        )


@dataclass(slots=True)
class Conversation:
    confirmation_ttl_s: float
    turn: TurnState = field(default_factory=TurnState)
    intents: IntentState = field(default_factory=IntentState)
    history: deque[ConversationItem] = field(default_factory=lambda: deque(maxlen=HISTORY_ITEMS))
    usage: SessionUsage = field(default_factory=SessionUsage)
    book: ConfirmationBook = field(init=False)

    def __post_init__(self) -> None:
        self.book = ConfirmationBook(timedelta(seconds=self.confirmation_ttl_s))


def snapshot(profile: Profile, conversation: Conversation) -> SessionSnapshot:
    turn = conversation.turn
    return SessionSnapshot(
        provider=profile.provider,
        mode=profile.mode,
        input_rate=profile.input_rate,
        output_rate=profile.output_rate,
        enabled_tools=None if profile.enabled is None else tuple(sorted(profile.enabled)),
        instructions=profile.instructions,
        model=profile.model,
        voice=profile.voice,
        locale=profile.locale,
        tool_dialect=profile.tool_dialect,
        audio_encoding=profile.encoding,
        turn_number=turn.number,
        retrieval_calls=turn.retrieval_calls,
        rounds=turn.rounds,
        last_user_text=turn.last_user_text,
        pending_confirmations=tuple(conversation.book.pending()),
        pending_messages=tuple(conversation.intents.pending_messages),
        history=tuple(conversation.history),
        usage=conversation.usage.as_json(),
        client_tools=profile.client_tools,
        turn_detection=turn_detection_wire(profile.turn_detection),
        tool_choice=tool_choice_wire(profile.tool_choice),
        alias=profile.alias,
    )


def restore(conversation: Conversation, stored: SessionSnapshot) -> None:
    turn = conversation.turn
    turn.number = stored.turn_number
    turn.retrieval_calls = stored.retrieval_calls
    turn.rounds = stored.rounds
    turn.last_user_text = stored.last_user_text
    conversation.book.restore(list(stored.pending_confirmations))
    conversation.intents.pending_messages = list(stored.pending_messages)
    conversation.history.clear()
    conversation.history.extend(stored.history)
    conversation.usage.restore(stored.usage)
