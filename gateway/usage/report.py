"""One session's usage as it goes out: Prometheus counters per response, and the summary when
the session ends for good (``session.ended`` and the audit trail).

The counters are by provider and model only, never by user or session: a user's consumption is
the sum of the summaries the audit trail holds for them (``session_usage`` lines). The client's
audio is counted into the session's account per frame (a float addition); it reaches the
counters at each response's end and at the session's, so no counter is touched per frame. A
session resumed on another node reports from there what it had not reported here: the account
comes back from the snapshot, and what it held then was reported by the node that took it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from gateway.usage.account import SessionUsage
from gateway.usage.prices import PriceTable
from gateway.usage.tokens import TokenCounts, token_counts

__all__ = ["UsageCounters", "UsageReporter", "UsageSource"]


class UsageCounters(Protocol):
    """The metrics a reporter adds to (``gateway.observability.Metrics``)."""

    def model_of(self, provider: str, mode: str, model: str | None) -> str: ...

    def model_labels(self, provider: str, mode: str, model: str | None) -> tuple[str, str]: ...

    def count_usage(self, labels: tuple[str, str], tokens: TokenCounts) -> None: ...

    def count_audio(self, provider_label: str, direction: str, seconds: float) -> None: ...


class UsageSource(Protocol):
    """What the session's profile says of its upstream (read at each report: the mode, and
    with it Gemini's model, may change during the session)."""

    provider: str
    mode: str
    model: str | None


class UsageReporter:
    def __init__(
        self,
        usage: SessionUsage,
        profile: UsageSource,
        counters: UsageCounters,
        prices: PriceTable | None = None,
        *,
        on_priced: Callable[[int, float | None, str], None] | None = None,
    ) -> None:
        """``on_priced``: told of each response (its tokens in and out, its cost or None, and
        ``provider/model``): the session's budget charges it."""
        self.usage = usage
        self._on_priced = on_priced
        self._profile = profile
        self._counters = counters
        self._prices = prices
        # Built after the account is restored: what it holds was reported where it was counted.
        self._audio_in_reported_ms = usage.audio_in_ms

    def model(self) -> str:
        """The model the session uses now: its own, or the one configured for its mode."""
        p = self._profile
        return self._counters.model_of(p.provider, p.mode, p.model)

    def labels(self) -> tuple[str, str]:
        p = self._profile
        return self._counters.model_labels(p.provider, p.mode, p.model)

    def response_reported(self, raw_usage: Any) -> TokenCounts:
        """A response ended upstream: its tokens as the upstream reported them (returned),
        counted at once (even when the session ends before its end reaches the client), and
        priced with the model that produced them."""
        tokens = token_counts(raw_usage)
        self.usage.add_tokens(tokens)
        labels = self.labels()
        self._counters.count_usage(labels, tokens)
        cost = None
        if self._prices is not None:
            cost = self._prices.estimate(self._profile.provider, self.model(), tokens)
            if cost is not None:
                self.usage.add_cost(cost)
        self._flush_audio_in(labels[0])
        if self._on_priced is not None:
            total = tokens.input_total + tokens.output_total
            self._on_priced(total, cost, f"{self._profile.provider}/{self.model()}")
        return tokens

    def audio_out(self, ms: float) -> None:
        """A response's audio, as sent to the client."""
        self.usage.audio_out_ms += ms
        self._counters.count_audio(self.labels()[0], "out", ms / 1000)

    def flush(self) -> None:
        """The client's audio counted since the last report, into the counters (before the
        session leaves this node: the next one reports from the snapshot's sum)."""
        self._flush_audio_in(self.labels()[0])

    def summary(self) -> dict[str, Any]:
        """The session's sums (``SessionUsage.as_json``) with ``model`` (the model it uses
        now) and, when some response was priced, ``estimated_cost`` and ``currency``."""
        self.flush()
        body = self.usage.as_json()
        body["model"] = self.model()
        if self._prices is not None and self.usage.estimated_cost is not None:
            body["currency"] = self._prices.currency
        return body

    def _flush_audio_in(self, provider_label: str) -> None:
        delta = self.usage.audio_in_ms - self._audio_in_reported_ms
        if delta > 0:
            self._counters.count_audio(provider_label, "in", delta / 1000)
            self._audio_in_reported_ms = self.usage.audio_in_ms
