"""Tracing's switch (the standard OTEL_* variables; off by default) and the ids it puts on log
lines (gateway.observability.tracing)."""

from __future__ import annotations

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from gateway.observability import Tracing, tracing_from_environment
from gateway.observability.tracing import ToolTrace, log_trace_ids


@pytest.mark.parametrize(
    "environ",
    [
        {},
        {"OTEL_TRACES_EXPORTER": "none"},
        {"OTEL_TRACES_EXPORTER": " "},
        {"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"},
    ],
)
def test_off_unless_an_exporter_is_named(environ: dict[str, str]) -> None:
    assert tracing_from_environment(environ) is None


def test_an_unknown_exporter_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"unknown exporter\(s\) \['zipkin'\]"):
        tracing_from_environment({"OTEL_TRACES_EXPORTER": "zipkin"})


def test_console_and_otlp_build_a_provider_named_by_the_operator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_SERVICE_NAME", "front-desk-voice")
    tracing = tracing_from_environment({"OTEL_TRACES_EXPORTER": "console,otlp"})
    assert tracing is not None
    try:
        assert tracing.provider.resource.attributes["service.name"] == "front-desk-voice"
    finally:
        tracing.shutdown()


def test_without_a_name_the_service_is_ours(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OTEL_SERVICE_NAME", raising=False)
    monkeypatch.delenv("OTEL_RESOURCE_ATTRIBUTES", raising=False)
    tracing = tracing_from_environment({"OTEL_TRACES_EXPORTER": "console"})
    assert tracing is not None
    try:
        assert tracing.provider.resource.attributes["service.name"] == "realtime-gateway"
    finally:
        tracing.shutdown()


def test_a_line_written_inside_a_span_carries_its_ids() -> None:
    tracing = Tracing(TracerProvider())
    span = tracing.start("execute_tool lookup")
    assert log_trace_ids(None, "info", {"event": "outside"}) == {"event": "outside"}
    with trace.use_span(span, end_on_exit=True):
        line = log_trace_ids(None, "info", {"event": "inside"})
    context = span.get_span_context()
    assert line["trace_id"] == format(context.trace_id, "032x")
    assert line["span_id"] == format(context.span_id, "016x")


def test_a_handlers_child_span_fails_with_the_exceptions_type_only() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = Tracing(provider)
    call = tracing.start("execute_tool lookup")
    tool = ToolTrace(tracing, call)
    with pytest.raises(RuntimeError), tool.child("lookup", attributes={"gateway.tool.id": "x"}):
        raise RuntimeError("secret detail that must not reach a span")
    (child,) = exporter.get_finished_spans()
    assert child.status.status_code is StatusCode.ERROR
    assert child.status.description == "RuntimeError"
    assert not child.events  # no exception event, whose message could hold anything
    assert child.parent is not None
    assert child.parent.span_id == call.get_span_context().span_id
    headers = ToolTrace.headers(call)
    assert headers["traceparent"].split("-")[1] == format(call.get_span_context().trace_id, "032x")
