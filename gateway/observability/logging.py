"""structlog setup. With ``json`` every line on stdout/stderr is one JSON object, third-party
library logs included (they go through the standard library into the same formatter)."""

from __future__ import annotations

import logging
import sys
from typing import Literal

import structlog

from gateway.observability.tracing import log_trace_ids
from gateway.toolrun.audit import AUDIT_LOGGER

__all__ = ["configure_logging"]


def configure_logging(
    fmt: Literal["json", "console"], level: str = "info", *, trace_ids: bool = False
) -> None:
    """``trace_ids`` (tracing on): each line written inside a span carries its ids."""
    shared: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        *([log_trace_ids] if trace_ids else []),
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: structlog.types.Processor = (
        structlog.processors.JSONRenderer()
        if fmt == "json"
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        # A record below its logger's level is dropped before any processing.
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                renderer,
            ],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # aiohttp's access log would log every request line; the gateway logs what matters itself.
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    # The audit trail is kept whatever GATEWAY_LOG_LEVEL says (it is not diagnostics).
    logging.getLogger(AUDIT_LOGGER).setLevel(logging.INFO)
