"""A WebSocket client of raw bytes: the upgrade by hand, then any frame a test wants to write,
masked or not, and the server's frames as parsed by our own reader."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from harness import token

from rfc6455.client import accept_key
from rfc6455.frames import FrameReader, MaskKeys, Message, encode_frame

__all__ = ["RawClient", "raw_client"]


@dataclass
class RawClient:
    """A client writing whatever bytes a test wants and reading the server's frames."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    frames: FrameReader = field(
        default_factory=lambda: FrameReader(masked=False, max_message=1 << 22)
    )
    keys: MaskKeys = field(default_factory=MaskKeys)
    pending: list[Message] = field(default_factory=list)

    def send(self, opcode: int, payload: bytes, *, masked: bool = True) -> None:
        self.writer.write(encode_frame(opcode, payload, self.keys.next() if masked else None))

    async def next(self, within: float = 5.0) -> Message | None:
        """The next frame; None at the end of the connection."""
        async with asyncio.timeout(within):
            while not self.pending:
                data = await self.reader.read(65536)
                if not data:
                    return None
                self.pending += self.frames.feed(data)
        return self.pending.pop(0)

    async def until(self, opcode: int, within: float = 5.0) -> Message:
        while True:
            frame = await self.next(within)
            assert frame is not None, f"connection ended before opcode {opcode}"
            if frame[0] == opcode:
                return frame


@contextlib.asynccontextmanager
async def raw_client(
    url: str, path: str = "/v1/session", *, receive_buffer: int | None = None, **headers: str
) -> AsyncIterator[RawClient]:
    """An upgraded connection to the gateway at ``url`` (``http://host:port``); headers
    override the defaults (a user token for ``harness.token()``). ``receive_buffer`` shrinks
    the client's socket buffers, so that a client that does not read is felt at once by the
    server (loopback's own buffers would otherwise absorb megabytes)."""
    host, port = url.removeprefix("http://").split(":")
    if receive_buffer is None:
        reader, writer = await asyncio.open_connection(host, int(port))
    else:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, (host, int(port)))
        reader, writer = await asyncio.open_connection(sock=sock, limit=receive_buffer)
    key = base64.b64encode(os.urandom(16)).decode()
    head = {
        "Host": f"{host}:{port}",
        "Upgrade": "websocket",
        "Connection": "Upgrade",
        "Sec-WebSocket-Key": key,
        "Sec-WebSocket-Version": "13",
        "Authorization": f"Bearer {token()}",
        **headers,
    }
    lines = [f"GET {path} HTTP/1.1", *(f"{k}: {v}" for k, v in head.items())]
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
    response = (await reader.readuntil(b"\r\n\r\n")).decode()
    assert response.startswith("HTTP/1.1 101"), response
    assert f"Sec-WebSocket-Accept: {accept_key(key)}" in response
    try:
        yield RawClient(reader, writer)
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()
