"""The chat-completions fake's fault modes over real sockets, through the official SDK: a reset
request, an HTTP error with the API's body, a stream that sends headers and then nothing, one
that stops after N chunks. Chat has no message to wait for after a stall: these tests read for
``QUIET_S`` to show that nothing comes."""

from __future__ import annotations

import asyncio
import errno
from typing import Any

import aiohttp
import openai
import pytest
from fault_kit import (
    OPENAI_ERRORS,
    QUIET_S,
    SDK_ERRORS,
    TIMEOUT_S,
    applied_event,
    bounded,
    chat_sdk,
    chat_text,
    settled,
)

from fakes.chat.server import FakeChatOptions, FakeChatServer
from fakes.faults import UpstreamFaults

# Chat completions ------------------------------------------------------------------------------

CHAT_BODY: dict[str, Any] = {
    "model": "gpt-fake",
    "messages": [{"role": "user", "content": "/say one two three"}],
}


async def quiet(read: Any) -> None:
    """``read()`` gets nothing for ``QUIET_S``: the stalled answer sends nothing more."""
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(QUIET_S):
            await read()


async def test_chat_refuse_resets_the_request_until_switched_off() -> None:
    async with FakeChatServer(faults=UpstreamFaults(refuse=True)) as server:
        async with aiohttp.ClientSession() as http:
            with pytest.raises(aiohttp.ClientOSError) as caught:
                async with asyncio.timeout(TIMEOUT_S):
                    await http.post(f"{server.base_url}/chat/completions", json=CHAT_BODY)
        assert caught.value.errno == errno.ECONNRESET
        async with chat_sdk(server) as client:
            with pytest.raises(openai.APIConnectionError) as sdk_caught:
                await chat_text(client)
            cause: BaseException | None = sdk_caught.value
            while cause is not None and not isinstance(cause, ConnectionResetError):
                cause = cause.__cause__ or cause.__context__
            assert cause is not None  # the SDK's "Connection error." is the reset
            server.faults.refuse = False
            assert await chat_text(client) == "hello"
        assert server.faults.applied == {"refuse": 2}
        assert len(server.requests) == 1  # a refused request is never read


@pytest.mark.parametrize("status", sorted(OPENAI_ERRORS))
async def test_chat_status_answers_with_the_api_error(status: int) -> None:
    async with FakeChatServer(faults=UpstreamFaults(status=status)) as server:
        async with aiohttp.ClientSession() as http:
            url = f"{server.base_url}/chat/completions"
            async with asyncio.timeout(TIMEOUT_S), http.post(url, json=CHAT_BODY) as response:
                body = await response.json()
        async with chat_sdk(server) as client:
            with pytest.raises(SDK_ERRORS[status]) as caught:
                await chat_text(client)
        assert server.requests == []
    assert response.status == status
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["type"], error["code"], error["param"]) == (*OPENAI_ERRORS[status], None)
    assert caught.value.status_code == status
    assert response.headers.get("Retry-After") == ("1" if status == 429 else None)


async def test_chat_fail_next_fails_exactly_the_next_requests() -> None:
    async with FakeChatServer() as server:
        server.faults.fail_next("status", 2, status=503)
        async with chat_sdk(server) as client:
            for _ in range(2):
                with pytest.raises(openai.InternalServerError):
                    await chat_text(client)
            assert await chat_text(client) == "hello"
        server.faults.fail_next("status", 2, status=429)
        async with chat_sdk(server, max_retries=2) as client:  # the SDK's own retries get by
            assert await chat_text(client, "/say retried") == "retried"
        assert server.faults.applied == {"status": 4}
        assert len(server.requests) == 2


async def test_chat_stall_first_output_streams_headers_then_nothing() -> None:
    async with FakeChatServer(faults=UpstreamFaults(stall_first_output=True)) as server:
        stalled = applied_event(server.faults, "stall_first")
        before = asyncio.all_tasks()
        async with aiohttp.ClientSession() as http:
            url = f"{server.base_url}/chat/completions"
            body = {**CHAT_BODY, "stream": True}
            async with asyncio.timeout(TIMEOUT_S), http.post(url, json=body) as response:
                assert response.status == 200
                assert response.content_type == "text/event-stream"
                await bounded(stalled)
                await quiet(response.content.readany)
            # The client leaves the stalled stream; so does its handler.
        await settled(before)
        assert server.requests == [body]  # taken as usual


async def test_chat_stall_first_output_holds_a_whole_answer_back() -> None:
    async with FakeChatServer(faults=UpstreamFaults(stall_first_output=True)) as server:
        stalled = applied_event(server.faults, "stall_first")
        before = asyncio.all_tasks()
        async with aiohttp.ClientSession() as http:
            url = f"{server.base_url}/chat/completions"
            answer = asyncio.create_task(http.post(url, json=CHAT_BODY))
            await bounded(stalled)
            await quiet(lambda: asyncio.shield(answer))  # not even a status line
            answer.cancel()  # the client gives up
            with pytest.raises(asyncio.CancelledError):
                await answer
        await settled(before)
        server.faults.clear()
        async with chat_sdk(server) as client:
            assert await chat_text(client) == "hello"


async def test_chat_stall_mid_response_sends_n_chunks_then_nothing() -> None:
    async with FakeChatServer(FakeChatOptions(empty_deltas=False)) as server:
        stalled = applied_event(server.faults, "stall_mid")
        server.faults.fail_next("stall_mid", 1, after=3)
        before = asyncio.all_tasks()
        async with chat_sdk(server) as client:
            async with asyncio.timeout(TIMEOUT_S):
                stream = await client.chat.completions.create(stream=True, **CHAT_BODY)
                chunks = [await anext(stream) for _ in range(3)]
            await bounded(stalled)
            await quiet(lambda: anext(stream))
            await stream.close()  # the client leaves the stalled stream
            async with asyncio.timeout(TIMEOUT_S):
                again = await client.chat.completions.create(stream=True, **CHAT_BODY)
                whole = [chunk async for chunk in again]
        await settled(before)
    deltas = [chunk.choices[0].delta for chunk in chunks]
    assert [(d.role, d.content) for d in deltas] == [
        ("assistant", ""),
        (None, "one "),
        (None, "two "),
    ]
    assert "".join(c.choices[0].delta.content or "" for c in whole) == "one two three"
    assert whole[-1].choices[0].finish_reason == "stop"
    assert server.faults.applied == {"stall_mid": 1}
