"""Logs (structlog), Prometheus metrics, OpenTelemetry traces and the audit trail's sink."""

from gateway.observability.logging import configure_logging
from gateway.observability.metrics import Metrics
from gateway.observability.tracing import Tracing, tracing_from_environment

__all__ = ["Metrics", "Tracing", "configure_logging", "tracing_from_environment"]
