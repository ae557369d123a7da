"""Per-mode execution budgets (docs/tools.md 7.2); the orchestrator counts, the runner times."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["DEFAULT_BUDGETS", "Mode", "ModeBudget"]

Mode = Literal["voice", "text"]


@dataclass(frozen=True, slots=True)
class ModeBudget:
    retrieval_calls_per_turn: int
    soft_limit_ms: int
    hard_timeout_ms: int
    rounds_per_turn: int


DEFAULT_BUDGETS: dict[Mode, ModeBudget] = {
    "voice": ModeBudget(
        retrieval_calls_per_turn=2, soft_limit_ms=800, hard_timeout_ms=3000, rounds_per_turn=5
    ),
    "text": ModeBudget(
        retrieval_calls_per_turn=5, soft_limit_ms=2000, hard_timeout_ms=5000, rounds_per_turn=5
    ),
}
