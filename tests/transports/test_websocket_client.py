"""The upstream client connection over real sockets, with ``websockets``' server as the peer
(and a raw TCP server where a peer must misbehave)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from websockets.asyncio.server import ServerConnection, serve
from websockets.frames import CloseCode

from rfc6455.client import (
    HIGH_WATER,
    ClientConnection,
    ConnectionClosed,
    HandshakeError,
    InvalidURL,
    accept_key,
    connect,
)
from rfc6455.frames import (
    OP_CLOSE,
    OP_PING,
    OP_TEXT,
    FrameReader,
    Message,
    close_payload,
    encode_frame,
)

# The gateway serves on uvloop by default: this socket must work on both loops.
pytestmark = pytest.mark.both_loops

Handler = Callable[[ServerConnection], Awaitable[None]]


@contextlib.asynccontextmanager
async def peer(handler: Handler) -> AsyncIterator[str]:
    async with serve(handler, "127.0.0.1", 0, compression=None, max_size=None) as server:
        port = server.sockets[0].getsockname()[1]
        yield f"ws://127.0.0.1:{port}/v1/realtime?model=m"


@contextlib.asynccontextmanager
async def raw_peer(
    respond: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
) -> AsyncIterator[str]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await respond(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"ws://127.0.0.1:{port}/v1"
    finally:
        server.close()
        await server.wait_closed()


async def open_conn(url: str, **options: float) -> ClientConnection:
    return await connect(url, {"Authorization": "Bearer sk-x"}, max_message=1 << 24, **options)


async def read_request_key(reader: asyncio.StreamReader) -> str:
    head = await reader.readuntil(b"\r\n\r\n")
    for line in head.decode().split("\r\n"):
        if line.lower().startswith("sec-websocket-key:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError("no key")


def switching(key: str) -> bytes:
    return (
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Accept: {accept_key(key)}\r\n\r\n"
    ).encode()


async def test_messages_go_both_ways_and_queued_ones_are_pushed_first() -> None:
    seen: list[object] = []

    async def handler(ws: ServerConnection) -> None:
        assert ws.request is not None
        seen.append((ws.request.path, ws.request.headers["Authorization"]))
        await ws.send('{"type":"session.created"}')
        await ws.send(b"\x00\x01")
        async for message in ws:
            await ws.send(f"echo:{message}")

    async with peer(handler) as url:
        conn = await open_conn(url)
        assert await conn.recv() == '{"type":"session.created"}'
        got: list[str | bytes] = []
        arrived = asyncio.Event()

        def on_message(message: str | bytes) -> None:
            got.append(message)
            if len(got) == 3:
                arrived.set()

        await asyncio.sleep(0.05)  # the binary frame is queued by now
        conn.push(on_message)
        assert got == [b"\x00\x01"]
        assert conn.send_now("héllo")
        await conn.send("x" * 200_000)
        await asyncio.wait_for(arrived.wait(), 5)
        assert got[1:] == ["echo:héllo", "echo:" + "x" * 200_000]
        await conn.close()
        assert await conn.wait_closed() == 1000
    assert seen == [("/v1/realtime?model=m", "Bearer sk-x")]


async def test_the_servers_close_code_is_reported() -> None:
    async def handler(ws: ServerConnection) -> None:
        await ws.close(CloseCode.GOING_AWAY, "expired")

    async with peer(handler) as url:
        conn = await open_conn(url)
        assert await asyncio.wait_for(conn.wait_closed(), 5) == 1001
        with pytest.raises(ConnectionClosed) as closed:
            await conn.recv()
        assert closed.value.code == 1001
        assert not conn.send_now("late")


async def test_a_drop_without_a_close_frame_is_1006() -> None:
    async def respond(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(switching(await read_request_key(reader)))
        writer.write(b"\x81\x02hi")
        await writer.drain()

    async with raw_peer(respond) as url:
        conn = await open_conn(url)
        assert await conn.recv() == "hi"
        assert await asyncio.wait_for(conn.wait_closed(), 5) == 1006


async def test_a_server_that_breaks_the_protocol_is_dropped() -> None:
    async def respond(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(switching(await read_request_key(reader)))
        writer.write(b"\x81\x02ok" + b"\x83\x00")  # a reserved opcode after a good frame
        await writer.drain()
        await reader.read()  # until the client goes

    async with raw_peer(respond) as url:
        conn = await open_conn(url)
        assert await conn.recv() == "ok"  # what came before the fault is kept
        assert await asyncio.wait_for(conn.wait_closed(), 5) == 1006


class ClientFrames:
    """What the client sends to a raw peer, parsed; ``ended`` once its TCP connection ends
    (the raw peer's handler may still run after the test's own connection is closed)."""

    def __init__(self) -> None:
        self.frames: list[Message] = []
        self.ended = asyncio.Event()
        self._reader = FrameReader(masked=True, max_message=1 << 20)

    async def read_one(self, reader: asyncio.StreamReader) -> None:
        count = len(self.frames)
        async with asyncio.timeout(5):
            while len(self.frames) == count:
                data = await reader.read(65536)
                assert data, "the client ended the connection"
                self.frames += self._reader.feed(data)

    async def read_to_the_end(self, reader: asyncio.StreamReader, most: int = 100) -> None:
        try:
            async with asyncio.timeout(5):
                while (data := await reader.read(65536)) and len(self.frames) <= most:
                    self.frames += self._reader.feed(data)
        finally:
            self.ended.set()

    async def all(self) -> list[Message]:
        await asyncio.wait_for(self.ended.wait(), 5)
        return self.frames


async def test_nothing_in_the_same_read_after_the_servers_close_is_answered_or_delivered() -> None:
    sent_by_client = ClientFrames()

    async def respond(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(switching(await read_request_key(reader)))
        await writer.drain()
        # One write, one read on the client: the close, then what it must ignore.
        writer.write(
            encode_frame(OP_CLOSE, close_payload(1001))
            + encode_frame(OP_PING, b"after the close")
            + encode_frame(OP_TEXT, b"after the close")
        )
        await writer.drain()
        await sent_by_client.read_to_the_end(reader)

    async with raw_peer(respond) as url:
        conn = await open_conn(url)
        assert await asyncio.wait_for(conn.wait_closed(), 5) == 1001
        with pytest.raises(ConnectionClosed):
            await conn.recv()  # the text after the close was never delivered
        # the close echoed, and no pong after it
        assert await sent_by_client.all() == [(OP_CLOSE, close_payload(1001))]


async def test_a_ping_after_the_clients_own_close_is_not_answered() -> None:
    sent_by_client = ClientFrames()

    async def respond(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(switching(await read_request_key(reader)))
        await writer.drain()
        await sent_by_client.read_one(reader)  # the client's close
        writer.write(encode_frame(OP_PING, b"after your close"))
        await writer.drain()
        writer.write(encode_frame(OP_CLOSE, close_payload(1000)))
        await writer.drain()
        await sent_by_client.read_to_the_end(reader)

    async with raw_peer(respond) as url:
        conn = await open_conn(url)
        await conn.close()
        assert await conn.wait_closed() == 1000
        # nothing after our close: no pong
        assert await sent_by_client.all() == [(OP_CLOSE, close_payload(1000))]


async def test_invalid_utf8_fails_the_connection_at_the_fragment_where_it_appears() -> None:
    sent_by_client = ClientFrames()

    async def respond(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(switching(await read_request_key(reader)))
        first = encode_frame(OP_TEXT, "κόσμε".encode())
        writer.write(bytes([first[0] & 0x7F]) + first[1:])  # not final
        await writer.drain()
        # Not the last fragment either: the message is not over, yet it cannot be UTF-8 now.
        writer.write(bytes([0x00, 2]) + b"\xf4\x90")
        await writer.drain()
        await sent_by_client.read_to_the_end(reader)

    async with raw_peer(respond) as url:
        conn = await open_conn(url)
        assert await asyncio.wait_for(conn.wait_closed(), 5) == 1006  # failed, not closed
        assert await sent_by_client.all() == [(OP_CLOSE, close_payload(1007))]


async def test_binary_messages_are_sent_as_binary() -> None:
    async def handler(ws: ServerConnection) -> None:
        message = await ws.recv()
        await ws.send(f"got {type(message).__name__} of {len(message)}")

    async with peer(handler) as url:
        conn = await open_conn(url)
        await conn.send(b"\x00\xff" * 100)
        assert await asyncio.wait_for(conn.recv(), 5) == "got bytes of 200"
        await conn.close()


async def test_a_refused_upgrade_reports_its_status() -> None:
    async def respond(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request_key(reader)
        writer.write(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 2\r\n\r\n{}")
        await writer.drain()

    async with raw_peer(respond) as url:
        with pytest.raises(HandshakeError) as refused:
            await open_conn(url)
        assert refused.value.status == 401


@pytest.mark.parametrize(
    "response",
    [
        "HTTP/1.1 101 OK\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Accept: bm90IHRoZSByaWdodCBrZXk=\r\n\r\n",
        "HTTP/1.1 101 OK\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n",
        "SSH-2.0-OpenSSH\r\n\r\n",
    ],
)
async def test_a_response_that_is_not_a_websocket_upgrade_is_refused(response: str) -> None:
    async def respond(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request_key(reader)
        writer.write(response.encode())
        await writer.drain()
        await reader.read()

    async with raw_peer(respond) as url:
        with pytest.raises(HandshakeError):
            await open_conn(url)


async def test_an_extension_the_client_never_offered_is_refused() -> None:
    async def respond(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = switching(await read_request_key(reader))
        writer.write(head[:-2] + b"Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n")
        await writer.drain()
        await reader.read()

    async with raw_peer(respond) as url:
        with pytest.raises(HandshakeError, match="never offered"):
            await open_conn(url)


async def test_not_a_websocket_url() -> None:
    with pytest.raises(InvalidURL):
        await open_conn("http://127.0.0.1:1/v1")


async def test_a_silent_server_is_pinged_and_then_dropped() -> None:
    pings: list[bytes] = []

    async def respond(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(switching(await read_request_key(reader)))
        await writer.drain()
        while data := await reader.read(100):  # never answers
            pings.append(data)

    async with raw_peer(respond) as url:
        conn = await open_conn(url, keepalive_s=0.05)
        assert await asyncio.wait_for(conn.wait_closed(), 5) == 1006
    assert pings
    assert pings[0][0] == 0x89  # a ping frame came first


async def test_a_server_that_answers_pings_stays_connected() -> None:
    async def handler(ws: ServerConnection) -> None:
        await asyncio.sleep(0.6)
        await ws.send("still here")

    async with peer(handler) as url:
        conn = await open_conn(url, keepalive_s=0.05)
        assert await asyncio.wait_for(conn.recv(), 5) == "still here"
        await conn.close()


async def test_send_now_refuses_while_the_socket_is_full_and_send_waits_for_it() -> None:
    release = asyncio.Event()

    async def respond(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(switching(await read_request_key(reader)))
        await writer.drain()
        await release.wait()  # not reading: the client's buffer fills
        while await reader.read(1 << 16):
            pass

    async with raw_peer(respond) as url:
        conn = await open_conn(url)
        chunk = base64.b64encode(os.urandom(48_000)).decode()
        sent = 0
        while conn.send_now(chunk) and sent < 1000:
            sent += 1
        assert sent < 1000  # refused at some point: the socket holds over HIGH_WATER
        assert not conn.writable
        waiting = asyncio.create_task(conn.send(chunk))
        await asyncio.sleep(0)  # it wrote, and now waits for the transport to drain
        assert not waiting.done()
        release.set()
        await asyncio.wait_for(waiting, 5)
        assert sent * len(chunk) > HIGH_WATER
        await conn.close(timeout_s=0.05)  # this peer never answers a close: aborted
        assert await conn.wait_closed() == 1006
