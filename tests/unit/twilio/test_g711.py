"""G.711 µ-law / A-law: known values, the quantisation bound on every int16, byte properties."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.audio.g711 import (
    ULAW_SILENCE,
    alaw_decode,
    alaw_encode,
    ulaw_decode,
    ulaw_encode,
)

EVERY_INT16 = np.arange(-32768, 32768, dtype=np.int64)
EVERY_PCM16 = EVERY_INT16.astype("<i2").tobytes()
EVERY_CODE = bytes(range(256))

Codec = Callable[[bytes], bytes]

even_length_bytes = st.binary(max_size=2048).map(lambda b: b[: len(b) // 2 * 2])


def as_samples(pcm: bytes) -> npt.NDArray[np.int64]:
    return np.frombuffer(pcm, dtype="<i2").astype(np.int64)


def as_codes(codes: bytes) -> npt.NDArray[np.int64]:
    return np.frombuffer(codes, dtype=np.uint8).astype(np.int64)


# --- known values ---------------------------------------------------------------------------


def test_ulaw_known_values() -> None:
    assert ulaw_encode(b"\x00\x00") == b"\xff"
    assert as_samples(ulaw_decode(b"\xff\x7f\x00\x80")).tolist() == [0, 0, -32124, 32124]
    # Segment 0 codes 8 apart around the bias; full scale clips to the largest code.
    assert as_samples(ulaw_decode(b"\xfe\xfd")).tolist() == [8, 16]
    assert ulaw_encode(np.array([32767, -32768], dtype="<i2").tobytes()) == b"\x80\x00"


def test_alaw_known_values() -> None:
    assert as_samples(alaw_decode(b"\xd5\x55")).tolist() == [8, -8]
    assert alaw_encode(np.array([0, -1], dtype="<i2").tobytes()) == b"\xd5\x55"
    assert as_samples(alaw_decode(b"\xaa\x2a")).tolist() == [32256, -32256]
    assert alaw_encode(np.array([32767, -32768], dtype="<i2").tobytes()) == b"\xaa\x2a"


def test_decode_tables_are_odd_symmetric_and_monotonic() -> None:
    for decode, flip in ((ulaw_decode, 0x80), (alaw_decode, 0x80)):
        values = as_samples(decode(EVERY_CODE))
        flipped = as_samples(decode(bytes(c ^ flip for c in range(256))))
        assert (flipped == -values).all()
    # µ-law: inverted bits, so codes 0x80..0xFF run from +32124 down to 0.
    positives = as_samples(ulaw_decode(bytes(range(0x80, 0x100))))
    assert (np.diff(positives) < 0).all()
    # A-law: after removing the even-bit inversion, codes 0x80..0xFF rise from +8 to +32256.
    positives = as_samples(alaw_decode(bytes(c ^ 0x55 for c in range(0x80, 0x100))))
    assert (np.diff(positives) > 0).all()


# --- quantisation bound on every int16 -----------------------------------------------------
#
# µ-law: a magnitude m (clipped to 32635) is biased to m + 132 and coded by the leading one's
# position e (segment, 0..7) and the next 4 bits, so each code covers an interval of width
# 8 << e whose middle is what the decoder returns. Hence |decoded - clipped| <= 4 << e, and
# since m + 132 >= 128 << e, that is at most (m + 132) / 32: about 3 % of the magnitude.
#
# A-law: the top 13 bits t = x >> 3 (one's complement for negatives) are coded by segment s
# (leading one of t above bit 4; 0 if t < 32) and 4 bits; segments 0 and 1 share a step of 2
# in t, segment s >= 2 has 1 << s. In PCM16 units the step is 16 << max(s - 1, 0) and the
# decoder returns the middle, so |decoded - x| <= 8 << max(s - 1, 0), which for s >= 1 is at
# most (|x| + 8) / 32.


def ulaw_segment(magnitude: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    biased = np.minimum(magnitude, 32635) + 132
    return np.floor(np.log2(biased)).astype(np.int64) - 7


def alaw_segment(x: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    top13 = x >> 3
    t = np.where(top13 >= 0, top13, ~top13)
    return np.maximum(np.floor(np.log2(np.maximum(t, 1))).astype(np.int64) - 4, 0)


def test_ulaw_round_trip_error_within_half_a_step_for_every_int16() -> None:
    decoded = as_samples(ulaw_decode(ulaw_encode(EVERY_PCM16)))
    magnitude = np.abs(EVERY_INT16)
    clipped = np.sign(EVERY_INT16) * np.minimum(magnitude, 32635)
    error = np.abs(decoded - clipped)
    segment = ulaw_segment(magnitude)
    assert (error <= 4 << segment).all()
    assert (32 * error <= np.minimum(magnitude, 32635) + 132).all()
    # The bound is tight: every segment has an input at exactly half a step.
    for e in range(8):
        assert (error[segment == e] == 4 << e).any()
    # Clipping: anything beyond 32635 decodes to the largest level.
    assert (decoded[magnitude > 32635] == np.sign(EVERY_INT16[magnitude > 32635]) * 32124).all()


def test_alaw_round_trip_error_within_half_a_step_for_every_int16() -> None:
    decoded = as_samples(alaw_decode(alaw_encode(EVERY_PCM16)))
    error = np.abs(decoded - EVERY_INT16)
    segment = alaw_segment(EVERY_INT16)
    assert (error <= 8 << np.maximum(segment - 1, 0)).all()
    large = segment >= 1
    assert (32 * error[large] <= np.abs(EVERY_INT16[large]) + 8).all()
    for s in range(8):
        assert (error[segment == s] == 8 << max(s - 1, 0)).any()


@pytest.mark.parametrize(
    ("encode", "decode"), [(ulaw_encode, ulaw_decode), (alaw_encode, alaw_decode)]
)
def test_round_trip_is_monotonic(encode: Codec, decode: Codec) -> None:
    decoded = as_samples(decode(encode(EVERY_PCM16)))
    assert (np.diff(decoded) >= 0).all()


def test_ulaw_is_sign_magnitude_symmetric() -> None:
    positive = np.arange(1, 32768, dtype="<i2")
    codes = as_codes(ulaw_encode(positive.tobytes()))
    negated = as_codes(ulaw_encode((-positive).tobytes()))
    assert (negated == codes ^ 0x80).all()


def test_alaw_is_symmetric_around_minus_half() -> None:
    # A-law codes 13-bit t and -1 - t alike, apart from the sign bit.
    positive = np.arange(0, 32768, dtype=np.int64)
    mirrored = -1 - positive
    codes = as_codes(alaw_encode(positive.astype("<i2").tobytes()))
    mirrored_codes = as_codes(alaw_encode(mirrored.astype("<i2").tobytes()))
    assert (mirrored_codes == codes ^ 0x80).all()


def test_every_code_survives_decode_then_encode() -> None:
    assert alaw_encode(alaw_decode(EVERY_CODE)) == EVERY_CODE
    # µ-law has two zeros: 0x7F (negative zero) decodes to 0, which encodes as 0xFF.
    expected = bytearray(EVERY_CODE)
    expected[0x7F] = 0xFF
    assert ulaw_encode(ulaw_decode(EVERY_CODE)) == bytes(expected)


# --- arbitrary bytes -----------------------------------------------------------------------


@given(pcm=even_length_bytes)
def test_encode_then_decode_properties(pcm: bytes) -> None:
    for encode, decode in ((ulaw_encode, ulaw_decode), (alaw_encode, alaw_decode)):
        codes = encode(pcm)
        assert len(codes) == len(pcm) // 2
        decoded = decode(codes)
        assert len(decoded) == len(pcm)
        # Quantising an already quantised signal changes nothing.
        assert encode(decoded) == codes


@given(codes=st.binary(max_size=1024))
def test_decode_accepts_any_bytes(codes: bytes) -> None:
    for decode in (ulaw_decode, alaw_decode):
        decoded = decode(codes)
        assert len(decoded) == 2 * len(codes)
        assert np.abs(as_samples(decoded)).max(initial=0) <= 32256


@pytest.mark.parametrize("encode", [ulaw_encode, alaw_encode])
def test_encode_rejects_a_half_sample(encode: Codec) -> None:
    with pytest.raises(ValueError, match="odd length"):
        encode(b"\x00\x00\x00")


def test_empty_input_gives_empty_output() -> None:
    assert ulaw_encode(b"") == alaw_encode(b"") == b""
    assert ulaw_decode(b"") == alaw_decode(b"") == b""


def test_silence_pads_as_silence() -> None:
    """What the Twilio bridge pads a reply's last 20 ms frame with."""
    assert ulaw_encode(bytes(320)) == bytes([ULAW_SILENCE]) * 160
    assert ulaw_decode(bytes([ULAW_SILENCE]) * 160) == bytes(320)


def test_a_20_ms_frame_is_160_bytes() -> None:
    tone = (8000 * np.sin(np.arange(160) * 2 * np.pi * 440 / 8000)).astype("<i2").tobytes()
    assert len(ulaw_encode(tone)) == 160
    assert len(ulaw_decode(ulaw_encode(tone))) == 320
