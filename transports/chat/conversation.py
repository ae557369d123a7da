"""The conversation of one chat session, as chat-completions ``messages``, bounded in size.

Messages are kept in turns: a turn starts with a user message (or with the input that started a
response on its own, such as a late tool result) and holds everything up to the next one. When
the estimated size passes the budget, the oldest turns are dropped whole, so an assistant
message with ``tool_calls`` never loses the ``tool`` messages that answer it. The current turn
is never dropped.

Context that arrives between turns (a ``SET_PENDING_MESSAGE``, a confirmation that expired) waits
in ``pending`` and joins the conversation at the next safe point: the start of the next turn, or
the next request of the current one, never between a call and its results.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Conversation", "estimate_tokens"]

Message = dict[str, Any]

# Per-message framing the providers add (role, separators), in tokens.
_MESSAGE_OVERHEAD = 4


def estimate_tokens(message: Mapping[str, Any]) -> int:
    """About four characters per token: cheap, provider-neutral, and errs on the large side
    for the English and JSON this carries."""
    chars = 0
    content = message.get("content")
    if isinstance(content, str):
        chars += len(content)
    for call in message.get("tool_calls") or ():
        function = call.get("function", {})
        chars += len(function.get("name", "")) + len(function.get("arguments", "")) + 16
    return _MESSAGE_OVERHEAD + (chars + 3) // 4


@dataclass(slots=True)
class Conversation:
    instructions: str
    max_tokens: int
    turns: list[list[Message]] = field(default_factory=list)
    pending: list[Message] = field(default_factory=list)
    dropped_turns: int = 0

    @classmethod
    def replayed(
        cls, instructions: str, max_tokens: int, items: Iterable[tuple[str, str]]
    ) -> Conversation:
        """A conversation rebuilt from plain ``(role, text)`` history (a resumed session).
        Tool activity comes back as system notes: the calls it summarises are over."""
        conversation = cls(instructions, max_tokens)
        for role, text in items:
            if role == "user":
                conversation.turns.append([{"role": "user", "content": text}])
            else:
                message: Message = (
                    {"role": "assistant", "content": text}
                    if role == "assistant"
                    else {"role": "system", "content": f"Earlier tool activity: {text}"}
                )
                if not conversation.turns:
                    conversation.turns.append([])
                conversation.turns[-1].append(message)
        conversation.trim()
        return conversation

    # Changes --------------------------------------------------------------------------------

    def begin_turn(self, first: Message) -> None:
        """A new turn: context waiting so far comes first, then ``first``."""
        self.turns.append([*self.pending, first])
        self.pending.clear()
        self.trim()

    def add_context(self, text: str) -> None:
        self.pending.append({"role": "system", "content": text})

    def append(self, *messages: Message) -> None:
        """Messages of the current turn (an assistant reply, its results)."""
        if not self.turns:
            self.turns.append([])
        self.turns[-1].extend(messages)

    # Requests -------------------------------------------------------------------------------

    def messages(
        self, system_extra: Sequence[str] = (), notes: Sequence[str] = ()
    ) -> list[Message]:
        """The ``messages`` of the next request. Waiting context joins the current turn first
        (the caller only asks between rounds, when no call waits for its result). ``notes`` are
        system messages for this request only, placed last."""
        if self.pending:
            self.append(*self.pending)
            self.pending.clear()
        self.trim()
        system = "\n\n".join(part for part in (self.instructions, *system_extra) if part)
        out: list[Message] = [{"role": "system", "content": system}] if system else []
        for turn in self.turns:
            out.extend(turn)
        out.extend({"role": "system", "content": note} for note in notes)
        return out

    def trim(self) -> None:
        """Drop the oldest turns until the estimate fits; the current turn always stays."""
        total = estimate_tokens({"content": self.instructions}) + sum(
            estimate_tokens(m) for turn in self.turns for m in turn
        )
        while total > self.max_tokens and len(self.turns) > 1:
            oldest = self.turns.pop(0)
            total -= sum(estimate_tokens(m) for m in oldest)
            self.dropped_turns += 1
