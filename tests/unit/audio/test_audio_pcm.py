"""PCM16 helpers: sizes, the int16 view, the energy gate, generated silence and tones."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.audio import (
    SAMPLE_WIDTH,
    bytes_for_ms,
    duration_ms,
    is_speech,
    rms_dbfs,
    silence,
    to_int16,
    tone,
)

RATES = [8000, 16000, 24000, 48000]


@pytest.mark.parametrize("rate", RATES)
def test_twenty_ms_sizes(rate: int) -> None:
    n_bytes = bytes_for_ms(20, rate)
    assert n_bytes == rate // 50 * SAMPLE_WIDTH
    assert duration_ms(n_bytes, rate) == 20.0


def test_sizes_round_to_whole_samples() -> None:
    assert bytes_for_ms(0.1, 8000) == 2  # 0.8 samples → 1
    assert bytes_for_ms(0.05, 8000) == 0  # 0.4 samples → 0
    assert duration_ms(3, 8000) == 0.125  # the odd byte is not a sample
    assert bytes_for_ms(0, 16000) == 0


@given(ms=st.integers(min_value=0, max_value=60_000), rate=st.sampled_from(RATES))
def test_whole_millisecond_sizes_round_trip(ms: int, rate: int) -> None:
    assert duration_ms(bytes_for_ms(ms, rate), rate) == ms


def test_sizes_reject_nonsense() -> None:
    with pytest.raises(ValueError, match="negative"):
        bytes_for_ms(-1, 16000)
    with pytest.raises(ValueError, match="positive"):
        duration_ms(640, 0)


def test_to_int16_is_a_little_endian_view_without_copy() -> None:
    frame = b"\x01\x00\xff\xff\x00\x80"
    samples = to_int16(frame)
    assert samples.tolist() == [1, -1, -32768]
    assert samples.dtype == np.dtype("<i2")
    assert not samples.flags.owndata
    assert not samples.flags.writeable
    assert np.shares_memory(samples, np.frombuffer(frame, dtype=np.uint8))
    with pytest.raises(ValueError, match="odd length"):
        to_int16(b"\x00")


@pytest.mark.parametrize("rate", RATES)
def test_silence_is_exact_zeros(rate: int) -> None:
    quiet = silence(20, rate)
    assert quiet == bytes(rate // 50 * 2)
    assert rms_dbfs(quiet) == -math.inf
    assert not is_speech(quiet)


def test_rms_of_empty_frame_is_minus_infinity() -> None:
    assert rms_dbfs(b"") == -math.inf
    assert not is_speech(b"")


@pytest.mark.parametrize("rate", RATES)
def test_tone_length_and_level(rate: int) -> None:
    beep = tone(440, 200, rate, amplitude=0.3)
    assert len(beep) == bytes_for_ms(200, rate)
    # A sine of peak 0.3 has an RMS of 0.3 / sqrt(2); the 5 ms fades take off a little.
    expected = 20 * math.log10(0.3 / math.sqrt(2))
    assert rms_dbfs(beep) == pytest.approx(expected, abs=0.3)
    assert is_speech(beep)
    assert np.abs(to_int16(beep)).max() <= round(0.3 * 32767)


def test_full_scale_levels() -> None:
    square = np.array([32767, -32768] * 80, dtype="<i2").tobytes()
    assert rms_dbfs(square) == pytest.approx(0.0, abs=1e-3)
    assert rms_dbfs(np.full(160, 1, dtype="<i2").tobytes()) == pytest.approx(-90.3, abs=0.01)


def test_energy_gate_threshold() -> None:
    rng = np.random.default_rng(7)
    # Room noise around -60 dBFS is not speech; a quiet voice-level tone is.
    hiss = (rng.normal(0, 32768 * 10 ** (-60 / 20), 320)).astype("<i2").tobytes()
    assert rms_dbfs(hiss) == pytest.approx(-60, abs=1.5)
    assert not is_speech(hiss)
    assert is_speech(hiss, threshold_dbfs=-70.0)
    assert is_speech(tone(300, 20, 16000, amplitude=0.05))


def test_tone_fades_in_and_out() -> None:
    samples = to_int16(tone(1000, 100, 16000, amplitude=0.5)).astype(np.int64)
    assert samples[0] == 0
    assert samples[-1] == 0
    # Within the 5 ms ramps the envelope rises and falls gradually.
    fade = 80  # 5 ms at 16 kHz
    assert np.abs(samples[:8]).max() < 0.01 * 32767
    assert np.abs(samples[-8:]).max() < 0.01 * 32767
    assert np.abs(samples[fade : 2 * fade]).max() > 0.45 * 32767


def test_concatenated_tones_do_not_click() -> None:
    rate = 24000
    # Frequencies whose period does not divide the length, so the raw sines would end abruptly.
    words = [tone(f, 173, rate) for f in (330.0, 517.0, 441.0)]
    samples = to_int16(b"".join(words)).astype(np.int64)
    step = np.abs(np.diff(samples))
    joins = np.cumsum([len(w) // 2 for w in words[:-1]])
    # At a join the signal barely moves; inside a tone it moves by up to 2*pi*f/rate of peak.
    for join in joins:
        assert step[join - 2 : join + 2].max() <= 2
    assert step.max() < 2 * math.pi * 517 / rate * 0.3 * 32767 * 1.01


@pytest.mark.parametrize(
    ("freq", "amplitude", "message"),
    [(0, 0.3, "frequency"), (8000, 0.3, "frequency"), (440, 0.0, "amplitude"), (440, 1.5, "amp")],
)
def test_tone_rejects_nonsense(freq: float, amplitude: float, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        tone(freq, 20, 16000, amplitude=amplitude)


def test_very_short_tone() -> None:
    assert tone(440, 0, 16000) == b""
    assert len(tone(440, 0.125, 16000)) == 4  # two samples: no room for fades beyond one each
