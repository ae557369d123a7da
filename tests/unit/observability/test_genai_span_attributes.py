"""The GenAI conventions' names and values the gateway's spans carry (gateway.observability.genai),
and a session's response spans in that vocabulary, with and without content capture (pure: the
session's trace is driven directly, into the SDK's in-memory exporter)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from gateway.observability import Tracing
from gateway.observability.genai import (
    CONTENT_ATTRIBUTES,
    finish_reason,
    provider_name,
    tool_content,
)
from gateway.session.trace import SessionTrace
from gateway.usage import TokenCounts


@pytest.mark.parametrize(
    ("provider", "name"),
    [
        ("openai", "openai"),
        ("gemini", "gcp.gemini"),
        ("chat", "openai"),
        ("local", "gateway.local"),
    ],
)
def test_each_provider_has_its_conventional_name(provider: str, name: str) -> None:
    assert provider_name(provider) == name


@pytest.mark.parametrize(
    ("status", "called_tools", "reason"),
    [
        ("completed", False, "stop"),
        ("completed", True, "tool_call"),
        ("failed", False, "error"),
        ("interrupted", False, "interrupted"),
        ("cancelled", True, "cancelled"),
    ],
)
def test_a_status_is_a_finish_reason(status: str, called_tools: bool, reason: str) -> None:
    assert finish_reason(status, called_tools=called_tools) == reason


def test_a_tool_call_without_arguments_or_result_has_no_content() -> None:
    assert tool_content(None, None) == {}
    assert tool_content({"q": "a"}, None) == {"gen_ai.tool.call.arguments": '{"q":"a"}'}


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    yield exporter
    exporter.shutdown()


def session_trace(
    exporter: InMemorySpanExporter, *, provider: str, capture_content: bool
) -> SessionTrace:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing = Tracing(tracer_provider, capture_content=capture_content)
    return SessionTrace(tracing, session_id="sess_1", provider=provider, mode="text", epoch=1)


def chat_span(exporter: InMemorySpanExporter) -> ReadableSpan:
    (span,) = [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]
    return span


def answer_one_turn(trace: SessionTrace) -> None:
    trace.turn_started("text")
    trace.user_said("my card is 4111 1111")
    trace.response_started("resp_1", unprompted="model", model="gpt-realtime")
    trace.response_done(
        "resp_1", "completed", TokenCounts(input_text=12, output_text=7), text="Ok."
    )
    trace.ended("client")


def test_a_remote_models_response_is_a_client_chat_span_without_content(
    exporter: InMemorySpanExporter,
) -> None:
    answer_one_turn(session_trace(exporter, provider="openai", capture_content=False))
    span = chat_span(exporter)
    assert span.name == "chat gpt-realtime"
    assert span.kind is SpanKind.CLIENT
    assert dict(span.attributes or {}) == {
        "gateway.response.id": "resp_1",
        "gateway.response.aside": False,
        "gateway.response.status": "completed",
        "gateway.usage.input_tokens": 12,
        "gateway.usage.output_tokens": 7,
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-realtime",
        "gen_ai.response.id": "resp_1",
        "gen_ai.conversation.id": "sess_1",
        "gen_ai.usage.input_tokens": 12,
        "gen_ai.usage.output_tokens": 7,
        "gen_ai.response.finish_reasons": ("stop",),
    }


def test_with_capture_on_the_turns_words_and_the_reply(exporter: InMemorySpanExporter) -> None:
    answer_one_turn(session_trace(exporter, provider="gemini", capture_content=True))
    found = dict(chat_span(exporter).attributes or {})
    assert found["gen_ai.provider.name"] == "gcp.gemini"
    assert json.loads(str(found["gen_ai.input.messages"])) == [
        {"role": "user", "parts": [{"type": "text", "content": "my card is 4111 1111"}]}
    ]
    assert json.loads(str(found["gen_ai.output.messages"])) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "Ok."}],
            "finish_reason": "stop",
        }
    ]
    assert set(found) & CONTENT_ATTRIBUTES == {"gen_ai.input.messages", "gen_ai.output.messages"}


def test_a_turns_words_do_not_reach_the_next_turns_responses(
    exporter: InMemorySpanExporter,
) -> None:
    trace = session_trace(exporter, provider="local", capture_content=True)
    trace.turn_started("text")
    trace.user_said("first words")
    trace.turn_started("speech")  # the user spoke; nothing of it was shown (suppressed)
    trace.response_started("resp_2", unprompted="speech", model="local")
    trace.response_done("resp_2", "completed", TokenCounts(), text="")
    trace.ended("client")
    span = chat_span(exporter)
    assert span.kind is SpanKind.INTERNAL  # the local model runs in this process
    assert not set(span.attributes or {}) & CONTENT_ATTRIBUTES
