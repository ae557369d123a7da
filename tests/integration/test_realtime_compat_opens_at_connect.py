"""``/v1/realtime`` opens its gateway session, and so its upstream, as the client connects,
while the client's ``session.update`` is on its way: what the client sends meanwhile waits and
arrives whole and in order; an update before the first use reaches the open session (in place,
or by a new session for a voice or tools), a bad one is refused and loses nothing, and a start
refused early is tried again at the first use, whose answer the client gets."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
from harness import Gateway, GatewayFactory, token

from fakes.openai_realtime.server import FakeOptions, FakeRealtimeServer

WITHIN_S = 5.0


@asynccontextmanager
async def gateway_on_fake(
    gateway_factory: GatewayFactory, options: FakeOptions, **settings: Any
) -> AsyncIterator[tuple[Gateway, FakeRealtimeServer]]:
    async with FakeRealtimeServer(options) as fake:
        gateway = await gateway_factory(
            openai_ws_url=fake.ws_url,
            openai_api_key="sk-test",
            upstream_reconnect_attempts=1,
            upstream_reconnect_backoff_s=0.01,
            **settings,
        )
        yield gateway, fake


@asynccontextmanager
async def connected(
    gateway: Gateway, sub: str = "alice"
) -> AsyncIterator[aiohttp.ClientWebSocketResponse]:
    headers = {"Authorization": f"Bearer {token(sub)}"}
    async with gateway.http.ws_connect(
        f"{gateway.url}/v1/realtime?model=gpt-realtime", headers=headers, max_msg_size=0
    ) as ws:
        created = await next_event(ws)
        assert created["type"] == "session.created"
        yield ws


async def next_event(ws: aiohttp.ClientWebSocketResponse) -> dict[str, Any]:
    message = await ws.receive(timeout=WITHIN_S)
    assert message.type is aiohttp.WSMsgType.TEXT, message
    event: dict[str, Any] = json.loads(message.data)
    return event


async def until(ws: aiohttp.ClientWebSocketResponse, kind: str) -> list[dict[str, Any]]:
    """Every event up to and including the first of ``kind``."""
    seen: list[dict[str, Any]] = []
    while not seen or seen[-1]["type"] != kind:
        seen.append(await next_event(ws))
    return seen


def append(audio: bytes) -> str:
    encoded = base64.b64encode(audio).decode()
    return json.dumps({"type": "input_audio_buffer.append", "audio": encoded})


def frames(count: int) -> list[bytes]:
    """20 ms frames of PCM16 at 24 kHz, each one different."""
    return [index.to_bytes(2, "little") * 480 for index in range(1, count + 1)]


async def echoed(ws: aiohttp.ClientWebSocketResponse, count: int) -> list[bytes]:
    """The audio of the next ``count`` deltas; any error event fails."""
    audio: list[bytes] = []
    while len(audio) < count:
        event = await next_event(ws)
        assert event["type"] != "error", event
        if event["type"] == "response.output_audio.delta":
            audio.append(base64.b64decode(event["delta"]))
    return audio


def update(**session: Any) -> str:
    return json.dumps({"type": "session.update", "session": {"type": "realtime", **session}})


async def test_the_upstream_opens_as_the_client_connects(gateway_factory: GatewayFactory) -> None:
    async with (
        gateway_on_fake(gateway_factory, FakeOptions(echo=True)) as (gateway, fake),
        connected(gateway) as ws,
    ):
        # nothing sent yet: the upstream is connecting (or connected) all the same
        upstream = await fake.wait_connections(1, timeout=WITHIN_S)
        await upstream.wait_for("session.created", timeout=WITHIN_S)
        sent = frames(3)
        for frame in sent:
            await ws.send_str(append(frame))
        assert await echoed(ws, 3) == sent
        assert fake.connections == [upstream]  # the same upstream serves the first audio
        assert len(gateway.manager.sessions) == 1


async def test_audio_sent_while_the_upstream_opens_waits_and_arrives_whole_in_order(
    gateway_factory: GatewayFactory,
) -> None:
    slow = FakeOptions(echo=True, created_delay_s=0.3)
    async with (
        gateway_on_fake(gateway_factory, slow) as (gateway, fake),
        connected(gateway) as ws,
    ):
        await ws.send_str(update(output_modalities=["audio"]))  # as a GA client does first
        sent = frames(40)
        for frame in sent:
            await ws.send_str(append(frame))
        assert (await next_event(ws))["type"] == "session.updated"  # not held for the upstream
        assert await echoed(ws, 40) == sent
        assert len(fake.connections) == 1


async def test_modality_and_instructions_before_the_first_use_change_the_open_session(
    gateway_factory: GatewayFactory,
) -> None:
    async with (
        gateway_on_fake(gateway_factory, FakeOptions()) as (gateway, fake),
        connected(gateway) as ws,
    ):
        upstream = await fake.wait_connections(1, timeout=WITHIN_S)
        await ws.send_str(update(output_modalities=["text"], instructions="Answer in haiku."))
        await until(ws, "session.updated")
        item = {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "hi"}],
        }
        await ws.send_str(json.dumps({"type": "conversation.item.create", "item": item}))
        await ws.send_str(json.dumps({"type": "response.create"}))
        events = await until(ws, "response.done")
        assert not [e for e in events if e["type"] == "error"]
        assert [e for e in events if e["type"] == "response.output_text.delta"]
        assert len(fake.connections) == 1  # changed in place, not reconnected
        assert upstream.session["output_modalities"] == ["text"]
        assert "Answer in haiku." in upstream.session["instructions"]


async def test_a_voice_before_the_first_use_opens_a_new_session_the_client_never_hears_of(
    gateway_factory: GatewayFactory,
) -> None:
    async with (
        gateway_on_fake(gateway_factory, FakeOptions(echo=True)) as (gateway, fake),
        connected(gateway) as ws,
    ):
        first = await fake.wait_connections(1, timeout=WITHIN_S)
        await ws.send_str(update(audio={"output": {"voice": "verse"}}))
        assert (await next_event(ws))["type"] == "session.updated"
        sent = frames(5)
        for frame in sent:
            await ws.send_str(append(frame))
        assert await echoed(ws, 5) == sent  # no error, no end: the first session went quietly
        second = fake.connections[-1]
        assert second is not first
        assert second.session["audio"]["output"]["voice"] == "verse"
        async with asyncio.timeout(WITHIN_S):
            await first.closed.wait()
        assert len(gateway.manager.sessions) == 1


async def test_a_bad_session_update_is_refused_and_loses_nothing(
    gateway_factory: GatewayFactory,
) -> None:
    async with (
        gateway_on_fake(gateway_factory, FakeOptions(echo=True)) as (gateway, fake),
        connected(gateway) as ws,
    ):
        bad = update(output_modalities=["audio", "text"])
        await ws.send_str(json.dumps({**json.loads(bad), "event_id": "evt_bad"}))
        sent = frames(3)
        for frame in sent:
            await ws.send_str(append(frame))
        error = await next_event(ws)
        assert error["type"] == "error"
        assert error["error"]["event_id"] == "evt_bad"
        assert error["error"]["param"] == "session.output_modalities"
        assert await echoed(ws, 3) == sent
        assert len(fake.connections) == 1


async def test_a_start_refused_early_is_tried_again_at_the_first_use(
    gateway_factory: GatewayFactory,
) -> None:
    one_each = gateway_on_fake(gateway_factory, FakeOptions(echo=True), max_sessions_per_user=1)
    async with one_each as (gateway, _), connected(gateway) as holder:
        await holder.send_str(append(frames(1)[0]))
        await echoed(holder, 1)
        # the user's one session is taken: this one's early start is refused, silently, and
        # its first use is refused as it was before anything opened early
        async with connected(gateway) as refused:
            await refused.send_str(append(frames(1)[0]))
            error = await next_event(refused)
            assert error["type"] == "error"
            assert error["error"]["code"] == "rate_limited"
            closing = await refused.receive(timeout=WITHIN_S)
            assert closing.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
        async with connected(gateway) as waiting:
            await waiting.send_str(update(instructions="Be brief."))
            assert (await next_event(waiting))["type"] == "session.updated"
            (held,) = gateway.manager.sessions.values()
            await holder.close()  # the slot is free by the time this one is used
            async with asyncio.timeout(WITHIN_S):
                await held.ended.wait()  # set once its slot is free
            sent = frames(2)
            for frame in sent:
                await waiting.send_str(append(frame))
            assert await echoed(waiting, 2) == sent


async def test_an_upstream_refusal_the_client_waited_for_is_its_answer_not_tried_twice(
    gateway_factory: GatewayFactory,
) -> None:
    silent = FakeOptions(session_created=False)  # the upstream never opens: a fatal refusal
    async with (
        gateway_on_fake(gateway_factory, silent, upstream_connect_timeout_s=0.3) as (gw, fake),
        connected(gw) as ws,
    ):
        await ws.send_str(update(instructions="Be brief."))
        assert (await next_event(ws))["type"] == "session.updated"  # once the start failed
        await ws.send_str(append(frames(1)[0]))
        error = await next_event(ws)
        assert error["type"] == "error"
        assert error["error"]["code"] == "upstream_unavailable"
        closing = await ws.receive(timeout=WITHIN_S)
        assert closing.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
        assert len(fake.connections) == 1
