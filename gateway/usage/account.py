"""One session's usage, summed as it goes: tokens per response as the upstream reported them,
audio seconds each way, and tool calls by outcome. Pure.

The account travels with the session: it is part of the snapshot the store keeps, so a resume
here or on another node goes on from the same sums, and a reconnect of the upstream changes
nothing (each response is added once, when the upstream reports its end). Audio is counted where
the gateway sees it: the client's audio as it arrives (at the client's rate and encoding), the
model's audio as it is sent to the client (not what a barge-in or SUPPRESS_AUDIO held back).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gateway.usage.tokens import TokenCounts

__all__ = ["SessionUsage"]


@dataclass(slots=True)
class SessionUsage:
    responses: int = 0
    tokens: TokenCounts = field(default_factory=TokenCounts)
    audio_in_ms: float = 0.0
    audio_out_ms: float = 0.0
    # ``ok``, or the error type the model received (``TIMEOUT``, ``PERMISSION``…).
    tool_calls: dict[str, int] = field(default_factory=dict)
    # Summed per response with the price of the model that produced it; None: none priced.
    estimated_cost: float | None = None

    def add_tokens(self, tokens: TokenCounts) -> None:
        """One response's tokens."""
        self.responses += 1
        self.tokens = self.tokens + tokens

    def add_cost(self, cost: float) -> None:
        self.estimated_cost = (self.estimated_cost or 0.0) + cost

    def add_tool_call(self, outcome: str) -> None:
        self.tool_calls[outcome] = self.tool_calls.get(outcome, 0) + 1

    def as_json(self) -> dict[str, Any]:
        """The summary as the protocol, the audit trail and the store write it."""
        return {
            "responses": self.responses,
            "tokens": self.tokens.as_json(),
            "audio_in_s": round(self.audio_in_ms / 1000, 3),
            "audio_out_s": round(self.audio_out_ms / 1000, 3),
            "tool_calls": dict(sorted(self.tool_calls.items())),
            **(
                {}
                if self.estimated_cost is None
                else {"estimated_cost": round(self.estimated_cost, 6)}
            ),
        }

    def restore(self, raw: Mapping[str, Any]) -> None:
        """Take the sums of a stored summary (``as_json``'s shape); absent fields count 0."""
        self.responses = int(_number(raw.get("responses")))
        tokens = raw.get("tokens")
        self.tokens = TokenCounts.from_json(tokens if isinstance(tokens, Mapping) else {})
        self.audio_in_ms = _number(raw.get("audio_in_s")) * 1000
        self.audio_out_ms = _number(raw.get("audio_out_s")) * 1000
        calls = raw.get("tool_calls")
        given = calls if isinstance(calls, Mapping) else {}
        self.tool_calls = {str(k): int(_number(v)) for k, v in given.items()}
        cost = raw.get("estimated_cost")
        self.estimated_cost = None if cost is None else _number(cost)


def _number(value: Any) -> float:
    """A count from the store: anything but a number ≥ 0 counts 0."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return 0.0
    return float(value)
