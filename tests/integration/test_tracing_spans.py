"""OpenTelemetry spans of real sessions, through the SDK's in-memory exporter: the trees of a text
turn with two parallel tool calls, a voice turn with a barge-in, a confirmation approved turns
later, an upstream reconnect; the ``traceparent`` an HTTP tool sends its API; and nothing secret
in any attribute (docs/operations.md lists the spans)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import SECRET, Gateway, GatewayFactory, first, speak, token
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from test_gateway_gemini import gemini_gateway
from test_gateway_http_tools import TODAY
from test_gateway_openai import LONG_REPLY, FakeFactory, openai_gateway
from test_gateway_openai import fake_factory as fake_factory  # the fixture, here too

from fakes.care_api import FakeCareApi
from fakes.chat.server import FakeChatOptions, FakeChatServer
from fakes.gemini_live.server import FakeGeminiOptions, FakeGeminiServer
from fakes.openai_realtime.server import FakeRealtimeServer
from gateway.observability import Tracing
from gateway.registry import load_registry

CALENDAR = {"title": "Dentist", "start": "2026-12-01T10:00:00+01:00"}


@pytest.fixture
def exported() -> Iterator[tuple[Tracing, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield Tracing(provider), exporter
    provider.shutdown()


def by_name(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    """The spans named ``name``, or of the GenAI operation ``name`` (``chat``, ``execute_tool``:
    their names hold the model's or the tool's)."""
    return [
        s
        for s in spans
        if s.name == name or (s.attributes or {}).get("gen_ai.operation.name") == name
    ]


def one(spans: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    (span,) = by_name(spans, name)
    return span


def parent_of(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return span.context.span_id


def children(
    spans: tuple[ReadableSpan, ...], parent: ReadableSpan, name: str
) -> list[ReadableSpan]:
    return [s for s in by_name(spans, name) if parent_of(s) == span_id(parent)]


def attribute_values(spans: tuple[ReadableSpan, ...]) -> list[str]:
    return [str(value) for span in spans for value in (span.attributes or {}).values()]


# -- a text turn with two parallel tool calls (local model) ----------------------------------------


async def test_a_text_turn_with_two_parallel_tool_calls(
    gateway_factory: GatewayFactory, exported: tuple[Tracing, InMemorySpanExporter]
) -> None:
    tracing, exporter = exported
    gateway = await gateway_factory(tracing=tracing)
    async with gateway.session("text") as client:
        events = await client.say(
            '/tools get_current_time {"timezone": "UTC"} ;; kb_search {"query": "visit fee"}'
        )
        await client.send("session.end")
        await client.wait_closed()
    assert [e["ok"] for e in events if e["type"] == "tool.finished"] == [True, True]
    spans = exporter.get_finished_spans()
    session = one(spans, "gateway.session")
    assert session.parent is None
    assert session.attributes is not None
    assert session.attributes["gateway.session.id"] == client.started["session_id"]
    assert session.attributes["gateway.session.end_reason"] == "client"
    assert len(children(spans, session, "gateway.upstream.connect")) == 1
    (turn,) = children(spans, session, "gateway.turn")
    assert turn.attributes is not None
    assert turn.attributes["gateway.turn.input"] == "text"
    assert turn.attributes["gateway.turn.status"] == "completed"
    calls = children(spans, turn, "execute_tool")
    assert sorted(str((c.attributes or {})["gateway.tool.id"]) for c in calls) == [
        "get_current_time",
        "kb_search",
    ]
    for call in calls:
        assert call.attributes is not None
        assert call.attributes["gateway.tool.decision"] == "executed"
        assert call.attributes["gateway.tool.outcome"] == "ok"
        assert call.context is not None
        assert session.context is not None
        assert call.context.trace_id == session.context.trace_id
    responses = children(spans, turn, "chat")
    assert len(responses) == 2  # the one that called the tools, and the reply
    assert all((r.attributes or {})["gateway.response.status"] == "completed" for r in responses)
    # Every span of the session ends within it.
    assert session.end_time is not None
    assert all(s.end_time is not None and s.end_time <= session.end_time for s in spans)


async def test_a_budget_refusal_is_a_span_with_its_decision(
    gateway_factory: GatewayFactory, exported: tuple[Tracing, InMemorySpanExporter]
) -> None:
    tracing, exporter = exported
    gateway = await gateway_factory(tracing=tracing, text_retrieval_calls=1)
    async with gateway.session("text") as client:
        await client.say('/tools kb_search {"query": "a"} ;; kb_search {"query": "b"}')
    calls = by_name(exporter.get_finished_spans(), "execute_tool")
    decisions = sorted(str((c.attributes or {})["gateway.tool.decision"]) for c in calls)
    assert decisions == ["blocked", "executed"]
    (blocked,) = [c for c in calls if (c.attributes or {})["gateway.tool.decision"] == "blocked"]
    assert blocked.attributes is not None
    assert blocked.attributes["error.type"] == "BUDGET_EXCEEDED"
    assert "gateway.tool.block_reason" in blocked.attributes


# -- a confirmation approved later -----------------------------------------------------------------


async def test_a_confirmation_approved_a_turn_later(
    gateway_factory: GatewayFactory, exported: tuple[Tracing, InMemorySpanExporter]
) -> None:
    tracing, exporter = exported
    gateway = await gateway_factory(tracing=tracing)
    async with gateway.session("text") as client:
        events = await client.say(f"/tool calendar_create_event {json.dumps(CALENDAR)}")
        requested = first(events, "confirmation.requested")
        await client.say("something else first")
        await client.send(
            "confirmation.respond",
            confirmation_id=requested["confirmation_id"],
            decision="approve",
        )
        await client.until("confirmation.resolved")
        await client.send("session.end")
        await client.wait_closed()
    spans = exporter.get_finished_spans()
    first_turn, second_turn, answered = sorted(
        by_name(spans, "gateway.turn"), key=lambda s: (s.attributes or {})["gateway.turn.number"]
    )
    assert (answered.attributes or {})["gateway.turn.input"] == "confirmation"
    (wait,) = children(spans, first_turn, "gateway.confirmation")
    assert wait.attributes is not None
    assert wait.attributes["gateway.confirmation.outcome"] == "approved"
    assert wait.attributes["gateway.tool.id"] == "calendar_create_event"
    assert wait.end_time is not None
    assert second_turn.start_time is not None
    assert wait.end_time > second_turn.start_time  # it waited across the turn
    decisions = [
        str((c.attributes or {})["gateway.tool.decision"]) for c in by_name(spans, "execute_tool")
    ]
    assert "confirmation_pending" in decisions
    assert "confirmed" in decisions
    assert "Dentist" not in " ".join(attribute_values(spans))


# -- OpenAI: a voice turn with a barge-in, and a reconnect -----------------------------------------


async def test_a_voice_turn_interrupted_by_the_user(
    fake_factory: FakeFactory,
    gateway_factory: GatewayFactory,
    exported: tuple[Tracing, InMemorySpanExporter],
) -> None:
    tracing, exporter = exported
    paced = await fake_factory(pace=1.0)
    gateway = await openai_gateway(gateway_factory, paced, tracing=tracing)
    async with gateway.session("voice", audio={"input_rate": 24000, "output_rate": 24000}) as c:
        await speak(c, 300, rate=24000)
        await c.until_reply()
        await c.send("text.send", text=f"/say {LONG_REPLY}")
        started = await c.last("response.started")
        while sum(len(f) for f in c.audio) < 48 * 300:
            await c.next()
        await speak(c, 300, rate=24000)
        await c.until("response.done", response_id=started["response_id"])
        await c.until_reply()
        await c.send("session.end")
        await c.wait_closed()
    spans = exporter.get_finished_spans()
    session = one(spans, "gateway.session")
    turns = sorted(
        children(spans, session, "gateway.turn"),
        key=lambda s: (s.attributes or {})["gateway.turn.number"],
    )
    statuses = [(t.attributes or {})["gateway.turn.status"] for t in turns]
    assert "interrupted" in statuses
    interrupted = turns[statuses.index("interrupted")]
    assert interrupted.attributes is not None
    assert interrupted.attributes["gateway.turn.barge_in"] is True
    (cut,) = [
        r
        for r in by_name(spans, "chat")
        if (r.attributes or {})["gateway.response.id"] == started["response_id"]
    ]
    assert parent_of(cut) == span_id(interrupted)
    assert (cut.attributes or {})["gateway.response.status"] == "interrupted"
    assert turns[-1].attributes is not None
    assert turns[-1].attributes["gateway.turn.input"] == "speech"
    assert turns[-1].attributes["gateway.turn.status"] == "completed"


async def test_an_upstream_reconnect_is_a_span_of_the_session(
    fake_factory: FakeFactory,
    gateway_factory: GatewayFactory,
    exported: tuple[Tracing, InMemorySpanExporter],
) -> None:
    tracing, exporter = exported
    fake: FakeRealtimeServer = await fake_factory()
    gateway = await openai_gateway(gateway_factory, fake, tracing=tracing)
    async with gateway.session("text") as client:
        await client.say("remember the word pineapple")
        await fake.connections[0].expire()
        await fake.wait_connections(2)
        await client.say("what was the word")
        await client.send("session.end")
        await client.wait_closed()
    spans = exporter.get_finished_spans()
    session = one(spans, "gateway.session")
    (reconnect,) = children(spans, session, "gateway.upstream.reconnect")
    assert reconnect.attributes is not None
    assert reconnect.attributes["gateway.upstream.attempts"] == 1
    assert reconnect.start_time is not None
    assert reconnect.end_time is not None
    assert reconnect.end_time >= reconnect.start_time
    assert len(children(spans, session, "gateway.turn")) == 2
    assert "pineapple" not in " ".join(attribute_values(spans))


# -- an HTTP tool's request carries the trace into the API -----------------------------------------


@pytest.fixture
async def api() -> AsyncIterator[FakeCareApi]:
    async with FakeCareApi(jwt_secret=SECRET, today=TODAY) as api:
        yield api


async def test_traceparent_reaches_the_api_and_no_token_is_in_a_span(
    gateway_factory: GatewayFactory,
    project_artifact: Path,
    api: FakeCareApi,
    exported: tuple[Tracing, InMemorySpanExporter],
) -> None:
    tracing, exporter = exported
    registry = load_registry(project_artifact, environ={"CARE_API_URL": api.base_url})
    gateway: Gateway = await gateway_factory(registry=registry, tracing=tracing)
    bearer = token("alice")
    async with gateway.connect(headers={"Authorization": f"Bearer {bearer}"}) as client:
        await client.start("text")
        args: dict[str, Any] = {"status": "scheduled"}
        await client.send("text.send", text=f"/tool care_api_get_appointments {json.dumps(args)}")
        await client.until_reply()
        await client.send("session.end")
        await client.wait_closed()
    spans = exporter.get_finished_spans()
    (call,) = by_name(spans, "execute_tool")
    (request,) = [s for s in spans if s.name.startswith("GET ")]
    assert parent_of(request) == span_id(call)
    assert request.attributes is not None
    assert request.attributes["http.response.status_code"] == 200
    assert request.attributes["http.request.method"] == "GET"
    (seen,) = api.requests
    version, trace_id, parent_id, flags = seen.headers["traceparent"].split("-")
    assert request.context is not None
    assert version == "00"
    assert int(flags, 16) & 1  # sampled
    assert int(trace_id, 16) == request.context.trace_id
    assert int(parent_id, 16) == request.context.span_id
    values = " ".join(attribute_values(spans))
    assert bearer not in values
    assert "alice" not in values  # no user id, no argument value, no result value
    assert "scheduled" not in values


# -- found in review: Gemini's voice turns, chat's agent loop --------------------------------------


async def test_a_gemini_voice_turn_is_a_turn_though_gemini_announces_no_speech(
    gateway_factory: GatewayFactory,
    exported: tuple[Tracing, InMemorySpanExporter],
    tmp_path: Path,
) -> None:
    tracing, exporter = exported
    async with FakeGeminiServer(FakeGeminiOptions(), cert_dir=tmp_path / "certs") as fake:
        gateway = await gemini_gateway(gateway_factory, fake, tracing=tracing)
        async with gateway.session("voice") as client:
            await speak(client, 400)
            await client.until_reply()
            await client.send("session.end")
            await client.wait_closed()
    spans = exporter.get_finished_spans()
    (turn,) = by_name(spans, "gateway.turn")
    assert turn.attributes is not None
    assert turn.attributes["gateway.turn.input"] == "speech"
    assert turn.attributes["gateway.turn.status"] == "completed"
    assert all(parent_of(r) == span_id(turn) for r in by_name(spans, "chat"))


async def test_a_chat_turn_with_tool_rounds_ends_completed(
    gateway_factory: GatewayFactory, exported: tuple[Tracing, InMemorySpanExporter]
) -> None:
    tracing, exporter = exported
    async with FakeChatServer(FakeChatOptions(api_key="sk-chat")) as fake:
        gateway = await gateway_factory(
            provider="chat",
            chat_base_url=fake.base_url,
            chat_api_key="sk-chat",
            tracing=tracing,
        )
        async with gateway.session("text") as client:
            await client.send("text.send", text='/tool get_current_time {"timezone": "UTC"}')
            await client.until("response.done")
            await client.send("session.end")
            await client.wait_closed()
    spans = exporter.get_finished_spans()
    (turn,) = by_name(spans, "gateway.turn")
    assert (turn.attributes or {})["gateway.turn.status"] == "completed"
    (call,) = by_name(spans, "execute_tool")
    assert parent_of(call) == span_id(turn)
