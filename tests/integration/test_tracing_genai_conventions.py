"""The spans in OpenTelemetry's GenAI vocabulary (semantic conventions 1.41.0), through the SDK's
in-memory exporter: a text turn with tool calls over the local model makes ``chat {model}``
spans and ``execute_tool {tool}`` spans with the conventions' attributes and the session as
``gen_ai.conversation.id``, and no content at all; with the operator's content capture on,
the content as people may already see it: arguments with ``secretArguments`` blanked, results
through ``resultAllowlist``, the reply as the client got it (none while its transcript is
suppressed). docs/operations.md section 2 describes them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import RUNNER_TOOLS, Client, GatewayFactory, first, registry_with_variant
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from gateway.observability import Tracing
from gateway.observability.genai import CONTENT_ATTRIBUTES, GENAI_SEMCONV_VERSION, SCHEMA_URL
from gateway.registry import Registry, load_registry
from registry_build import build_registry
from registry_build.build import serialize_artifact

REPO = Path(__file__).resolve().parents[2]
PIN = "4242-7777"
WORD = "marmalade"
TURN = f'/tools pin_echo {{"text": "{WORD}", "pin": "{PIN}"}} ;; secretive {{}}'
# What secretive returns outside its resultAllowlist: never on a span, capture or not.
HIDDEN = ("123-45-6789", "tok-1", "api-key-xyz")


def recording(capture_content: bool) -> tuple[Tracing, InMemorySpanExporter, TracerProvider]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return Tracing(provider, capture_content=capture_content), exporter, provider


@pytest.fixture
def traced() -> Iterator[tuple[Tracing, InMemorySpanExporter]]:
    tracing, exporter, provider = recording(capture_content=False)
    yield tracing, exporter
    provider.shutdown()


@pytest.fixture
def traced_with_content() -> Iterator[tuple[Tracing, InMemorySpanExporter]]:
    tracing, exporter, provider = recording(capture_content=True)
    yield tracing, exporter
    provider.shutdown()


@pytest.fixture
def pin_registry(tmp_path: Path) -> Registry:
    """The runner's fixture tools plus pin_echo: echo with a secret argument, ``pin``."""
    parameters = json.loads((RUNNER_TOOLS / "echo" / "schema.json").read_text())["parameters"]
    parameters["properties"]["pin"] = {"type": "string", "minLength": 1, "maxLength": 20}
    return registry_with_variant(
        tmp_path, "echo", "pin_echo", parameters=parameters, secretArguments=["pin"]
    )


def operation(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in spans if (s.attributes or {}).get("gen_ai.operation.name") == name]


def attrs(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def every_value(spans: tuple[ReadableSpan, ...]) -> str:
    """Every attribute value of every span and of its events, as one text."""
    values = [str(v) for s in spans for v in (s.attributes or {}).values()]
    values += [str(v) for s in spans for e in s.events for v in (e.attributes or {}).values()]
    values += [e.name for s in spans for e in s.events]
    return "\n".join(values)


async def tool_turn(client: Client) -> tuple[list[dict[str, Any]], str]:
    """The turn's events and the reply's text as the client received it."""
    events = await client.say(TURN)
    await client.send("session.end")
    await client.wait_closed()
    return events, str(events[-1]["text"])


async def test_a_tool_turn_in_the_genai_vocabulary_without_content(
    gateway_factory: GatewayFactory,
    pin_registry: Registry,
    traced: tuple[Tracing, InMemorySpanExporter],
) -> None:
    tracing, exporter = traced
    gateway = await gateway_factory(registry=pin_registry, tracing=tracing)
    async with gateway.session("text") as client:
        events, reply = await tool_turn(client)
    session_id = client.started["session_id"]
    spans = exporter.get_finished_spans()
    assert all(s.instrumentation_scope is not None for s in spans)
    assert {s.instrumentation_scope.schema_url for s in spans if s.instrumentation_scope} == {
        SCHEMA_URL
    }
    assert SCHEMA_URL.endswith(f"/{GENAI_SEMCONV_VERSION}")
    assert GENAI_SEMCONV_VERSION == "1.41.0"

    (session,) = [s for s in spans if s.name == "gateway.session"]
    assert attrs(session)["gen_ai.conversation.id"] == session_id
    (turn,) = [s for s in spans if s.name == "gateway.turn"]

    # The model's responses: the one that called the tools, and the reply.
    chats = sorted(operation(spans, "chat"), key=lambda s: s.start_time or 0)
    started = [e["response_id"] for e in events if e["type"] == "response.started"]
    assert [attrs(c)["gen_ai.response.id"] for c in chats] == started
    for chat in chats:
        assert chat.name == "chat local"
        assert chat.kind is SpanKind.INTERNAL  # the local model runs in the gateway's process
        assert chat.parent is not None
        assert turn.context is not None
        assert chat.parent.span_id == turn.context.span_id
        found = attrs(chat)
        assert found["gen_ai.provider.name"] == "gateway.local"
        assert found["gen_ai.request.model"] == "local"
        assert found["gen_ai.conversation.id"] == session_id
        assert found["gen_ai.response.id"] == found["gateway.response.id"]
        assert isinstance(found["gen_ai.usage.input_tokens"], int)
        assert isinstance(found["gen_ai.usage.output_tokens"], int)
        assert found["gen_ai.usage.input_tokens"] == found["gateway.usage.input_tokens"]
    assert [attrs(c)["gen_ai.response.finish_reasons"] for c in chats] == [
        ("tool_call",),
        ("stop",),
    ]

    # Each tool call.
    tools = operation(spans, "execute_tool")
    call_ids = {e["name"]: e["call_id"] for e in events if e["type"] == "tool.started"}
    assert {t.name for t in tools} == {"execute_tool pin_echo", "execute_tool secretive"}
    for tool in tools:
        found = attrs(tool)
        name = found["gen_ai.tool.name"]
        assert tool.name == f"execute_tool {name}"
        assert tool.kind is SpanKind.INTERNAL
        assert found["gen_ai.tool.call.id"] == call_ids[name]
        assert found["gen_ai.tool.type"] == "function"
        assert found["gen_ai.conversation.id"] == session_id
        assert found["gateway.tool.outcome"] == "ok"
        assert tool.parent is not None
        assert turn.context is not None
        assert tool.parent.span_id == turn.context.span_id

    # No content: no content attribute, and nothing the user typed, a call's arguments or
    # results, or the reply (which quotes the results) anywhere.
    assert not [key for s in spans for key in attrs(s) if key in CONTENT_ATTRIBUTES]
    assert WORD in reply
    assert "visible" in reply
    values = every_value(spans)
    for text in (WORD, PIN, "visible", reply, *HIDDEN):
        assert text not in values


async def test_with_content_capture_the_content_as_people_may_see_it(
    gateway_factory: GatewayFactory,
    pin_registry: Registry,
    traced_with_content: tuple[Tracing, InMemorySpanExporter],
) -> None:
    tracing, exporter = traced_with_content
    gateway = await gateway_factory(registry=pin_registry, tracing=tracing)
    async with gateway.session("text") as client:
        events, reply = await tool_turn(client)
    spans = exporter.get_finished_spans()
    finished = {e["name"]: e for e in events if e["type"] == "tool.finished"}
    tools = {attrs(t)["gen_ai.tool.name"]: attrs(t) for t in operation(spans, "execute_tool")}

    pin_echo = tools["pin_echo"]
    assert json.loads(pin_echo["gen_ai.tool.call.arguments"]) == {
        "text": WORD,
        "pin": "[redacted]",  # secretArguments, as tool.started shows them
    }
    assert json.loads(pin_echo["gen_ai.tool.call.result"]) == finished["pin_echo"]["data"]
    secretive = tools["secretive"]
    assert json.loads(secretive["gen_ai.tool.call.arguments"]) == {}
    assert json.loads(secretive["gen_ai.tool.call.result"]) == {
        "public": "visible",
        "items": [{"name": "a"}, {"name": "b"}],
        "nested": {"shown": 1},
    }
    assert json.loads(secretive["gen_ai.tool.call.result"]) == finished["secretive"]["data"]
    tool_values = "\n".join(str(v) for found in tools.values() for v in found.values())
    for text in (PIN, *HIDDEN):
        assert text not in tool_values

    chats = sorted(operation(spans, "chat"), key=lambda s: s.start_time or 0)
    typed = [{"role": "user", "parts": [{"type": "text", "content": TURN}]}]
    assert [json.loads(attrs(c)["gen_ai.input.messages"]) for c in chats] == [typed, typed]
    calling, replying = chats
    assert "gen_ai.output.messages" not in attrs(calling)  # it said nothing, it called tools
    assert json.loads(attrs(replying)["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": reply}],
            "finish_reason": "stop",
        }
    ]
    assert first(events, "response.done", response_id=attrs(replying)["gen_ai.response.id"])


@pytest.fixture(scope="module")
def intent_registry(tmp_path_factory: pytest.TempPathFactory) -> Registry:
    """The project's tools plus suppress_reply (SUPPRESS_TRANSCRIPT for the reply)."""
    result = build_registry([REPO / "tools", REPO / "tests" / "fixtures" / "intent_tools"])
    assert result.artifact is not None, [str(e) for e in result.errors]
    out = tmp_path_factory.mktemp("registry") / "intent_registry.json"
    out.write_bytes(serialize_artifact(result.artifact))
    return load_registry(out)


async def test_a_suppressed_transcript_is_not_captured_either(
    gateway_factory: GatewayFactory,
    intent_registry: Registry,
    traced_with_content: tuple[Tracing, InMemorySpanExporter],
) -> None:
    tracing, exporter = traced_with_content
    gateway = await gateway_factory(registry=intent_registry, tracing=tracing)
    async with gateway.session("voice") as client:
        hidden = await client.say("/tool suppress_reply {}")
        shown = await client.say("hello")
        await client.send("session.end")
        await client.wait_closed()
    assert hidden[-1]["text"] == ""  # the client got no words of this reply
    assert shown[-1]["text"] == "You said: hello"
    chats = {
        attrs(c)["gen_ai.response.id"]: attrs(c)
        for c in operation(exporter.get_finished_spans(), "chat")
    }
    assert "gen_ai.output.messages" not in chats[hidden[-1]["response_id"]]
    assert json.loads(chats[shown[-1]["response_id"]]["gen_ai.output.messages"])[0]["parts"] == [
        {"type": "text", "content": "You said: hello"}
    ]
