"""The server's binary WebSocket frame, written without aiohttp's writer: RFC 6455 framing."""

from __future__ import annotations

import struct

import pytest

from gateway.protocol.wsframe import binary_frame


def parse(frame: bytes) -> tuple[int, bytes]:
    """(first byte, payload) of one unmasked frame, checking the length encoding is minimal."""
    first, second = frame[0], frame[1]
    assert not second & 0x80  # a server never masks
    size, offset = second & 0x7F, 2
    if size == 126:
        (size,) = struct.unpack_from("!H", frame, 2)
        offset = 4
        assert size >= 126
    elif size == 127:
        (size,) = struct.unpack_from("!Q", frame, 2)
        offset = 10
        assert size >= 65536
    assert len(frame) == offset + size
    return first, frame[offset:]


@pytest.mark.parametrize("size", [0, 1, 125, 126, 960, 65535, 65536, 70000])
def test_a_binary_frame_carries_the_payload_whole(size: int) -> None:
    payload = bytes(i % 251 for i in range(size))
    first, body = parse(binary_frame(payload))
    assert first == 0x82  # FIN, binary, no RSV bits (never compressed)
    assert body == payload
