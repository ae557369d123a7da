"""The official ``openai`` SDK against the fake chat-completions server, over loopback sockets.

The proof that the fake is faithful: the SDK parses every chunk, its errors map to the SDK's
exception classes (and its own retries honour ``retry-after-ms``), and the gateway's assembler
and inline filter read what the fake streams.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import httpx2
import openai
import pytest
from cli_kit import served
from openai.types.chat import ChatCompletionChunk

from fakes.chat.brain import Cut, HttpError, Text
from fakes.chat.server import FakeChatOptions, FakeChatServer
from transports.chat.assembler import ToolCallAssembler
from transports.chat.inline import InlineCall, InlineMarkerFilter, MarkerProblem

TIMEOUT_S = 10
TOOLS: Any = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
PARALLEL = '/tools get_weather {"city": "Paris"} ;; get_time {"zone": "Europe/Paris", "h24": true}'


@asynccontextmanager
async def chat_server(**options: Any) -> AsyncIterator[FakeChatServer]:
    async with FakeChatServer(FakeChatOptions(**options)) as server:
        yield server


@asynccontextmanager
async def sdk(
    server: FakeChatServer, api_key: str = "sk-test", max_retries: int = 0
) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(
        base_url=server.base_url, api_key=api_key, max_retries=max_retries
    ) as client:
        yield client


def ask(text: str) -> Any:
    return [{"role": "user", "content": text}]


async def stream(client: openai.AsyncOpenAI, **request: Any) -> list[ChatCompletionChunk]:
    request.setdefault("model", "gpt-fake")
    async with asyncio.timeout(TIMEOUT_S):
        chunks = await client.chat.completions.create(stream=True, **request)
        return [chunk async for chunk in chunks]


async def read_contents(chunks: openai.AsyncStream[ChatCompletionChunk], seen: list[str]) -> None:
    async with asyncio.timeout(TIMEOUT_S):
        async for chunk in chunks:
            seen.append(chunk.choices[0].delta.content or "")


def text_of(chunks: list[ChatCompletionChunk]) -> str:
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


async def test_a_text_stream_assembled_by_the_sdk() -> None:
    async with chat_server() as server, sdk(server) as client:
        chunks = await stream(client, messages=ask("hello there"))
    assert text_of(chunks) == "You said: hello there"
    first, last = chunks[0].choices[0], chunks[-1].choices[0]
    assert (first.delta.role, first.delta.content) == ("assistant", "")
    assert last.finish_reason == "stop"
    assert all(c.choices[0].finish_reason is None for c in chunks[:-1])
    assert len({c.id for c in chunks}) == 1
    assert chunks[0].id.startswith("chatcmpl-")
    assert chunks[0].object == "chat.completion.chunk"
    assert chunks[0].model == "gpt-fake"
    assert server.requests[0]["messages"] == ask("hello there")
    assert server.responses == [Text("You said: hello there")]


async def test_parallel_calls_stream_in_small_interleaved_fragments() -> None:
    async with chat_server(fragment_size=4) as server, sdk(server) as client:
        chunks = await stream(client, messages=ask(PARALLEL), tools=TOOLS)
    pieces = [p for c in chunks if c.choices for p in c.choices[0].delta.tool_calls or ()]
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    heads = [p for p in pieces if p.function and p.function.name]
    fragments = [p for p in pieces if p.function and p.function.arguments]
    assert [(p.index, p.function and p.function.name) for p in heads] == [
        (0, "get_weather"),
        (1, "get_time"),
    ]
    assert pieces.index(heads[-1]) < pieces.index(fragments[0])  # first pieces come first
    assert all(len(p.function.arguments or "") <= 4 for p in fragments if p.function)
    indexes = [p.index for p in fragments]
    overlap = 2 * min(indexes.count(0), indexes.count(1))
    assert indexes[:overlap] == [0, 1] * (overlap // 2)  # round-robin while both have some
    joined = {
        index: "".join(
            p.function.arguments or "" for p in fragments if p.index == index and p.function
        )
        for index in (0, 1)
    }
    assert joined == {0: '{"city": "Paris"}', 1: '{"zone": "Europe/Paris", "h24": true}'}
    assembler = ToolCallAssembler()
    for c in chunks:
        if c.choices:
            assembler.feed(c.choices[0].delta.tool_calls)
    calls = assembler.finish()
    assert [(c.name, c.arguments) for c in calls] == [
        ("get_weather", joined[0]),
        ("get_time", joined[1]),
    ]
    assert [c.call_id for c in calls] == [heads[0].id, heads[1].id]


async def test_split_names_and_omitted_ids_leave_the_assembler_to_cope() -> None:
    async with chat_server(omit_ids=True, split_names=True) as server, sdk(server) as client:
        chunks = await stream(client, messages=ask(PARALLEL), tools=TOOLS)
    pieces = [p for c in chunks if c.choices for p in c.choices[0].delta.tool_calls or ()]
    assert pieces
    assert all(p.id is None for p in pieces)
    assembler = ToolCallAssembler(new_id=iter(["call_own_1", "call_own_2"]).__next__)
    for c in chunks:
        if c.choices:
            assembler.feed(c.choices[0].delta.tool_calls)
    calls = assembler.finish()
    assert [(c.call_id, c.name) for c in calls] == [
        ("call_own_1", "get_weather"),
        ("call_own_2", "get_time"),
    ]


async def test_include_usage_adds_a_last_chunk_without_choices() -> None:
    async with chat_server() as server, sdk(server) as client:
        chunks = await stream(
            client, messages=ask("count me"), stream_options={"include_usage": True}
        )
    *body, last = chunks
    assert last.choices == []
    assert last.usage is not None
    assert last.usage.prompt_tokens > 0
    assert last.usage.completion_tokens > 0
    assert last.usage.total_tokens == last.usage.prompt_tokens + last.usage.completion_tokens
    assert all(c.usage is None for c in body)


async def test_a_marker_split_across_chunks_is_read_whole_by_the_inline_filter() -> None:
    system = {"role": "system", "content": "To call a tool write [TOOL_CALL:{...}]."}
    messages = [system, *ask('/tool get_weather {"city": "Paris"}')]
    async with chat_server(text_chunk_chars=5) as server, sdk(server) as client:
        chunks = await stream(client, messages=messages)
    contents = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert all(len(piece) <= 5 for piece in contents)
    marker_filter = InlineMarkerFilter()
    shown, found = "", list[InlineCall | MarkerProblem]()
    for piece in contents:
        text, calls = marker_filter.feed(piece)
        shown, found = shown + text, found + calls
    rest, more = marker_filter.finish()
    assert shown + rest == "Let me check that. "
    (call,) = found + more
    assert isinstance(call, InlineCall)
    assert (call.tool, call.parameters) == ("get_weather", {"city": "Paris"})


async def test_a_wrong_key_is_a_401() -> None:
    async with chat_server(api_key="sk-right") as server:
        async with sdk(server, api_key="sk-wrong") as client:
            with pytest.raises(openai.AuthenticationError) as refused:
                await stream(client, messages=ask("hi"))
        async with sdk(server, api_key="sk-right") as client:
            assert text_of(await stream(client, messages=ask("hi"))) == "You said: hi"
    assert refused.value.status_code == 401
    assert refused.value.code == "invalid_api_key"
    assert isinstance(server.responses[0], HttpError)


async def test_a_429_without_retries_is_a_rate_limit_error() -> None:
    async with chat_server() as server, sdk(server) as client:
        with pytest.raises(openai.RateLimitError) as limited:
            await stream(client, messages=ask("/http 429 too many"))
    assert limited.value.code == "rate_limit_exceeded"
    assert limited.value.message == "Error code: 429 - too many"
    assert limited.value.response.headers["retry-after-ms"] == "1"
    assert len(server.requests) == 1


async def test_the_sdk_retries_a_429_once_and_succeeds() -> None:
    async with chat_server() as server, sdk(server, max_retries=2) as client:
        chunks = await stream(client, messages=ask("/http 429 1"))
    assert text_of(chunks) == "You said: /http 429 1"
    assert len(server.requests) == 2
    assert isinstance(server.responses[0], HttpError)
    assert server.counters == {"http:/http 429 1": 2}


async def test_an_unanswered_tool_call_is_a_400() -> None:
    messages: Any = [
        *ask("/tool get_weather {}"),
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_lost",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": "{}"},
                }
            ],
        },
        *ask("and now?"),
    ]
    async with chat_server() as server, sdk(server) as client:
        with pytest.raises(openai.BadRequestError) as rejected:
            await stream(client, messages=messages, tools=TOOLS)
    assert rejected.value.status_code == 400
    assert "call_lost" in rejected.value.message
    assert rejected.value.code == "invalid_request_error"


async def test_a_cut_stream_raises_in_the_iteration() -> None:
    async with chat_server() as server, sdk(server) as client:
        chunks = await client.chat.completions.create(
            model="gpt-fake", messages=ask("/cut half an answer"), stream=True
        )
        seen: list[str] = []
        with pytest.raises(openai.APIConnectionError) as broken:
            await read_contents(chunks, seen)
    assert "".join(seen) == "half an answer"
    assert isinstance(broken.value.__cause__, httpx2.RemoteProtocolError)
    assert server.responses == [Cut("half an answer")]


async def test_a_completion_without_streaming() -> None:
    async with chat_server() as server, sdk(server) as client:
        async with asyncio.timeout(TIMEOUT_S):
            called = await client.chat.completions.create(
                model="gpt-fake", messages=ask('/tool get_weather {"city": "Oslo"}'), tools=TOOLS
            )
            said = await client.chat.completions.create(model="gpt-fake", messages=ask("hi"))
    (choice,) = called.choices
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    (call,) = choice.message.tool_calls or []
    assert call.type == "function"
    assert (call.function.name, call.function.arguments) == ("get_weather", '{"city": "Oslo"}')
    assert re.fullmatch(r"call_[0-9a-f]{24}", call.id)
    assert called.object == "chat.completion"
    assert called.usage is not None
    assert said.choices[0].message.content == "You said: hi"
    assert said.choices[0].finish_reason == "stop"


async def test_raw_sse_other_routes_and_bad_json() -> None:
    body = {"model": "gpt-fake", "messages": ask("hi"), "stream": True}
    async with chat_server() as server, aiohttp.ClientSession() as http:
        root = server.base_url.removesuffix("/v1")
        async with asyncio.timeout(TIMEOUT_S):
            async with http.post(f"{root}/chat/completions", json=body) as response:
                assert response.status == 200
                assert response.content_type == "text/event-stream"
                raw = await response.text()
            async with http.post(f"{server.base_url}/embeddings", json=body) as response:
                missing = (response.status, await response.json())
            async with http.post(f"{server.base_url}/chat/completions", data=b"{nope") as response:
                bad = (response.status, await response.json())
    events = raw.split("\n\n")
    assert events[-2:] == ["data: [DONE]", ""]
    assert all(e.startswith("data: {") for e in events[:-2])
    assert missing[0] == 404
    assert missing[1]["error"]["message"] == "Invalid URL (POST /v1/embeddings)"
    assert bad[0] == 400
    assert set(bad[1]["error"]) == {"message", "type", "param", "code"}
    assert len(server.requests) == 1


async def test_closing_breaks_off_a_slow_stream() -> None:
    async with chat_server() as server, sdk(server) as client:
        reading = asyncio.create_task(stream(client, messages=ask("/slow 60000 too late")))
        await server.wait_for_requests(1)
        async with asyncio.timeout(TIMEOUT_S):
            await server.stop()
            with pytest.raises(openai.APIConnectionError):
                await reading


async def test_the_command_line_serves_until_sigterm() -> None:
    args = ("--port", "0", "--api-key", "sk-cli", "--fragment-size", "100")
    listening = rb"listening (http://127\.0\.0\.1:\d+/v1)\n"
    async with served("fakes.chat", *args, listening=listening) as cli:
        async with openai.AsyncOpenAI(
            base_url=cli.match.group(1).decode(), api_key="sk-cli", max_retries=0
        ) as client:
            chunks = await stream(client, messages=ask('/tool f {"a": 1}'), tools=TOOLS)
        assert await cli.terminate() == 0
    fragments = [
        p.function.arguments
        for c in chunks
        if c.choices
        for p in c.choices[0].delta.tool_calls or ()
        if p.function and p.function.arguments
    ]
    assert fragments == ['{"a": 1}']  # --fragment-size reached the options
    assert json.loads(fragments[0]) == {"a": 1}
