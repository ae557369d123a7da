"""The client socket (``gateway.edges.socket``) over real sockets: the upgrade, RFC 6455 faults
and their close codes, pings and keepalive, and the audio hot path keeping the client's order."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
import pytest
from aiohttp import web
from harness import Fakes, Gateway, GatewayFactory, pcm_silence, token
from raw_socket_kit import RawClient, raw_client
from websockets.asyncio.client import connect as ws_connect

from fakes.openai_realtime.server import FakeOptions, FakeRealtimeServer
from gateway.edges.socket import ClientSocket
from rfc6455.frames import (
    OP_CLOSE,
    OP_CONTINUATION,
    OP_PING,
    OP_PONG,
    OP_TEXT,
    Message,
    close_code,
    close_payload,
    encode_frame,
)

pytestmark = pytest.mark.both_loops

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def upgrade_status(gateway: Gateway, **headers: str) -> tuple[int, dict[str, str], str]:
    base = {
        "Upgrade": "websocket",
        "Connection": "Upgrade",
        "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode(),
        "Sec-WebSocket-Version": "13",
        "Authorization": f"Bearer {token()}",
    }
    base.update(headers)
    async with gateway.http.get(f"{gateway.url}/v1/session", headers=base) as response:
        return response.status, dict(response.headers), await response.text()


@pytest.mark.parametrize(
    ("headers", "status", "said"),
    [
        ({"Upgrade": "h2c"}, 400, "Upgrade: websocket"),
        ({"Connection": "keep-alive"}, 400, "Connection: Upgrade"),
        ({"Sec-WebSocket-Version": "8"}, 426, "version"),
        ({"Sec-WebSocket-Key": "short"}, 400, "Sec-WebSocket-Key"),
    ],
)
async def test_an_upgrade_the_rfc_does_not_allow_is_refused_plainly(
    gateway: Gateway, headers: dict[str, str], status: int, said: str
) -> None:
    got, response_headers, body = await upgrade_status(gateway, **headers)
    assert got == status
    assert said in json.loads(body)["error"]["message"]
    if status == 426:
        assert response_headers["Sec-WebSocket-Version"] == "13"


async def test_auth_is_checked_before_the_upgrade(gateway: Gateway) -> None:
    status, _, body = await upgrade_status(gateway, Authorization="Bearer nope")
    assert status == 401
    assert json.loads(body)["error"]["code"] == "unauthorized"


async def test_a_ping_is_answered_with_its_payload(gateway: Gateway) -> None:
    async with raw_client(gateway.url) as client:
        client.send(OP_PING, b"are you there")
        assert await client.until(OP_PONG) == (OP_PONG, b"are you there")


@pytest.mark.parametrize(
    ("frame", "masked", "code"),
    [
        ((OP_TEXT, b'{"type":"ping"}'), False, 1002),  # a client must mask
        ((OP_TEXT, b"\xff\xfe"), True, 1007),  # not UTF-8
        ((0x3, b"x"), True, 1002),  # a reserved opcode
    ],
)
async def test_a_client_that_breaks_the_protocol_gets_the_close_code_that_says_why(
    gateway: Gateway, frame: tuple[int, bytes], masked: bool, code: int
) -> None:
    async with raw_client(gateway.url) as client:
        client.send(*frame, masked=masked)
        closing = await client.until(OP_CLOSE)
        assert isinstance(closing[1], bytes)
        assert close_code(closing[1])[0] == code
        assert await client.next() is None  # then the TCP connection ends


async def test_a_fragmented_text_message_is_one_event(gateway: Gateway) -> None:
    async with raw_client(gateway.url) as client:
        message = b'{"type":"ping","id":"fragmented"}'
        keys = client.keys
        first = bytearray(encode_frame(OP_TEXT, message[:10], keys.next()))
        first[0] &= 0x7F  # not final
        client.writer.write(bytes(first))
        client.send(OP_PING, b"between")  # control frames may come between fragments
        last = bytearray(encode_frame(0x0, message[10:], keys.next()))
        client.writer.write(bytes(last))
        assert await client.until(OP_PONG) == (OP_PONG, b"between")
        event = await client.until(OP_TEXT)
        assert json.loads(event[1]) == {"type": "pong", "id": "fragmented"}


async def frames_until_the_end(client: RawClient, most: int = 100) -> list[Message]:
    """Every frame the server sends until it ends the TCP connection."""
    frames: list[Message] = []
    while (frame := await client.next()) is not None:
        frames.append(frame)
        assert len(frames) <= most, frames
    return frames


async def test_a_ping_in_the_same_read_as_the_clients_close_is_not_answered(
    gateway: Gateway,
) -> None:
    async with raw_client(gateway.url) as client:
        # One write, one read on the server: the close, then a ping it must not answer.
        keys = client.keys
        client.writer.write(
            encode_frame(OP_CLOSE, close_payload(1000), keys.next())
            + encode_frame(OP_PING, b"after the close", keys.next())
        )
        frames = await frames_until_the_end(client)
    assert frames == [(OP_CLOSE, close_payload(1000))]  # the close answered, nothing after it


async def test_a_ping_after_the_servers_own_close_is_not_answered(gateway: Gateway) -> None:
    async with raw_client(gateway.url) as client:
        client.send(OP_TEXT, b'{"type":"session.end"}')  # the gateway closes first
        frame = await client.until(OP_CLOSE)
        assert close_code(bytes(frame[1]))[0] == 1000
        client.send(OP_PING, b"after the close")
        client.send(OP_CLOSE, close_payload(1000))
        assert await frames_until_the_end(client) == []  # no pong follows the server's close


@contextlib.asynccontextmanager
async def socket_app(handler: Handler) -> AsyncIterator[str]:
    """``handler`` alone on ``/ws`` of a loopback aiohttp app: ``ClientSocket`` without a
    gateway around it."""
    app = web.Application()
    app.router.add_get("/ws", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        host, port = runner.addresses[0][:2]
        yield f"http://{host}:{port}"
    finally:
        await runner.cleanup()


async def test_a_message_in_the_same_read_after_the_clients_close_is_not_handled() -> None:
    received: list[str | bytes] = []
    handled = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        sock = await ClientSocket.accept(request, max_message=1024, keepalive_s=0)
        while (message := await sock.receive()) is not None:
            received.append(message)
        await sock.close()
        handled.set()
        return sock.response

    async with socket_app(handler) as url, raw_client(url, "/ws") as client:
        keys = client.keys
        client.writer.write(
            encode_frame(OP_TEXT, b"before", keys.next())
            + encode_frame(OP_CLOSE, close_payload(1000), keys.next())
            + encode_frame(OP_TEXT, b"after", keys.next())
        )
        assert await frames_until_the_end(client) == [(OP_CLOSE, close_payload(1000))]
    await asyncio.wait_for(handled.wait(), 5)
    assert received == ["before"]


def not_final(frame: bytes) -> bytes:
    return bytes([frame[0] & 0x7F]) + frame[1:]


async def test_invalid_utf8_fails_the_connection_at_the_fragment_where_it_appears(
    gateway: Gateway,
) -> None:
    async with raw_client(gateway.url) as client:
        keys = client.keys
        client.writer.write(not_final(encode_frame(OP_TEXT, "κόσμε".encode(), keys.next())))
        # Not the last fragment: the message is not over, and yet it cannot be UTF-8 any more.
        client.writer.write(not_final(encode_frame(OP_CONTINUATION, b"\xf4\x90", keys.next())))
        closing = await client.until(OP_CLOSE, within=2)
        assert close_code(bytes(closing[1]))[0] == 1007


async def test_the_clients_close_is_answered_with_its_code(gateway: Gateway) -> None:
    async with ws_connect(
        gateway.url.replace("http", "ws") + "/v1/session",
        additional_headers={"Authorization": f"Bearer {token()}"},
        compression=None,
    ) as client:
        await client.send('{"type":"ping","id":"1"}')
        assert json.loads(await client.recv())["type"] == "pong"
        await client.close(4001, "going")
    assert client.close_code == 4001


async def test_a_client_that_stops_answering_is_dropped_and_its_session_parked(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory(client_keepalive_s=0.05)
    async with raw_client(gateway.url) as client:
        client.send(OP_TEXT, b'{"type":"session.start","mode":"text"}')
        started = json.loads((await client.until(OP_TEXT))[1])
        assert started["type"] == "session.started"
        # This client never answers the pings: within 2 intervals of silence it is gone.
        while (frame := await client.next(within=2)) is not None:
            assert frame[0] in (OP_PING, OP_TEXT)
    assert len(gateway.manager.sessions) == 1  # parked: resumable within the window


async def test_a_client_that_answers_pings_is_kept(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory(client_keepalive_s=0.05)
    async with ws_connect(  # websockets answers pings by itself
        gateway.url.replace("http", "ws") + "/v1/session",
        additional_headers={"Authorization": f"Bearer {token()}"},
        compression=None,
    ) as client:
        await asyncio.sleep(0.4)  # eight keepalive intervals with nothing to say
        await client.send('{"type":"ping","id":"still"}')
        assert json.loads(await client.recv()) == {"type": "pong", "id": "still"}


@pytest.fixture
async def fake() -> AsyncIterator[FakeRealtimeServer]:
    fakes = Fakes(lambda **o: FakeRealtimeServer(FakeOptions(**o)))
    yield await fakes()
    await fakes.stop_all()


async def test_audio_on_the_hot_path_keeps_its_place_among_events(
    gateway_factory: GatewayFactory, fake: FakeRealtimeServer
) -> None:
    gateway = await gateway_factory(
        provider="openai", openai_ws_url=fake.ws_url, openai_api_key="sk-test"
    )
    async with gateway.session("voice", audio={"input_rate": 24000}) as client:
        conn = await fake.wait_connections(1)
        frames = [pcm_silence(20, 24000)[:-2] + bytes([n, n]) for n in range(1, 7)]
        # One burst: frames go straight through while nothing waits, the text waits its turn,
        # and the frames behind it wait for it.
        await client.send_raw(frames[0])
        await client.send_raw(frames[1])
        await client.send("text.send", text="between")
        for frame in frames[2:]:
            await client.send_raw(frame)
        await conn.wait_for("input_audio_buffer.append", count=6, direction="in")
    kinds = []
    for direction, event in conn.log:
        if direction != "in":
            continue
        if event["type"] == "input_audio_buffer.append":
            kinds.append(base64.b64decode(event["audio"])[-1])
        elif event["type"] == "conversation.item.create":
            kinds.append("text")
    assert kinds == [1, 2, "text", 3, 4, 5, 6]
    assert gateway.metrics.frames.binary_in == 6


async def test_binary_audio_in_text_mode_still_gets_its_error(gateway: Gateway) -> None:
    async with gateway.session("text") as client:
        await client.send_raw(pcm_silence(20))
        error = await client.last("error")
        assert error["code"] == "invalid_event"
        assert "voice mode" in error["message"]


async def test_the_session_socket_serves_aiohttp_clients_too(gateway: Gateway) -> None:
    async with gateway.http.ws_connect(
        f"{gateway.url}/v1/session",
        headers={"Authorization": f"Bearer {token()}"},
        autoping=False,
    ) as ws:
        await ws.ping(b"aiohttp")
        msg = await ws.receive(timeout=5)
        assert msg.type is aiohttp.WSMsgType.PONG
        assert msg.data == b"aiohttp"
        await ws.send_bytes(b"\x00\x00")  # before session.start
        event = json.loads((await ws.receive(timeout=5)).data)
        assert event["code"] == "not_started"
        await ws.close()
    assert ws.close_code == 1000
