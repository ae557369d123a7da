"""The sans-I/O frame codec against ``websockets``' own framing as the oracle: whatever its
serializer writes, our reader parses however it is split; whatever we write, its parser reads."""

from __future__ import annotations

import os
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from websockets.frames import Close, Frame, Opcode
from websockets.protocol import Protocol, Side, State

from rfc6455.frames import (
    CLOSE_INVALID_DATA,
    CLOSE_NO_STATUS,
    CLOSE_PROTOCOL_ERROR,
    CLOSE_TOO_BIG,
    OP_BINARY,
    OP_CLOSE,
    OP_PING,
    OP_PONG,
    OP_TEXT,
    FrameReader,
    MaskKeys,
    Message,
    ProtocolViolation,
    close_code,
    close_payload,
    encode_frame,
)

LIMIT = 1 << 20


def oracle(frame: Frame, *, masked: bool) -> bytes:
    return frame.serialize(mask=masked)


def feed_in_pieces(reader: FrameReader, data: bytes, cuts: list[int]) -> list[Message]:
    out: list[Message] = []
    start = 0
    for cut in [*sorted(set(cuts)), len(data)]:
        if start <= cut <= len(data):
            out += reader.feed(data[start:cut])
            start = cut
    return out


# One message as websockets would send it: fragments, with control frames between them.
messages_st = st.lists(
    st.tuples(
        st.sampled_from([Opcode.TEXT, Opcode.BINARY]),
        st.one_of(
            st.binary(max_size=300),
            st.sampled_from([b"", os.urandom(126), os.urandom(65535), os.urandom(70000)]),
        ),
        st.integers(min_value=1, max_value=4),  # fragments
        st.booleans(),  # a ping between the fragments
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=150, deadline=None)
@given(messages_st, st.booleans(), st.lists(st.integers(min_value=0, max_value=300_000)))
def test_whatever_websockets_writes_reads_back_however_it_is_split(
    specs: list[tuple[Opcode, bytes, int, bool]], masked: bool, cuts: list[int]
) -> None:
    wire = b""
    expected: list[Message] = []
    for opcode, payload, pieces, ping in specs:
        if opcode is Opcode.TEXT:
            payload = payload.decode("latin-1").encode("utf-8")  # any bytes as valid UTF-8
        size = max(1, len(payload) // pieces + 1)
        chunks = [payload[i : i + size] for i in range(0, len(payload), size)] or [b""]
        for index, chunk in enumerate(chunks):
            first = index == 0
            last = index == len(chunks) - 1
            frame_opcode = opcode if first else Opcode.CONT
            wire += oracle(Frame(frame_opcode, chunk, fin=last), masked=masked)
            if ping and not last:
                wire += oracle(Frame(Opcode.PING, b"p"), masked=masked)
                expected.append((OP_PING, b"p"))
        expected.append(
            (OP_TEXT, payload.decode()) if opcode is Opcode.TEXT else (OP_BINARY, payload)
        )
    reader = FrameReader(masked=masked, max_message=LIMIT)
    assert feed_in_pieces(reader, wire, cuts) == expected


@pytest.mark.parametrize("size", [0, 1, 125, 126, 960, 65535, 65536, 70000])
@pytest.mark.parametrize("masked", [False, True])
def test_what_we_write_websockets_reads(size: int, masked: bool) -> None:
    payload = os.urandom(size)
    keys = MaskKeys()
    peer = Protocol(Side.SERVER if masked else Side.CLIENT, state=State.OPEN, max_size=None)
    peer.receive_data(encode_frame(OP_BINARY, payload, keys.next() if masked else None))
    peer.receive_data(encode_frame(OP_TEXT, "héllo".encode(), keys.next() if masked else None))
    frames = peer.events_received()
    assert [(f.opcode, f.data, f.fin) for f in frames] == [
        (Opcode.BINARY, payload, True),
        (Opcode.TEXT, "héllo".encode(), True),
    ]
    assert peer.state is State.OPEN  # nothing it objected to


def test_the_length_encoding_is_minimal() -> None:
    assert len(encode_frame(OP_BINARY, b"x" * 125)) == 2 + 125
    assert len(encode_frame(OP_BINARY, b"x" * 126)) == 4 + 126
    assert len(encode_frame(OP_BINARY, b"x" * 65536)) == 10 + 65536


def test_a_large_frame_arriving_in_many_reads_is_parsed_once_complete() -> None:
    payload = os.urandom(200_000)
    wire = oracle(Frame(Opcode.BINARY, payload), masked=True)
    reader = FrameReader(masked=True, max_message=LIMIT)
    got: list[Message] = []
    for start in range(0, len(wire), 1000):
        got += reader.feed(wire[start : start + 1000])
    assert got == [(OP_BINARY, payload)]


def test_control_frames_pass_between_fragments_and_a_close_is_validated() -> None:
    reader = FrameReader(masked=False, max_message=LIMIT)
    wire = (
        oracle(Frame(Opcode.TEXT, b"he", fin=False), masked=False)
        + oracle(Frame(Opcode.PONG, b"x"), masked=False)
        + oracle(Frame(Opcode.CONT, b"llo"), masked=False)
        + oracle(Frame(Opcode.CLOSE, Close(1001, "bye").serialize()), masked=False)
    )
    assert reader.feed(wire) == [
        (OP_PONG, b"x"),
        (OP_TEXT, "hello"),
        (OP_CLOSE, struct.pack("!H", 1001) + b"bye"),
    ]


def frame_bytes(first: int, payload: bytes, *, masked: bool = False) -> bytes:
    size = len(payload)
    key = b"\x01\x02\x03\x04"
    second = (0x80 if masked else 0) | (size if size < 126 else 126)
    head = bytes([first, second]) + (struct.pack("!H", size) if size >= 126 else b"")
    if masked:
        masked_payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
        return head + key + masked_payload
    return head + payload


@pytest.mark.parametrize(
    ("wire", "code", "reason"),
    [
        (frame_bytes(0xC2, b"x"), CLOSE_PROTOCOL_ERROR, "reserved bits set"),
        (frame_bytes(0x83, b"x"), CLOSE_PROTOCOL_ERROR, "reserved opcode 3"),
        (frame_bytes(0x8B, b"x"), CLOSE_PROTOCOL_ERROR, "reserved opcode 11"),
        (frame_bytes(0x09, b"x"), CLOSE_PROTOCOL_ERROR, "fragmented control frame"),
        (frame_bytes(0x89, b"x" * 126), CLOSE_PROTOCOL_ERROR, "control frame too long"),
        (frame_bytes(0x80, b"x"), CLOSE_PROTOCOL_ERROR, "continuation of no message"),
        (
            frame_bytes(0x01, b"a") + frame_bytes(0x81, b"b"),
            CLOSE_PROTOCOL_ERROR,
            "new message inside a fragmented one",
        ),
        (frame_bytes(0x81, b"\xff\xfe"), CLOSE_INVALID_DATA, "text frame is not UTF-8"),
        (frame_bytes(0x88, b"\x03"), CLOSE_PROTOCOL_ERROR, "close frame with a 1-byte payload"),
        (frame_bytes(0x88, struct.pack("!H", 1005)), CLOSE_PROTOCOL_ERROR, "invalid close code"),
        (frame_bytes(0x88, struct.pack("!H", 999)), CLOSE_PROTOCOL_ERROR, "invalid close code"),
        (
            frame_bytes(0x88, struct.pack("!H", 1000) + b"\xff"),
            CLOSE_INVALID_DATA,
            "close reason is not UTF-8",
        ),
        (frame_bytes(0x82, b"x", masked=True), CLOSE_PROTOCOL_ERROR, "masked server frame"),
        (
            bytes([0x82, 127]) + struct.pack("!Q", 1 << 63),
            CLOSE_PROTOCOL_ERROR,
            "frame length out of range",
        ),
    ],
)
def test_a_client_reading_its_server_fails_on_what_the_rfc_forbids(
    wire: bytes, code: int, reason: str
) -> None:
    reader = FrameReader(masked=False, max_message=LIMIT)
    with pytest.raises(ProtocolViolation) as caught:
        reader.feed(wire)
    assert caught.value.code == code
    assert str(caught.value).startswith(reason)
    assert reader.feed(frame_bytes(0x81, b"later")) == []  # the reader is done


def test_a_server_refuses_an_unmasked_client_frame() -> None:
    reader = FrameReader(masked=True, max_message=LIMIT)
    with pytest.raises(ProtocolViolation, match="unmasked client frame"):
        reader.feed(frame_bytes(0x82, b"x"))


def test_an_oversized_message_fails_before_its_payload_arrives() -> None:
    reader = FrameReader(masked=True, max_message=1000)
    header_only = bytes([0x82, 0x80 | 126]) + struct.pack("!H", 1001)
    with pytest.raises(ProtocolViolation) as caught:
        reader.feed(header_only)
    assert caught.value.code == CLOSE_TOO_BIG


def test_a_fragmented_message_counts_every_fragment_toward_the_limit() -> None:
    reader = FrameReader(masked=False, max_message=10)
    assert reader.feed(frame_bytes(0x02, b"x" * 6)) == []
    with pytest.raises(ProtocolViolation) as caught:
        reader.feed(frame_bytes(0x80, b"x" * 5))
    assert caught.value.code == CLOSE_TOO_BIG


def test_messages_before_a_violation_in_the_same_read_are_kept() -> None:
    reader = FrameReader(masked=False, max_message=LIMIT)
    with pytest.raises(ProtocolViolation) as caught:
        reader.feed(frame_bytes(0x81, b"first") + frame_bytes(0xC2, b"x"))
    assert caught.value.before == [(OP_TEXT, "first")]


def test_invalid_utf8_fails_at_the_fragment_where_it_appears() -> None:
    # Autobahn 6.4.1: a valid first fragment, then one that makes the text invalid; the reader
    # fails there, without waiting for the end of the message.
    reader = FrameReader(masked=True, max_message=LIMIT)
    assert reader.feed(frame_bytes(0x01, "κόσμε".encode(), masked=True)) == []
    with pytest.raises(ProtocolViolation) as caught:
        reader.feed(frame_bytes(0x00, b"\xf4\x90", masked=True))  # not final
    assert caught.value.code == CLOSE_INVALID_DATA
    assert str(caught.value) == "text frame is not UTF-8"
    assert reader.feed(frame_bytes(0x80, b"edited", masked=True)) == []  # the reader is done


def test_code_points_cut_between_fragments_are_joined() -> None:
    # Autobahn 6.2.3: one octet per fragment, so most fragments end inside a code point.
    text = "κόσμε €𝄞"
    data = text.encode()
    wire = frame_bytes(0x01, data[:1])
    for index in range(1, len(data)):
        wire += frame_bytes(0x80 if index == len(data) - 1 else 0x00, data[index : index + 1])
        if index == 3:
            wire += frame_bytes(0x89, b"between")
    reader = FrameReader(masked=False, max_message=LIMIT)
    assert feed_in_pieces(reader, wire, [5, 17]) == [(OP_PING, b"between"), (OP_TEXT, text)]


def test_a_code_point_the_last_fragment_leaves_incomplete_is_invalid() -> None:
    reader = FrameReader(masked=False, max_message=LIMIT)
    assert reader.feed(frame_bytes(0x01, b"ab\xe2\x82")) == []  # "€" cut: fine for now
    with pytest.raises(ProtocolViolation) as caught:
        reader.feed(frame_bytes(0x80, b""))  # the message ends without the last octet
    assert caught.value.code == CLOSE_INVALID_DATA


def test_every_fragmented_text_message_is_decoded_afresh() -> None:
    reader = FrameReader(masked=False, max_message=LIMIT)
    wire = b""
    for text in ("né", "€uro", "z"):
        data = text.encode()
        wire += frame_bytes(0x01, data[:2]) + frame_bytes(0x80, data[2:])
    assert reader.feed(wire) == [(OP_TEXT, "né"), (OP_TEXT, "€uro"), (OP_TEXT, "z")]


def test_a_fragmented_binary_message_is_not_read_as_text() -> None:
    reader = FrameReader(masked=False, max_message=LIMIT)
    wire = frame_bytes(0x02, b"\xf4") + frame_bytes(0x80, b"\x90")
    assert reader.feed(wire) == [(OP_BINARY, b"\xf4\x90")]


def test_close_payloads() -> None:
    assert close_code(b"") == (CLOSE_NO_STATUS, "")
    assert close_code(close_payload(4000, "custom")) == (4000, "custom")
    cut = close_payload(1000, "é" * 100)  # cut to fit, never mid-character
    assert len(cut) <= 125
    assert close_code(cut)[1] == "é" * 61


def test_mask_keys_are_four_bytes_and_do_not_repeat() -> None:
    keys = MaskKeys()
    drawn = [keys.next() for _ in range(3000)]  # crosses a block boundary
    assert all(len(key) == 4 for key in drawn)
    assert len(set(drawn)) > 2990
