"""µ-law for Twilio: the standard's known codes and the exact quantisation bound on every int16."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given
from hypothesis import strategies as st

from transports.twilio import mulaw

EVERY_INT16 = np.arange(-32768, 32768, dtype=np.int64)
BIAS = 0x84
CLIP = 32635


def pcm(*samples: int) -> bytes:
    return np.array(samples, dtype="<i2").tobytes()


def samples(pcm16: bytes) -> npt.NDArray[np.int64]:
    return np.frombuffer(pcm16, dtype="<i2").astype(np.int64)


def max_error(x: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The G.711 µ-law bound, derived from the standard's arithmetic.

    The biased magnitude m = min(|x|, 32635) + 0x84 lies in [132, 32767]; its segment s is the
    position of its leading one minus 7 (0..7), and the code keeps the 4 bits below that one, so
    the step in segment s is 2 ** (s + 3) and the decoder returns the middle of the step: the
    error is at most half a step, 2 ** (s + 2). Above the clip, the clipped part adds to it.
    """
    magnitude = np.minimum(np.abs(x), CLIP) + BIAS
    segment = np.floor(np.log2(magnitude)).astype(np.int64) - 7
    bound: npt.NDArray[np.int64] = (1 << (segment + 2)) + np.maximum(np.abs(x) - CLIP, 0)
    return bound


def test_known_codes_of_the_standard() -> None:
    assert mulaw.encode(pcm(0)) == b"\xff"
    assert mulaw.encode(pcm(32767)) == b"\x80"
    assert mulaw.encode(pcm(-32768)) == b"\x00"
    assert mulaw.encode(pcm(-1)) == b"\x7f"  # the negative zero: -1 is closer to 0 than to -8
    # Decoding: 0xFF and 0x7F are +0 and -0; 0x80 and 0x00 the largest magnitudes.
    assert samples(mulaw.decode(b"\xff\x7f\x80\x00")).tolist() == [0, 0, 32124, -32124]
    # Segment 0 has a step of 8: codes just below 0xFF decode to 8, 16, ...
    assert samples(mulaw.decode(b"\xfe\xfd\x7e")).tolist() == [8, 16, -8]


def test_every_int16_is_within_half_a_step_of_its_segment() -> None:
    decoded = samples(mulaw.decode(mulaw.encode(EVERY_INT16.astype("<i2").tobytes())))
    error = np.abs(decoded - EVERY_INT16)
    bound = max_error(EVERY_INT16)
    assert (error <= bound).all()
    # The bound is exact: every segment reaches it (for x whose magnitude is at a step's edge).
    for segment in range(8):
        in_segment = np.floor(np.log2(np.minimum(np.abs(EVERY_INT16), CLIP) + BIAS)) - 7
        below_clip = np.abs(EVERY_INT16) <= CLIP
        mask = (in_segment == segment) & below_clip
        assert error[mask].max() == 1 << (segment + 2)


@given(st.lists(st.integers(-32768, 32767), max_size=400))
def test_round_trip_of_any_signal_keeps_the_bound(values: list[int]) -> None:
    x = np.array(values, dtype=np.int64)
    decoded = samples(mulaw.decode(mulaw.encode(x.astype("<i2").tobytes())))
    assert decoded.shape == x.shape
    assert (np.abs(decoded - x) <= max_error(x)).all()


@given(st.binary(max_size=512))
def test_codes_survive_decode_then_encode(codes: bytes) -> None:
    # 0x7F (-0) re-encodes as 0xFF (+0); every other code is its own image.
    assert mulaw.encode(mulaw.decode(codes)) == codes.replace(b"\x7f", b"\xff")


def test_silence_stays_silence() -> None:
    assert mulaw.encode(bytes(320)) == bytes([mulaw.SILENCE]) * 160
    assert mulaw.decode(bytes([mulaw.SILENCE]) * 160) == bytes(320)


def test_a_20_ms_frame_is_160_bytes() -> None:
    tone = (8000 * np.sin(np.arange(160) * 2 * np.pi * 440 / 8000)).astype("<i2").tobytes()
    assert len(mulaw.encode(tone)) == 160
    assert len(mulaw.decode(mulaw.encode(tone))) == 320
    assert mulaw.encode(b"") == b""
    assert mulaw.decode(b"") == b""


@pytest.mark.parametrize("size", [1, 3, 321])
def test_an_odd_byte_count_is_refused(size: int) -> None:
    with pytest.raises(ValueError, match="odd"):
        mulaw.encode(bytes(size))
