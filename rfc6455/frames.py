"""WebSocket framing (RFC 6455, section 5), sans-I/O: bytes in → messages out, and back.

Why the gateway frames its own sockets: at 50 audio frames per second per session, what a
relay spends per frame is its capacity. Parsing each frame in a connection's ``data_received``
and handing the message on at once spares the task switch and the reader coroutines per frame
that aiohttp's and websockets' asyncio layers cost; measured side by side (``scripts/bench``),
that halved the gateway's CPU per relayed frame pair. ``websockets``' sans-I/O protocol was the
first choice, but its generator parser costs about 40 µs per frame pair more than this one.

Theory of operation. ``FrameReader.feed`` takes whatever the socket delivered and returns the
complete messages in it, in order, as ``(opcode, payload)``:

- data messages whole: fragments are joined, text is decoded and checked as UTF-8 (``str``),
  binary stays ``bytes``. An unfragmented text frame is decoded once, whole; the fragments of a
  fragmented one go through an incremental decoder as each arrives, so that invalid UTF-8 fails
  the connection (1007, RFC 6455 8.1) at the fragment where it appears, not at the end of the
  message ("fail fast", Autobahn's cases 6.4.x). One frame arriving in several reads is still
  checked once it is complete;
- control frames (close, ping, pong) as they come, even between the fragments of a message;
  a close payload is validated (``close_code`` reads it).

A frame split across reads waits in the reader; once its header is known, the reader only
appends until the frame is complete (a large message arriving in many reads is copied once).
Anything the RFC forbids (reserved bits, unknown opcodes, a mask where none belongs or none
where one must be, fragmented or oversized control frames, a continuation with nothing to
continue, a message over ``max_message``, invalid UTF-8 or close code) raises
``ProtocolViolation`` with the close code to send; the reader is then done.

``encode_frame`` builds one unfragmented frame; client frames are masked (``MaskKeys``).
"""

from __future__ import annotations

import codecs
import os
import struct
from typing import Final

try:  # websockets' C helper; its pure-Python twin when the extension is not built
    from websockets.speedups import apply_mask
except ImportError:  # pragma: no cover - every wheel we install ships the extension
    from websockets.utils import apply_mask

__all__ = [
    "CLOSE_ABNORMAL",
    "CLOSE_GOING_AWAY",
    "CLOSE_INTERNAL_ERROR",
    "CLOSE_INVALID_DATA",
    "CLOSE_NORMAL",
    "CLOSE_NO_STATUS",
    "CLOSE_POLICY",
    "CLOSE_PROTOCOL_ERROR",
    "CLOSE_TOO_BIG",
    "OP_BINARY",
    "OP_CLOSE",
    "OP_CONTINUATION",
    "OP_PING",
    "OP_PONG",
    "OP_TEXT",
    "FrameReader",
    "MaskKeys",
    "Message",
    "ProtocolViolation",
    "WebSocketError",
    "close_code",
    "close_payload",
    "encode_frame",
]

OP_CONTINUATION: Final = 0x0
OP_TEXT: Final = 0x1
OP_BINARY: Final = 0x2
OP_CLOSE: Final = 0x8
OP_PING: Final = 0x9
OP_PONG: Final = 0xA

CLOSE_NORMAL: Final = 1000
CLOSE_GOING_AWAY: Final = 1001
CLOSE_PROTOCOL_ERROR: Final = 1002
CLOSE_NO_STATUS: Final = 1005  # never sent: what a close without a code reports
CLOSE_ABNORMAL: Final = 1006  # never sent: the connection ended without a close frame
CLOSE_INVALID_DATA: Final = 1007
CLOSE_POLICY: Final = 1008
CLOSE_TOO_BIG: Final = 1009
CLOSE_INTERNAL_ERROR: Final = 1011

# (opcode, payload): str for text, bytes for everything else
Message = tuple[int, str | bytes]

_DATA_OPCODES: Final = frozenset({OP_CONTINUATION, OP_TEXT, OP_BINARY})
_CONTROL_OPCODES: Final = frozenset({OP_CLOSE, OP_PING, OP_PONG})
_MAX_CONTROL_PAYLOAD: Final = 125
# Close codes a peer may send (RFC 6455 7.4.1 and the IANA registry); 3000-4999 are free for use.
_VALID_CLOSE_CODES: Final = frozenset({*range(1000, 1004), *range(1007, 1015)})
_LEN16 = struct.Struct("!H")
_LEN64 = struct.Struct("!Q")
_HEADER_SHORT = struct.Struct("!BB")
_HEADER_MEDIUM = struct.Struct("!BBH")
_HEADER_LONG = struct.Struct("!BBQ")
_Utf8Decoder: Final = codecs.getincrementaldecoder("utf-8")


class WebSocketError(Exception):
    """The root of what this package raises; an upstream transport translates it into its own
    errors at its boundary. ``retryable``: worth another attempt; ``code``: the close code that
    goes with it, when there is one."""

    def __init__(self, message: str, *, retryable: bool = False, code: int | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.code = code


class ProtocolViolation(WebSocketError):
    """The peer broke RFC 6455; ``code`` is the close code to answer with."""

    code: int

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason, code=code)
        self.reason = reason
        # the messages complete before the violation, in the same read: still delivered
        self.before: list[Message] = []


class FrameReader:
    """Parses one direction of a connection. ``masked``: the peer's frames must be masked
    (a server reading its client) or must not be (a client reading its server)."""

    __slots__ = (
        "_buffer",
        "_failed",
        "_fragments",
        "_fragments_size",
        "_masked",
        "_max",
        "_message_opcode",
        "_need",
        "_text",
        "_utf8",
    )

    def __init__(self, *, masked: bool, max_message: int) -> None:
        self._masked = masked
        self._max = max_message
        self._buffer = bytearray()  # bytes of an incomplete frame
        self._need = 0  # bytes the buffered frame still lacks (0: parse what is buffered)
        self._message_opcode = 0  # OP_TEXT or OP_BINARY while a fragmented message is open
        self._fragments: list[bytes] = []  # a binary message's fragments so far
        self._text: list[str] = []  # a text message's fragments so far, decoded
        self._fragments_size = 0  # bytes of the open message so far, either kind
        self._utf8: codecs.IncrementalDecoder | None = None  # made at the first fragmented text
        self._failed = False

    def feed(self, data: bytes) -> list[Message]:
        if self._failed:
            return []
        if not self._buffer and not self._message_opcode:
            whole = self._one_whole_frame(data)
            if whole is not None:
                return whole
        buffer = self._buffer
        if buffer:
            buffer += data
            if self._need > len(data):
                self._need -= len(data)
                return []  # the frame in progress is still incomplete: no parse
            self._need = 0
            data = bytes(buffer)
            buffer.clear()
        try:
            return self._parse(data)
        except ProtocolViolation:
            self._failed = True
            self._buffer.clear()
            raise

    def _one_whole_frame(self, data: bytes) -> list[Message] | None:
        """The common case, checked first: ``data`` is exactly one final, unfragmented text or
        binary frame under 64 KiB. None for anything else (the general parser decides)."""
        size = len(data)
        if size < 2:
            return None
        first, second = data[0], data[1]
        if (first != 0x82 and first != 0x81) or bool(second & 0x80) is not self._masked:
            return None
        length = second & 0x7F
        if length < 126:
            header = 2
        elif length == 126 and size >= 4:
            length = (data[2] << 8) | data[3]
            header = 4
        else:
            return None
        if self._masked:
            header += 4
        if header + length != size or length > self._max:
            return None
        payload = data[header:]
        if self._masked:
            payload = apply_mask(payload, data[header - 4 : header])
        if first == 0x82:
            return [(OP_BINARY, payload)]
        try:
            return [(OP_TEXT, payload.decode("utf-8"))]
        except UnicodeDecodeError:
            self._failed = True
            raise ProtocolViolation(CLOSE_INVALID_DATA, "text frame is not UTF-8") from None

    def _parse(self, data: bytes) -> list[Message]:
        messages: list[Message] = []
        try:
            self._parse_into(messages, data)
        except ProtocolViolation as exc:
            exc.before = messages
            raise
        return messages

    def _parse_into(self, messages: list[Message], data: bytes) -> None:
        size = len(data)
        pos = 0
        while size - pos >= 2:
            first, second = data[pos], data[pos + 1]
            if first & 0x70:
                raise ProtocolViolation(CLOSE_PROTOCOL_ERROR, "reserved bits set")
            opcode = first & 0x0F
            if bool(second & 0x80) is not self._masked:
                raise ProtocolViolation(
                    CLOSE_PROTOCOL_ERROR,
                    "unmasked client frame" if self._masked else "masked server frame",
                )
            length = second & 0x7F
            header = 2
            if length == 126:
                if size - pos < 4:
                    break
                length = _LEN16.unpack_from(data, pos + 2)[0]
                header = 4
            elif length == 127:
                if size - pos < 10:
                    break
                length = _LEN64.unpack_from(data, pos + 2)[0]
                if length >> 63:
                    raise ProtocolViolation(CLOSE_PROTOCOL_ERROR, "frame length out of range")
                header = 10
            fin = first & 0x80
            if opcode in _CONTROL_OPCODES:
                if not fin:
                    raise ProtocolViolation(CLOSE_PROTOCOL_ERROR, "fragmented control frame")
                if length > _MAX_CONTROL_PAYLOAD:
                    raise ProtocolViolation(CLOSE_PROTOCOL_ERROR, "control frame too long")
            elif opcode not in _DATA_OPCODES:
                raise ProtocolViolation(CLOSE_PROTOCOL_ERROR, f"reserved opcode {opcode}")
            elif self._fragments_size + length > self._max:
                raise ProtocolViolation(
                    CLOSE_TOO_BIG, f"message over the limit of {self._max} bytes"
                )
            if self._masked:
                header += 4
            end = pos + header + length
            if end > size:
                self._need = end - size
                break
            payload = data[pos + header : end]
            if self._masked:
                payload = apply_mask(payload, data[pos + header - 4 : pos + header])
            pos = end
            message = self._frame(fin, opcode, payload)
            if message is not None:
                messages.append(message)
        if pos < size:
            self._buffer += data[pos:]

    def _frame(self, fin: int, opcode: int, payload: bytes) -> Message | None:
        if opcode >= OP_CLOSE:
            if opcode == OP_CLOSE:
                close_code(payload)  # validates it
            return opcode, payload
        if opcode == OP_CONTINUATION:
            if not self._message_opcode:
                raise ProtocolViolation(CLOSE_PROTOCOL_ERROR, "continuation of no message")
            self._fragments_size += len(payload)
            if self._message_opcode == OP_TEXT:
                self._text.append(self._decode_fragment(payload, fin))
                if not fin:
                    return None
                text = "".join(self._text)
                self._text = []
                self._message_opcode = 0
                self._fragments_size = 0
                return OP_TEXT, text
            self._fragments.append(payload)
            if not fin:
                return None
            payload = b"".join(self._fragments)
            self._message_opcode = 0
            self._fragments = []
            self._fragments_size = 0
            return OP_BINARY, payload
        if self._message_opcode:
            raise ProtocolViolation(CLOSE_PROTOCOL_ERROR, "new message inside a fragmented one")
        if not fin:
            self._message_opcode = opcode
            self._fragments_size = len(payload)
            if opcode == OP_TEXT:
                if self._utf8 is None:
                    self._utf8 = _Utf8Decoder()
                else:
                    self._utf8.reset()
                self._text = [self._decode_fragment(payload, 0)]
            else:
                self._fragments = [payload]
            return None
        if opcode == OP_TEXT:  # unfragmented: decoded once, whole
            try:
                return OP_TEXT, payload.decode("utf-8")
            except UnicodeDecodeError:
                raise ProtocolViolation(CLOSE_INVALID_DATA, "text frame is not UTF-8") from None
        return OP_BINARY, payload

    def _decode_fragment(self, payload: bytes, fin: int) -> str:
        """One fragment of a text message, decoded as it arrives; a sequence cut by the
        fragment's end waits for the next one, unless this is the last."""
        assert self._utf8 is not None
        try:
            return self._utf8.decode(payload, bool(fin))
        except UnicodeDecodeError:
            raise ProtocolViolation(CLOSE_INVALID_DATA, "text frame is not UTF-8") from None


def close_code(payload: bytes) -> tuple[int, str]:
    """The code and reason of a close frame's payload (1005 when it has none); raises
    ``ProtocolViolation`` for a payload a peer may not send."""
    if not payload:
        return CLOSE_NO_STATUS, ""
    if len(payload) == 1:
        raise ProtocolViolation(CLOSE_PROTOCOL_ERROR, "close frame with a 1-byte payload")
    code = _LEN16.unpack_from(payload)[0]
    if code not in _VALID_CLOSE_CODES and not 3000 <= code <= 4999:
        raise ProtocolViolation(CLOSE_PROTOCOL_ERROR, f"invalid close code {code}")
    try:
        reason = payload[2:].decode("utf-8")
    except UnicodeDecodeError:
        raise ProtocolViolation(CLOSE_INVALID_DATA, "close reason is not UTF-8") from None
    return code, reason


def close_payload(code: int, reason: str = "") -> bytes:
    """A close frame's payload; the reason is cut to fit a control frame."""
    encoded = reason.encode("utf-8")[: _MAX_CONTROL_PAYLOAD - 2]
    return _LEN16.pack(code) + encoded.decode("utf-8", "ignore").encode("utf-8")


def encode_frame(opcode: int, payload: bytes, mask_key: bytes | None = None) -> bytes:
    """One final (unfragmented) frame; masked with ``mask_key`` (4 bytes) when given."""
    size = len(payload)
    first = 0x80 | opcode
    masked = 0x80 if mask_key is not None else 0
    if size < 126:
        header = _HEADER_SHORT.pack(first, masked | size)
    elif size < 65536:
        header = _HEADER_MEDIUM.pack(first, masked | 126, size)
    else:
        header = _HEADER_LONG.pack(first, masked | 127, size)
    if mask_key is None:
        return header + payload
    return header + mask_key + apply_mask(payload, mask_key)


class MaskKeys:
    """Masking keys for a client's frames: unpredictable (RFC 6455 5.3), read from the OS in
    blocks so that a frame costs no system call."""

    __slots__ = ("_block", "_pos")

    BLOCK: Final = 4096

    def __init__(self) -> None:
        self._block = b""
        self._pos = 0

    def next(self) -> bytes:
        pos = self._pos
        if pos + 4 > len(self._block):
            self._block = os.urandom(self.BLOCK)
            pos = 0
        self._pos = pos + 4
        return self._block[pos : pos + 4]
