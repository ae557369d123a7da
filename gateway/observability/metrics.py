"""Prometheus metrics on a registry of their own (one per app, so tests never collide).

Several worker processes (``gateway serve --workers N``) share one view through
prometheus-client's multiprocess mode: the supervisor sets ``PROMETHEUS_MULTIPROC_DIR`` before
any worker starts, every value lives in that folder, and ``/metrics`` on any worker adds them up
(``MultiProcessCollector``). Gauges say how they add up (``multiprocess_mode``). The per-frame
counts stay plain integers on the hot path; in multiprocess mode they are added to real counters
once a second (``flush_frames``) and before each scrape.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from gateway.usage import TokenCounts

__all__ = ["FrameCounts", "Metrics"]


class FrameCounts(Collector):
    """Frames to and from clients, counted as plain integers on the relay's hot path (a
    prometheus Counter takes a lock per ``inc``) and exported when scraped, as
    ``gateway_frames_in_total`` and ``gateway_frames_out_total`` by kind."""

    __slots__ = ("audio_out", "binary_in", "text_in", "text_out")

    def __init__(self) -> None:
        self.text_in = 0
        self.binary_in = 0
        self.text_out = 0
        self.audio_out = 0

    def collect(self) -> Iterator[CounterMetricFamily]:
        frames_in = CounterMetricFamily("gateway_frames_in", "Frames from clients", labels=["kind"])
        frames_in.add_metric(["text"], self.text_in)
        frames_in.add_metric(["binary"], self.binary_in)
        frames_out = CounterMetricFamily("gateway_frames_out", "Frames to clients", labels=["kind"])
        frames_out.add_metric(["text"], self.text_out)
        frames_out.add_metric(["audio"], self.audio_out)
        yield frames_in
        yield frames_out


UNKNOWN_TOOL = "unknown"
OTHER = "other"


class Metrics:
    """``tool_ids``: the registry's tools, the only values a ``tool`` label takes (a name the
    model made up counts under ``unknown``: labels never come from outside input).
    ``models``: per provider, the model the operator configured for each mode
    (``gateway.providers.configured_models``): the only values a ``model`` label takes (a model
    a client names otherwise counts as ``other``)."""

    def __init__(
        self,
        tool_ids: Iterable[str] = (),
        models: Mapping[str, Mapping[str, str]] | None = None,
        teams: Iterable[str] = (),
    ) -> None:
        """``teams``: the closed set of teams whose budget charges are counted (never a label
        per key or user)."""
        self._tool_ids = frozenset(tool_ids)
        self._teams = frozenset(teams)
        self._models = {provider: dict(by_mode) for provider, by_mode in (models or {}).items()}
        self.multiprocess = bool(os.environ.get("PROMETHEUS_MULTIPROC_DIR"))
        self.registry = CollectorRegistry()
        r = self.registry
        self.active_sessions = Gauge(
            "gateway_active_sessions",
            "Open client sessions",
            registry=r,
            multiprocess_mode="livesum",
        )
        self.webrtc_peers = Gauge(
            "gateway_webrtc_peer_connections",
            "Open WebRTC peer connections (/v1/webrtc and /v1/realtime/calls)",
            registry=r,
            multiprocess_mode="livesum",
        )
        self.frames = FrameCounts()
        self._flushed = FrameCounts()
        if self.multiprocess:
            self._frames_in = Counter(
                "gateway_frames_in", "Frames from clients", ["kind"], registry=r
            )
            self._frames_out = Counter(
                "gateway_frames_out", "Frames to clients", ["kind"], registry=r
            )
        else:
            r.register(self.frames)
        self.audio_dropped = Counter(
            "gateway_audio_frames_dropped_total",
            "Outbound audio frames dropped for a slow client",
            registry=r,
        )
        self.tool_calls = Counter(
            "gateway_tool_calls_total",
            "Tool calls by tool and outcome",
            ["tool", "outcome"],
            registry=r,
        )
        self.tool_latency = Histogram(
            "gateway_tool_latency_seconds",
            "Tool execution time",
            ["tool"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.8, 1, 2, 3, 5, 10),
            registry=r,
        )
        self.soft_limit_overruns = Counter(
            "gateway_tool_soft_limit_overruns_total",
            "Retrieval calls over the mode's soft limit",
            ["tool", "mode"],
            registry=r,
        )
        self.budget_refusals = Counter(
            "gateway_tool_budget_refusals_total",
            "Calls refused by a budget",
            ["reason"],
            registry=r,
        )
        self.confirmations = Counter(
            "gateway_confirmations_total", "Confirmations by decision", ["decision"], registry=r
        )
        self.upstream_reconnects = Counter(
            "gateway_upstream_reconnects_total", "Transparent upstream reconnects", registry=r
        )
        self.failovers = Counter(
            "gateway_upstream_failovers_total",
            "Sessions moved to another target of their model alias, by target and reason",
            ["previous", "target", "reason"],
            registry=r,
        )
        self.pool_takes = Counter(
            "gateway_pool_takes_total",
            "Sessions that looked for a warm connection of a pooled target, and if they got one",
            ["target", "taken"],
            registry=r,
        )
        self.sessions_ended = Counter(
            "gateway_sessions_ended_total", "Sessions ended by reason", ["reason"], registry=r
        )
        self.slow_clients = Counter(
            "gateway_slow_client_disconnects_total",
            "Connections dropped because the client stopped reading",
            registry=r,
        )
        self.resumes = Counter(
            "gateway_session_resumes_total", "Sessions resumed by a reconnecting client", registry=r
        )
        self.sessions_moved = Counter(
            "gateway_sessions_moved_total",
            "Sessions sent to another node by a draining node (session.moving)",
            registry=r,
        )
        self.sessions_recovered = Counter(
            "gateway_sessions_recovered_total",
            "Sessions rebuilt from their last snapshot after their node stopped",
            registry=r,
        )
        self.store_errors = Counter(
            "gateway_store_errors_total",
            "Calls to the shared store that failed (it could not be reached)",
            ["op"],
            registry=r,
        )
        self.holding_cues = Counter(
            "gateway_holding_cues_total",
            "Tool calls past the soft limit, by what the caller heard (line, tone, none)",
            ["cue"],
            registry=r,
        )
        self.store_up = Gauge(
            "gateway_store_up",
            "1 while the shared store answers, 0 while it does not (the least of the workers)",
            registry=r,
            multiprocess_mode="livemin",
        )
        self.store_up.set(1)
        self.usage_tokens = Counter(
            "gateway_usage_tokens",
            "Tokens the upstreams reported, by provider, model and kind (input_text, …)",
            ["provider", "model", "kind"],
            registry=r,
        )
        self.usage_responses = Counter(
            "gateway_usage_responses",
            "Responses whose usage was counted, by provider and model",
            ["provider", "model"],
            registry=r,
        )
        self.usage_audio = Counter(
            "gateway_usage_audio_seconds",
            "Audio seconds: in from clients, out to clients, by provider",
            ["provider", "direction"],
            registry=r,
        )
        self.team_usage = Counter(
            "gateway_team_usage",
            "Budget charges of the teams GATEWAY_METRICS_TEAMS names: tokens, spend, seconds",
            ["team", "metric"],
            registry=r,
        )

    def counts_team(self, team: str | None) -> bool:
        return team is not None and team in self._teams

    def count_team(self, team: str, tokens: float, spend: float, seconds: float) -> None:
        """A budget charge of ``team`` (one of ``teams``: callers ask ``counts_team``)."""
        for metric, amount in (("tokens", tokens), ("spend", spend), ("seconds", seconds)):
            if amount:
                self.team_usage.labels(team, metric).inc(amount)

    def store_error(self, op: str) -> None:
        """``op`` names a store operation: a closed set of the code's own words."""
        self.store_errors.labels(op).inc()

    def tool_label(self, tool_id: str) -> str:
        return tool_id if tool_id in self._tool_ids else UNKNOWN_TOOL

    # RunObserver (gateway.toolrun) hooks. ``outcome`` is "ok" or an error type (a closed set).
    def call_finished(self, tool_id: str, outcome: str, duration_s: float) -> None:
        tool = self.tool_label(tool_id)
        self.tool_calls.labels(tool, outcome).inc()
        if duration_s > 0:
            self.tool_latency.labels(tool).observe(duration_s)

    def soft_limit_exceeded(self, tool_id: str, mode: str) -> None:
        self.soft_limit_overruns.labels(self.tool_label(tool_id), mode).inc()

    def model_of(self, provider: str, mode: str, model: str | None) -> str:
        """The model a session uses: its own, or the one configured for its mode."""
        return model or self._models.get(provider, {}).get(mode) or provider

    def model_labels(self, provider: str, mode: str, model: str | None) -> tuple[str, str]:
        """``(provider, model)`` as labels: the model a session without one of its own uses,
        or a configured name; anything else is ``other``."""
        by_mode = self._models.get(provider)
        if by_mode is None:
            return OTHER, OTHER
        if model is None:
            return provider, by_mode.get(mode, OTHER)
        return provider, model if model in by_mode.values() else OTHER

    def count_usage(self, labels: tuple[str, str], tokens: TokenCounts) -> None:
        """One response's tokens under ``model_labels`` (never per user: the sums per session
        are in the audit trail)."""
        self.usage_responses.labels(*labels).inc()
        for kind, count in tokens.as_json().items():
            if count:
                self.usage_tokens.labels(*labels, kind).inc(count)

    def count_audio(self, provider_label: str, direction: str, seconds: float) -> None:
        """``direction``: ``in`` (from the client) or ``out`` (to it)."""
        if seconds > 0:
            self.usage_audio.labels(provider_label, direction).inc(seconds)

    def flush_frames(self) -> None:
        """Multiprocess mode: the frame counts since the last flush, into the shared counters."""
        if not self.multiprocess:
            return
        now, before = self.frames, self._flushed
        for counter, kind, name in (
            (self._frames_in, "text", "text_in"),
            (self._frames_in, "binary", "binary_in"),
            (self._frames_out, "text", "text_out"),
            (self._frames_out, "audio", "audio_out"),
        ):
            delta = getattr(now, name) - getattr(before, name)
            if delta:
                counter.labels(kind).inc(delta)
                setattr(before, name, getattr(now, name))

    def render(self) -> bytes:
        if not self.multiprocess:
            return generate_latest(self.registry)
        self.flush_frames()
        merged = CollectorRegistry()
        MultiProcessCollector(merged)  # type: ignore[no-untyped-call]
        return generate_latest(merged)
