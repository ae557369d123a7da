"""A user's consumption from the audit trail: the sum of their ``session_usage`` records. Pure.

Each session that ends for good writes one ``session_usage`` line to the ``audit`` logger (JSON
with ``GATEWAY_LOG_FORMAT=json``): ``user_id``, ``tenant``, ``provider``, ``mode``, ``reason``
and ``usage`` (``SessionUsage.as_json`` with ``model`` and, priced, ``estimated_cost`` and
``currency``). A session that moved between nodes writes one line, on the node where it ended,
with the sums of its whole life. ``gateway usage`` reads such logs (files, or standard input)
and prints the totals per user; other lines are skipped, and so is a line that is not JSON.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from gateway.usage.tokens import TokenCounts

__all__ = ["UserTotals", "totals_by_user"]

USAGE_EVENT = "session_usage"


@dataclass(slots=True)
class UserTotals:
    sessions: int = 0
    responses: int = 0
    tokens: TokenCounts = field(default_factory=TokenCounts)
    audio_in_s: float = 0.0
    audio_out_s: float = 0.0
    tool_calls: dict[str, int] = field(default_factory=dict)
    # Per currency: a table may change, but amounts in two currencies never add up.
    estimated_cost: dict[str, float] = field(default_factory=dict)

    def add(self, usage: dict[str, Any]) -> None:
        self.sessions += 1
        self.responses += _int(usage.get("responses"))
        tokens = usage.get("tokens")
        self.tokens = self.tokens + TokenCounts.from_json(
            tokens if isinstance(tokens, dict) else {}
        )
        self.audio_in_s += _float(usage.get("audio_in_s"))
        self.audio_out_s += _float(usage.get("audio_out_s"))
        calls = usage.get("tool_calls")
        for outcome, count in (calls if isinstance(calls, dict) else {}).items():
            self.tool_calls[str(outcome)] = self.tool_calls.get(str(outcome), 0) + _int(count)
        cost, currency = usage.get("estimated_cost"), usage.get("currency")
        if isinstance(currency, str) and _float(cost):
            self.estimated_cost[currency] = self.estimated_cost.get(currency, 0.0) + _float(cost)

    def as_json(self) -> dict[str, Any]:
        return {
            "sessions": self.sessions,
            "responses": self.responses,
            "tokens": self.tokens.as_json(),
            "audio_in_s": round(self.audio_in_s, 3),
            "audio_out_s": round(self.audio_out_s, 3),
            "tool_calls": dict(sorted(self.tool_calls.items())),
            "estimated_cost": {k: round(v, 6) for k, v in sorted(self.estimated_cost.items())},
        }


def totals_by_user(
    lines: Iterable[str | bytes],
    user: str | None = None,
    *,
    into: dict[str, UserTotals] | None = None,
) -> dict[str, UserTotals]:
    """``(tenant/)user`` → the sums of their sessions' records in ``lines`` (added to
    ``into`` when given, to sum several logs); only ``user``'s when given (the user id)."""
    totals: dict[str, UserTotals] = {} if into is None else into
    for line in lines:
        record = _record(line)
        if record is None:
            continue
        user_id = str(record.get("user_id", ""))
        if user is not None and user_id != user:
            continue
        tenant = record.get("tenant")
        key = f"{tenant}/{user_id}" if isinstance(tenant, str) and tenant else user_id
        usage = record.get("usage")
        totals.setdefault(key, UserTotals()).add(usage if isinstance(usage, dict) else {})
    return totals


def _record(line: str | bytes) -> dict[str, Any] | None:
    text = line.strip()
    if not text or text[:1] not in ("{", b"{"):
        return None
    try:
        record = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(record, dict) or record.get("event") != USAGE_EVENT:
        return None
    return record


def _int(value: Any) -> int:
    return value if type(value) is int and value > 0 else 0


def _float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        return 0.0
    return float(value)
