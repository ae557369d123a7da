"""Per-turn counters: a user turn starts with a text message, an utterance or a commit."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TurnState"]


@dataclass(slots=True)
class TurnState:
    number: int = 0
    retrieval_calls: int = 0
    # Tool batches the model made this turn; the batch being decided counts.
    rounds: int = 0
    # The user's last words: explicit-intent keywords are looked for here.
    last_user_text: str = ""

    def start(self, user_text: str) -> None:
        self.number += 1
        self.retrieval_calls = 0
        self.rounds = 0
        self.last_user_text = user_text

    def heard(self, user_text: str) -> None:
        """A transcript arrived for the current turn (voice): it becomes the user's last words."""
        self.last_user_text = user_text

    def begin_round(self) -> None:
        self.rounds += 1
