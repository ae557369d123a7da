"""StreamResampler: spectrum and level kept, chunking invisible, lengths exact, passthrough free."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.audio import StreamResampler, rms_dbfs, to_int16, tone

RATES = [8000, 16000, 24000, 48000]
RATE_PAIRS = [(a, b) for a, b in itertools.permutations(RATES, 2)]

# libsoxr adds ±1 LSB TPDF dither to int16 output, and where the dither lands depends on how
# the input was cut, so two runs of the same signal agree to within two LSB, not bit for bit.
DITHER_LSB = 2


def sine(freq_hz: float, seconds: float, rate: int, amplitude: float = 0.5) -> bytes:
    t = np.arange(round(seconds * rate)) / rate
    return np.rint(np.sin(2 * np.pi * freq_hz * t) * amplitude * 32767).astype("<i2").tobytes()


def noise(seconds: float, rate: int, seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    return rng.normal(0, 4000, round(seconds * rate)).astype("<i2").tobytes()


def samples(pcm: bytes) -> npt.NDArray[np.int64]:
    return to_int16(pcm).astype(np.int64)


def split(pcm: bytes, sizes_in_samples: Iterable[int]) -> list[bytes]:
    chunks, start = [], 0
    for size in itertools.cycle(sizes_in_samples):
        if start >= len(pcm):
            return chunks
        chunks.append(pcm[start : start + 2 * size])
        start += 2 * size
    raise AssertionError("unreachable")


def run(resampler: StreamResampler, chunks: Iterable[bytes]) -> tuple[bytes, list[int]]:
    """Stream ``chunks`` through and flush; also return where each call's output ended."""
    outputs = [resampler.process(chunk) for chunk in chunks]
    outputs.append(resampler.flush())
    ends = np.cumsum([len(out) // 2 for out in outputs]).tolist()
    return b"".join(outputs), ends


def one_shot(in_rate: int, out_rate: int, pcm: bytes) -> bytes:
    resampler = StreamResampler(in_rate, out_rate)
    return resampler.process(pcm) + resampler.flush()


def peak_frequency(pcm: bytes, rate: int) -> float:
    x = samples(pcm).astype(np.float64)
    x = x[len(x) // 4 : 3 * len(x) // 4]  # steady state only
    spectrum = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    return float(np.fft.rfftfreq(len(x), 1 / rate)[np.argmax(spectrum)])


def steady_rms_dbfs(pcm: bytes) -> float:
    n = len(pcm) // 2
    return rms_dbfs(pcm[n // 2 // 2 * 2 : 3 * n // 2 // 2 * 2])


def test_sine_keeps_frequency_and_level_through_16k_24k_16k() -> None:
    original = sine(1000, 1.0, 16000)
    twenty_ms = [320]
    up, _ = run(StreamResampler(16000, 24000), split(original, twenty_ms))
    down, _ = run(StreamResampler(24000, 16000), split(up, [480]))

    assert len(up) // 2 == 24000
    assert len(down) == len(original)
    # Bins are 2 Hz wide over the analysed half second.
    assert peak_frequency(up, 24000) == pytest.approx(1000, abs=2)
    assert peak_frequency(down, 16000) == pytest.approx(1000, abs=2)
    assert steady_rms_dbfs(up) == pytest.approx(steady_rms_dbfs(original), abs=1.0)
    assert steady_rms_dbfs(down) == pytest.approx(steady_rms_dbfs(original), abs=1.0)
    # Time-aligned, not just similar: the round trip reproduces the waveform itself.
    middle = slice(4000, 12000)
    error = samples(down)[middle] - samples(original)[middle]
    assert np.abs(error).max() < 0.01 * 32767


@pytest.mark.parametrize(("in_rate", "out_rate"), RATE_PAIRS)
def test_random_chunking_matches_one_shot_sample_for_sample(in_rate: int, out_rate: int) -> None:
    signal = noise(0.5, in_rate, seed=in_rate + out_rate)
    rng = np.random.default_rng(in_rate * out_rate)
    sizes = rng.integers(1, 1200, size=64).tolist()
    streamed, ends = run(StreamResampler(in_rate, out_rate), split(signal, sizes))
    reference = one_shot(in_rate, out_rate, signal)

    a, b = samples(streamed), samples(reference)
    assert len(a) == len(b)
    assert best_lag(a, b) == 0
    assert np.abs(a - b).max() <= DITHER_LSB
    # No discontinuity where one call's output meets the next: the step across each seam is
    # the step the one-shot signal takes there.
    seams = [end for end in ends[:-1] if 0 < end < len(a)]
    assert seams, "the stream was not actually cut"
    seam_steps = np.abs(a[seams] - a[np.array(seams) - 1])
    reference_steps = np.abs(b[seams] - b[np.array(seams) - 1])
    assert (np.abs(seam_steps - reference_steps) <= 2 * DITHER_LSB).all()


def best_lag(a: npt.NDArray[np.int64], b: npt.NDArray[np.int64], max_lag: int = 8) -> int:
    """The shift of ``a`` against ``b`` (in samples) that correlates best."""
    core = slice(max_lag, len(b) - max_lag)
    scores = {
        lag: float(np.dot(a[core.start + lag : core.stop + lag], b[core]))
        for lag in range(-max_lag, max_lag + 1)
    }
    return max(scores, key=scores.__getitem__)


@settings(max_examples=40, deadline=None)
@given(
    pair=st.sampled_from(RATE_PAIRS),
    sizes=st.lists(st.integers(min_value=1, max_value=700), min_size=1, max_size=20),
)
def test_any_chunking_gives_the_same_stream(pair: tuple[int, int], sizes: list[int]) -> None:
    in_rate, out_rate = pair
    signal = noise(0.1, in_rate, seed=1)
    streamed, _ = run(StreamResampler(in_rate, out_rate), split(signal, sizes))
    reference = one_shot(in_rate, out_rate, signal)
    assert len(streamed) == len(reference)
    assert np.abs(samples(streamed) - samples(reference)).max() <= DITHER_LSB


@pytest.mark.parametrize(("in_rate", "out_rate"), RATE_PAIRS)
def test_total_length_after_flush(in_rate: int, out_rate: int) -> None:
    rng = np.random.default_rng(abs(in_rate - out_rate))
    for total_in in (1, 159, 160, 4801, in_rate // 3 + 7):
        signal = noise(total_in / in_rate, in_rate)
        assert len(signal) == 2 * total_in
        sizes = rng.integers(1, 500, size=16).tolist()
        streamed, _ = run(StreamResampler(in_rate, out_rate), split(signal, sizes))
        assert abs(len(streamed) // 2 - round(total_in * out_rate / in_rate)) <= 1


def test_one_sample_at_a_time() -> None:
    signal = sine(440, 0.05, 8000)
    streamed, _ = run(StreamResampler(8000, 24000), split(signal, [1]))
    reference = one_shot(8000, 24000, signal)
    assert len(streamed) == len(reference) == 2 * 1200
    assert np.abs(samples(streamed) - samples(reference)).max() <= DITHER_LSB


@pytest.mark.parametrize("rate", RATES)
def test_passthrough_returns_the_same_object(rate: int) -> None:
    resampler = StreamResampler(rate, rate)
    chunk = tone(440, 20, rate)
    assert resampler.is_passthrough
    assert resampler.process(chunk) is chunk
    assert resampler.flush() == b""
    resampler.reset()
    assert resampler.process(chunk) is chunk


def test_flush_starts_a_fresh_stream() -> None:
    resampler = StreamResampler(16000, 24000)
    first, _ = run(resampler, split(sine(700, 0.2, 16000), [320]))
    second, _ = run(resampler, split(sine(1300, 0.2, 16000), [320]))
    fresh, _ = run(StreamResampler(16000, 24000), split(sine(1300, 0.2, 16000), [320]))
    assert len(first) == len(second) == len(fresh) == 2 * 4800
    # Nothing of the 700 Hz stream leaks into the next one.
    assert np.abs(samples(second) - samples(fresh)).max() <= DITHER_LSB


def test_output_may_lag_but_flush_releases_the_tail() -> None:
    resampler = StreamResampler(8000, 24000)
    held = sum(len(resampler.process(chunk)) for chunk in split(sine(440, 0.1, 8000), [160]))
    assert held < 2 * 2400  # libsoxr holds part of the stream back
    assert held + len(resampler.flush()) == 2 * 2400


def test_reset_drops_held_back_audio() -> None:
    resampler = StreamResampler(24000, 16000)
    for chunk in split(sine(440, 0.1, 24000, amplitude=0.9), [480]):
        resampler.process(chunk)
    resampler.reset()
    after, _ = run(resampler, split(bytes(2 * 2400), [480]))
    assert len(after) == 2 * 1600
    assert np.abs(samples(after)).max() <= DITHER_LSB


def test_digital_silence_stays_far_below_a_speech_threshold() -> None:
    out, _ = run(StreamResampler(16000, 48000), split(bytes(2 * 1600), [320]))
    assert rms_dbfs(out) < -80


def test_empty_chunk_and_bad_input() -> None:
    resampler = StreamResampler(16000, 24000)
    assert resampler.process(b"") == b""
    with pytest.raises(ValueError, match="odd length"):
        resampler.process(b"\x00\x00\x00")
    with pytest.raises(ValueError, match="odd length"):
        StreamResampler(16000, 16000).process(b"\x00")
    with pytest.raises(ValueError, match="positive"):
        StreamResampler(0, 16000)
    assert "16000" in repr(resampler)
    assert "'MQ'" in repr(resampler)


def test_quality_is_selectable() -> None:
    signal = sine(1000, 0.2, 16000)
    for quality in ("LQ", "HQ", "VHQ"):
        resampler = StreamResampler(16000, 24000, quality=quality)
        out, _ = run(resampler, split(signal, [320]))
        assert len(out) == 2 * 4800
        assert math.isclose(peak_frequency(out, 24000), 1000, abs_tol=10)
