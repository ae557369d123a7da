"""One server-to-client WebSocket binary frame (RFC 6455, 5.2), built without aiohttp's writer.

The session socket writes audio frames straight to its transport when nothing is queued before
them (``gateway.session.outbound``): a synchronous write spares the writer task a wake-up per
frame. A server's frames are never masked, and the socket never compresses (``compress=False``),
so a frame is a 2-, 4- or 10-byte header and the payload, byte for byte what aiohttp would send.
"""

from __future__ import annotations

import struct

__all__ = ["binary_frame"]

_FIN_BINARY = 0x82  # FIN set, opcode 0x2
_SHORT = struct.Struct("!BB")
_MEDIUM = struct.Struct("!BBH")
_LONG = struct.Struct("!BBQ")


def binary_frame(payload: bytes) -> bytes:
    """The whole unmasked, uncompressed binary frame carrying ``payload``."""
    size = len(payload)
    if size < 126:
        header = _SHORT.pack(_FIN_BINARY, size)
    elif size < 65536:
        header = _MEDIUM.pack(_FIN_BINARY, 126, size)
    else:
        header = _LONG.pack(_FIN_BINARY, 127, size)
    return header + payload
