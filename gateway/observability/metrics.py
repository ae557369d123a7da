"""Prometheus metrics on a registry of their own (one per app, so tests never collide)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

__all__ = ["Metrics"]


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.active_sessions = Gauge("gateway_active_sessions", "Open client sessions", registry=r)
        self.frames_in = Counter(
            "gateway_frames_in_total", "Frames from clients", ["kind"], registry=r
        )
        self.frames_out = Counter(
            "gateway_frames_out_total", "Frames to clients", ["kind"], registry=r
        )
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
        # Bound once: a label lookup per audio frame would cost the relay hot path.
        self.text_in = self.frames_in.labels("text")
        self.binary_in = self.frames_in.labels("binary")
        self.text_out = self.frames_out.labels("text")
        self.audio_out = self.frames_out.labels("audio")

    # RunObserver (gateway.toolrun) hooks.
    def call_finished(self, tool_id: str, outcome: str, duration_s: float) -> None:
        self.tool_calls.labels(tool_id, outcome).inc()
        if duration_s > 0:
            self.tool_latency.labels(tool_id).observe(duration_s)

    def soft_limit_exceeded(self, tool_id: str, mode: str) -> None:
        self.soft_limit_overruns.labels(tool_id, mode).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
