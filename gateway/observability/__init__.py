"""Logs (structlog), Prometheus metrics and the audit trail's sink."""

from gateway.observability.logging import configure_logging
from gateway.observability.metrics import Metrics

__all__ = ["Metrics", "configure_logging"]
