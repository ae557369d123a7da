"""OpenTelemetry traces of the gateway's work: off by default, and then nothing at all is done.

Tracing is on when the standard variable ``OTEL_TRACES_EXPORTER`` names an exporter
(``otlp``, which needs the ``otlp`` extra, or ``console``); the other standard variables apply
as the SDK reads them (``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``,
``OTEL_TRACES_SAMPLER`` and its argument, ``OTEL_EXPORTER_OTLP_*``, the batch processor's
``OTEL_BSP_*``). Unset or ``none``: no SDK is imported, no tracer exists, and every place that
would start a span finds ``None`` and skips it (the relay's per-frame path has no such place).

The provider is the process's own, built here and handed down from the composition root
(``gateway.app``): it is never installed as OpenTelemetry's global, so tests can give each
gateway an in-memory exporter.

What is traced (docs/operations.md lists the spans and their attributes): a session, its turns,
its responses, its upstream connects and reconnects, each tool call (with the budget decision
and the outcome), a confirmation's wait, and each request an HTTP tool makes, whose
``traceparent`` carries the trace into the organisation's API. Attributes hold ids, names,
counts, statuses and error types: never arguments, results, transcripts or credentials.

The spans of a model's response and of a tool call follow OpenTelemetry's GenAI conventions
too, at the version ``gateway.observability.genai`` pins (the tracer declares its schema URL).
``capture_content`` (``GATEWAY_TRACE_CONTENT``, off by default) adds what those conventions
call content: the user's words, the model's, a call's arguments and result, each only as
people may already see it (the redaction rules), never audio.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from gateway.observability.genai import SCHEMA_URL

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

__all__ = [
    "TRACER_NAME",
    "SpanKind",
    "ToolTrace",
    "Tracing",
    "log_trace_ids",
    "tracing_from_environment",
]

TRACER_NAME = "gateway"
_PROPAGATOR = TraceContextTextMapPropagator()
_EXPORTERS = ("otlp", "console")


class Tracing:
    """The gateway's tracer. ``provider`` is kept to flush and shut down on the way out.
    ``capture_content``: the operator's choice to record content (off: never)."""

    def __init__(self, provider: TracerProvider, *, capture_content: bool = False) -> None:
        self.provider = provider
        self.capture_content = capture_content
        self.tracer: Tracer = provider.get_tracer(TRACER_NAME, schema_url=SCHEMA_URL)

    def start(
        self,
        name: str,
        *,
        parent: Span | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Mapping[str, Any] | None = None,
        start_time_ns: int | None = None,
    ) -> Span:
        """A span, child of ``parent`` (a root span without one). The caller ends it."""
        context = None if parent is None else trace.set_span_in_context(parent)
        return self.tracer.start_span(
            name,
            context=context,
            kind=kind,
            attributes=dict(attributes) if attributes else None,
            start_time=start_time_ns,
        )

    def tool_trace(self, span: Span) -> ToolTrace:
        return ToolTrace(self, span)

    def shutdown(self) -> None:
        """Export what is pending, then stop (the app's cleanup)."""
        self.provider.shutdown()


class ToolTrace:
    """What a tool's handler gets of tracing (``ToolContext.trace``): child spans of its call's
    span, and the W3C headers that carry the trace into the APIs it calls."""

    __slots__ = ("_tracing", "span")

    def __init__(self, tracing: Tracing, span: Span) -> None:
        self._tracing = tracing
        self.span = span

    @contextmanager
    def child(
        self, name: str, *, kind: SpanKind = SpanKind.INTERNAL, attributes: Mapping[str, Any]
    ) -> Iterator[Span]:
        """A span of the handler's own work, current while it runs (its log lines carry its
        ids); an exception leaving it marks it failed, with the exception's type only."""
        span = self._tracing.start(name, parent=self.span, kind=kind, attributes=attributes)
        try:
            with trace.use_span(span, end_on_exit=False, record_exception=False):
                yield span
        except BaseException as exc:
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise
        finally:
            span.end()

    @staticmethod
    def headers(span: Span) -> dict[str, str]:
        """``traceparent`` (and ``tracestate``) naming ``span`` as the caller."""
        carrier: dict[str, str] = {}
        _PROPAGATOR.inject(carrier, context=trace.set_span_in_context(span, Context()))
        return carrier


def tracing_from_environment(
    environ: Mapping[str, str] | None = None, *, capture_content: bool = False
) -> Tracing | None:
    """Tracing as the ``OTEL_*`` variables ask, or None (off). Raises ``ValueError`` naming
    what is wrong (an unknown exporter, the otlp exporter without its extra).
    ``capture_content``: ``GATEWAY_TRACE_CONTENT``, from the settings."""
    env = os.environ if environ is None else environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    chosen = [
        name.strip().lower()
        for name in env.get("OTEL_TRACES_EXPORTER", "").split(",")
        if name.strip().lower() not in ("", "none")
    ]
    if not chosen:
        return None
    unknown = sorted(set(chosen) - set(_EXPORTERS))
    if unknown:
        raise ValueError(
            f"OTEL_TRACES_EXPORTER: unknown exporter(s) {unknown}; known: otlp, console"
        )
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    # The SDK reads the sampler and the resource variables itself; the service's name is
    # ours only where the operator gave none.
    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": "realtime-gateway"}))
    provider = TracerProvider(resource=resource)
    for name in chosen:
        if name == "console":
            provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
            continue
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise ValueError(
                "OTEL_TRACES_EXPORTER=otlp needs the otlp extra: "
                "pip install 'realtime-gateway[otlp]'"
            ) from None
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return Tracing(provider, capture_content=capture_content)


def log_trace_ids(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """structlog processor (installed only with tracing on): the ids of the span current in
    this task, on every line written inside it."""
    context = trace.get_current_span().get_span_context()
    if context.is_valid:
        event.setdefault("trace_id", format(context.trace_id, "032x"))
        event.setdefault("span_id", format(context.span_id, "016x"))
    return event
