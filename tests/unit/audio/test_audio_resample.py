"""StreamResampler: low delay, nothing held back, spectrum kept, chunking invisible."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import signal

from gateway.audio import StreamResampler, rms_dbfs, to_int16, tone
from gateway.audio.filters import (
    ATTENUATION_DB,
    PASSBAND,
    PASSBAND_RIPPLE_DB,
    ResampleQuality,
    design,
)

RATES = [8000, 16000, 24000, 48000]
RATE_PAIRS = [(a, b) for a, b in itertools.permutations(RATES, 2)]
QUALITIES: list[ResampleQuality] = ["LQ", "MQ", "HQ"]

# The budget: what the resampler may add to the latency, each way.
MAX_DELAY_MS = 5.0

# The filter runs in float32: two ways of cutting a stream agree to within one LSB (a sum that
# lands next to .5 may round either way), not always bit for bit.
LSB = 1


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


def twenty_ms(pcm: bytes, rate: int) -> list[bytes]:
    return split(pcm, [rate // 50])


def run(resampler: StreamResampler, chunks: Iterable[bytes]) -> tuple[bytes, list[int]]:
    """Stream ``chunks`` through and flush; also return where each call's output ended."""
    outputs = [resampler.process(chunk) for chunk in chunks]
    outputs.append(resampler.flush())
    ends = np.cumsum([len(out) // 2 for out in outputs]).tolist()
    return b"".join(outputs), ends


def one_shot(in_rate: int, out_rate: int, pcm: bytes) -> bytes:
    resampler = StreamResampler(in_rate, out_rate)
    return resampler.process(pcm) + resampler.flush()


def expected_length(total_in: int, in_rate: int, out_rate: int) -> int:
    """``round(total_in × out / in)``, halves rounded up."""
    return (2 * total_in * out_rate + in_rate) // (2 * in_rate)


def spectrum_db(pcm: bytes, rate: int) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Amplitude spectrum of the steady state (the first 50 ms dropped), in dB re full scale:
    a full-scale sine reads 0 dB at its frequency."""
    x = samples(pcm)[rate // 20 :].astype(np.float64)
    window = signal.windows.blackmanharris(len(x))
    amplitude = np.abs(np.fft.rfft(x * window)) * 2 / window.sum() / 32767
    return np.fft.rfftfreq(len(x), 1 / rate), 20 * np.log10(amplitude + 1e-20)


def level_at(freqs: npt.NDArray[np.float64], db: npt.NDArray[np.float64], hz: float) -> float:
    return float(db[np.abs(freqs - hz) <= 3].max())


def peak_frequency(pcm: bytes, rate: int) -> float:
    x = samples(pcm).astype(np.float64)
    x = x[len(x) // 4 : 3 * len(x) // 4]  # steady state only
    spectrum = np.abs(np.fft.rfft(x * np.hanning(len(x))))
    return float(np.fft.rfftfreq(len(x), 1 / rate)[np.argmax(spectrum)])


def steady_rms_dbfs(pcm: bytes) -> float:
    n = len(pcm) // 2
    return rms_dbfs(pcm[n // 2 // 2 * 2 : 3 * n // 2 // 2 * 2])


# -- delay -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("in_rate", "out_rate"), RATE_PAIRS)
def test_an_impulse_comes_out_within_the_delay_budget(in_rate: int, out_rate: int) -> None:
    at = in_rate // 10 + 7  # 100 ms in, not on a chunk boundary
    impulse = np.zeros(in_rate // 5, dtype="<i2")
    impulse[at] = 32767
    out, _ = run(StreamResampler(in_rate, out_rate), twenty_ms(impulse.tobytes(), in_rate))

    peak = int(np.argmax(np.abs(samples(out))))
    delay_ms = (peak / out_rate - at / in_rate) * 1000
    # Causal, and at most one output sample early (where the impulse falls between two).
    assert -1000 / out_rate <= delay_ms <= MAX_DELAY_MS


@pytest.mark.parametrize(("in_rate", "out_rate"), RATE_PAIRS)
def test_a_band_limited_pulse_comes_out_within_the_delay_budget(
    in_rate: int, out_rate: int
) -> None:
    """The group delay over the speech band: cross-correlate the output with the same pulse
    sampled at the output rate (a windowed sinc reaching 0.8 of the lower Nyquist)."""
    bandwidth = 0.8 * min(in_rate, out_rate) / 2

    def pulse(rate: int) -> npt.NDArray[np.float64]:
        t = np.arange(rate // 5) / rate - 0.1
        return np.sinc(2 * bandwidth * t) * np.exp(-0.5 * (t / 0.002) ** 2) * 16000

    sent = np.rint(pulse(in_rate)).astype("<i2").tobytes()
    out, _ = run(StreamResampler(in_rate, out_rate), twenty_ms(sent, in_rate))
    got, ideal = samples(out).astype(np.float64), pulse(out_rate)

    edge = out_rate // 20  # the lags below stay inside the signal

    def score(lag: int) -> float:
        return float(np.dot(got[edge + lag : len(got) - edge + lag], ideal[edge:-edge]))

    lags = range(-out_rate // 1000, out_rate // 100)  # -1 ms .. 10 ms
    scores = [score(lag) for lag in lags]
    delay_ms = lags[int(np.argmax(scores))] / out_rate * 1000
    assert 0 <= delay_ms <= MAX_DELAY_MS


@pytest.mark.parametrize(("in_rate", "out_rate"), RATE_PAIRS)
@pytest.mark.parametrize("quality", QUALITIES)
def test_filter_meets_its_spec(in_rate: int, out_rate: int, quality: ResampleQuality) -> None:
    """On a dense grid: flat passband, the stated stopband, and a group delay over the whole
    passband far inside the budget."""
    f = design(in_rate, out_rate, quality)
    nyquist = min(in_rate, out_rate) / 2
    assert f.passband_hz == PASSBAND * nyquist
    assert f.stopband_hz == nyquist
    freqs = np.linspace(0, f.common_rate / 2, 20001)
    _, response = signal.freqz(f.taps / f.up, worN=freqs, fs=f.common_rate)
    gain_db = 20 * np.log10(np.abs(response) + 1e-300)
    passband = freqs <= f.passband_hz
    assert np.abs(gain_db[passband]).max() <= PASSBAND_RIPPLE_DB
    assert gain_db[freqs >= f.stopband_hz].max() <= -ATTENUATION_DB[quality]
    _, delay = signal.group_delay((f.taps, [1.0]), w=freqs[passband][1:], fs=f.common_rate)
    assert (delay / f.common_rate * 1000).max() <= 2.0


@pytest.mark.parametrize(("in_rate", "out_rate"), [(32000, 48000), (44100, 48000)])
def test_rates_the_gateway_does_not_use_work_too(in_rate: int, out_rate: int) -> None:
    """Any rational ratio: 32→48 kHz (3/2, an equiripple prototype) and 44.1→48 kHz
    (160/147: 9,000 taps at 7 MHz, where the Kaiser window stands in)."""
    f = design(in_rate, out_rate)
    freqs, response = signal.freqz(f.taps / f.up, worN=1 << 18, fs=f.common_rate)
    gain_db = 20 * np.log10(np.abs(response) + 1e-300)
    assert np.abs(gain_db[freqs <= f.passband_hz]).max() <= PASSBAND_RIPPLE_DB
    assert gain_db[freqs >= f.stopband_hz].max() <= -ATTENUATION_DB["MQ"]
    signal_ = noise(0.2, in_rate)
    streamed, _ = run(StreamResampler(in_rate, out_rate), twenty_ms(signal_, in_rate))
    reference = one_shot(in_rate, out_rate, signal_)
    assert len(streamed) // 2 == expected_length(len(signal_) // 2, in_rate, out_rate)
    assert np.abs(samples(streamed) - samples(reference)).max() <= LSB


# -- nothing held back, lengths exact ------------------------------------------------------------


@pytest.mark.parametrize(("in_rate", "out_rate"), RATE_PAIRS)
def test_every_chunk_comes_out_at_once(in_rate: int, out_rate: int) -> None:
    resampler = StreamResampler(in_rate, out_rate)
    chunk_in = in_rate // 50
    total_in = 0
    total_out = 0
    for chunk in twenty_ms(noise(0.3, in_rate), in_rate):
        out = resampler.process(chunk)
        total_in += len(chunk) // 2
        total_out += len(out) // 2
        assert abs(len(out) // 2 - chunk_in * out_rate / in_rate) <= 1
        assert total_out == expected_length(total_in, in_rate, out_rate)
    assert resampler.flush() == b""  # nothing was held back


@pytest.mark.parametrize(("in_rate", "out_rate"), RATE_PAIRS)
def test_total_length_after_flush(in_rate: int, out_rate: int) -> None:
    rng = np.random.default_rng(abs(in_rate - out_rate))
    for total_in in (1, 2, 159, 160, 4801, in_rate // 3 + 7):
        signal_ = noise(total_in / in_rate, in_rate)
        assert len(signal_) == 2 * total_in
        sizes = rng.integers(1, 500, size=16).tolist()
        streamed, _ = run(StreamResampler(in_rate, out_rate), split(signal_, sizes))
        assert len(streamed) // 2 == expected_length(total_in, in_rate, out_rate)
        assert abs(len(streamed) // 2 - round(total_in * out_rate / in_rate)) <= 1


# -- frequency response, through the streaming API ----------------------------------------------


def tones_in_passband(in_rate: int, out_rate: int) -> list[float]:
    edge = PASSBAND * min(in_rate, out_rate) / 2
    return sorted({f for f in (300.0, 1000.0, 3000.0, 6000.0) if f < edge} | {edge})


@pytest.mark.parametrize(("in_rate", "out_rate"), RATE_PAIRS)
def test_passband_tones_keep_their_level_and_nothing_else_appears(
    in_rate: int, out_rate: int
) -> None:
    """Each tone comes out at its own frequency and level (±0.2 dB: the filter's ±0.1 dB and
    the measurement's own); every other component (images when upsampling, aliases of the
    images when the ratio is not whole) stays below the stated attenuation."""
    attenuation = ATTENUATION_DB["MQ"]
    for freq in tones_in_passband(in_rate, out_rate):
        out, _ = run(
            StreamResampler(in_rate, out_rate), twenty_ms(sine(freq, 1.0, in_rate), in_rate)
        )
        freqs, db = spectrum_db(out, out_rate)
        level = level_at(freqs, db, freq)
        assert level == pytest.approx(20 * np.log10(0.5), abs=0.2), f"{freq} Hz"
        spurious = db[np.abs(freqs - freq) > 50].max()
        assert spurious <= level - attenuation, f"{freq} Hz: a component at {spurious:.1f} dB"


@pytest.mark.parametrize(("in_rate", "out_rate"), [(a, b) for a, b in RATE_PAIRS if a > b])
def test_stopband_tones_do_not_alias(in_rate: int, out_rate: int) -> None:
    """Downsampling: a tone from the lower Nyquist up (4.08, 4.4 and 7.6 kHz at 16→8 kHz; 8.16,
    8.8 and 11.4 kHz at 24→16 kHz; ...) comes out below the stated attenuation, wherever its
    alias lands."""
    nyquist = out_rate / 2
    attenuation = ATTENUATION_DB["MQ"]
    for freq in (1.02 * nyquist, 1.1 * nyquist, 0.95 * in_rate / 2):
        sent = sine(freq, 1.0, in_rate, amplitude=0.9)
        out, _ = run(StreamResampler(in_rate, out_rate), twenty_ms(sent, in_rate))
        _, db = spectrum_db(out, out_rate)
        assert db.max() <= 20 * np.log10(0.9) - attenuation, f"{freq:.0f} Hz"


def test_sine_keeps_frequency_and_level_through_16k_24k_16k() -> None:
    original = sine(1000, 1.0, 16000)
    up, _ = run(StreamResampler(16000, 24000), twenty_ms(original, 16000))
    down, _ = run(StreamResampler(24000, 16000), twenty_ms(up, 24000))

    assert len(up) // 2 == 24000
    assert len(down) == len(original)
    # Bins are 2 Hz wide over the analysed half second.
    assert peak_frequency(up, 24000) == pytest.approx(1000, abs=2)
    assert peak_frequency(down, 16000) == pytest.approx(1000, abs=2)
    assert steady_rms_dbfs(up) == pytest.approx(steady_rms_dbfs(original), abs=0.1)
    assert steady_rms_dbfs(down) == pytest.approx(steady_rms_dbfs(original), abs=0.1)
    # The waveform itself, only shifted: a clean 1 kHz sine at the original amplitude, and
    # behind the original by the round trip's phase delay (well under a millisecond).
    t = np.arange(4000, 12000) / 16000
    basis = np.column_stack([np.sin(2 * np.pi * 1000 * t), np.cos(2 * np.pi * 1000 * t)])
    (a, b), *_ = np.linalg.lstsq(basis, samples(down)[4000:12000], rcond=None)
    assert np.hypot(a, b) == pytest.approx(0.5 * 32767, rel=0.01)
    assert np.abs(basis @ [a, b] - samples(down)[4000:12000]).max() < 0.001 * 32767
    delay_ms = -np.arctan2(b, a) / (2 * np.pi * 1000) * 1000
    assert 0 < delay_ms < 1


# -- chunking, state ---------------------------------------------------------------------------


@pytest.mark.parametrize(("in_rate", "out_rate"), RATE_PAIRS)
def test_random_chunking_matches_one_shot_sample_for_sample(in_rate: int, out_rate: int) -> None:
    signal_ = noise(0.5, in_rate, seed=in_rate + out_rate)
    rng = np.random.default_rng(in_rate * out_rate)
    sizes = rng.integers(1, 1200, size=64).tolist()
    streamed, ends = run(StreamResampler(in_rate, out_rate), split(signal_, sizes))
    reference = one_shot(in_rate, out_rate, signal_)

    a, b = samples(streamed), samples(reference)
    assert len(a) == len(b)
    assert np.abs(a - b).max() <= LSB
    seams = [end for end in ends[:-1] if 0 < end < len(a)]
    assert seams, "the stream was not actually cut"


@settings(max_examples=40, deadline=None)
@given(
    pair=st.sampled_from(RATE_PAIRS),
    sizes=st.lists(st.integers(min_value=1, max_value=5000), min_size=1, max_size=20),
)
def test_any_chunking_gives_the_same_stream(pair: tuple[int, int], sizes: list[int]) -> None:
    in_rate, out_rate = pair
    signal_ = noise(0.3, in_rate, seed=1)
    streamed, _ = run(StreamResampler(in_rate, out_rate), split(signal_, sizes))
    reference = one_shot(in_rate, out_rate, signal_)
    assert len(streamed) == len(reference)
    assert np.abs(samples(streamed) - samples(reference)).max() <= LSB


def test_one_sample_at_a_time() -> None:
    for in_rate, out_rate in ((8000, 24000), (48000, 8000)):
        signal_ = sine(440, 0.05, in_rate)
        streamed, _ = run(StreamResampler(in_rate, out_rate), split(signal_, [1]))
        reference = one_shot(in_rate, out_rate, signal_)
        assert len(streamed) == len(reference) == 2 * out_rate // 20
        assert np.abs(samples(streamed) - samples(reference)).max() <= LSB


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
    assert not resampler.is_passthrough
    first, _ = run(resampler, twenty_ms(sine(700, 0.2, 16000), 16000))
    second, _ = run(resampler, twenty_ms(sine(1300, 0.2, 16000), 16000))
    fresh, _ = run(StreamResampler(16000, 24000), twenty_ms(sine(1300, 0.2, 16000), 16000))
    assert len(first) == len(second) == len(fresh) == 2 * 4800
    # Nothing of the 700 Hz stream leaks into the next one.
    assert np.abs(samples(second) - samples(fresh)).max() <= LSB


def test_reset_drops_the_history() -> None:
    resampler = StreamResampler(24000, 16000)
    for chunk in twenty_ms(sine(440, 0.1, 24000, amplitude=0.9), 24000):
        resampler.process(chunk)
    resampler.reset()
    after, _ = run(resampler, twenty_ms(bytes(2 * 2400), 24000))
    assert len(after) == 2 * 1600
    assert not after.strip(b"\x00")  # digital silence: no tail of the loud stream


@pytest.mark.parametrize(("in_rate", "out_rate"), RATE_PAIRS)
def test_digital_silence_stays_digital_silence(in_rate: int, out_rate: int) -> None:
    out, _ = run(StreamResampler(in_rate, out_rate), twenty_ms(bytes(in_rate // 5), in_rate))
    assert out
    assert not out.strip(b"\x00")  # no dither, no noise


def test_full_scale_input_clips_instead_of_wrapping() -> None:
    """The filter overshoots a full-scale step by a few percent: those samples clip at the int16
    limits, where a bare cast would wrap them around to the opposite sign."""
    for level in (32767, -32768):
        step = np.full(1600, level, dtype="<i2").tobytes()
        out = samples(run(StreamResampler(8000, 24000), twenty_ms(step, 8000))[0])
        assert (np.sign(out[out != 0]) == np.sign(level)).all()
        assert (out == level).any()  # the overshoot, clipped
        # Settled after 10 ms, but for the images of DC at 8 and 16 kHz, each held to -70 dB.
        assert np.abs(out[24000 // 100 :] - level).max() <= 2 * 32768 * 10 ** (-70 / 20)


def test_empty_chunk_and_bad_input() -> None:
    resampler = StreamResampler(16000, 24000)
    assert resampler.process(b"") == b""
    with pytest.raises(ValueError, match="odd length"):
        resampler.process(b"\x00\x00\x00")
    with pytest.raises(ValueError, match="odd length"):
        StreamResampler(16000, 16000).process(b"\x00")
    with pytest.raises(ValueError, match="positive"):
        StreamResampler(0, 16000)
    with pytest.raises(ValueError, match="quality"):
        StreamResampler(16000, 24000, quality="VHQ")  # type: ignore[arg-type]
    assert "16000" in repr(resampler)
    assert "'MQ'" in repr(resampler)


def test_quality_trades_taps_for_attenuation() -> None:
    signal_ = sine(1000, 0.2, 16000)
    taps = []
    for quality in QUALITIES:
        resampler = StreamResampler(16000, 24000, quality=quality)
        out, _ = run(resampler, twenty_ms(signal_, 16000))
        assert len(out) == 2 * 4800
        assert peak_frequency(out, 24000) == pytest.approx(1000, abs=2)
        taps.append(design(16000, 24000, quality).phase_taps)
    assert taps == sorted(set(taps))  # strictly more taps for more attenuation


def test_streams_sharing_the_threads_scratch_do_not_disturb_each_other() -> None:
    # A small pair first, then one whose pieces need more scratch (it is grown meanwhile):
    # interleaved, chunk by chunk, each stream comes out as it does alone.
    pairs = ((16000, 24000), (48000, 8000))
    signals = [noise(0.4, in_rate, seed=index) for index, (in_rate, _) in enumerate(pairs)]
    sizes = [[320, 7, 1500, 320, 4096], [960, 4000, 1, 960, 2048]]
    alone = [
        run(StreamResampler(*pair), split(signal_, chunk_sizes))[0]
        for pair, signal_, chunk_sizes in zip(pairs, signals, sizes, strict=True)
    ]
    resamplers = [StreamResampler(*pair) for pair in pairs]
    chunks = [
        split(signal_, chunk_sizes) for signal_, chunk_sizes in zip(signals, sizes, strict=True)
    ]
    together: list[list[bytes]] = [[], []]
    for turn in range(max(len(c) for c in chunks)):
        for index, resampler in enumerate(resamplers):
            if turn < len(chunks[index]):
                together[index].append(resampler.process(chunks[index][turn]))
    assert [b"".join(parts) for parts in together] == alone


def test_a_stream_moved_to_another_thread_goes_on_unchanged() -> None:
    signal_ = noise(0.3, 16000, seed=7)
    chunks = split(signal_, [320])
    reference, _ = run(StreamResampler(16000, 24000), chunks)
    resampler = StreamResampler(16000, 24000)
    half = len(chunks) // 2
    first = b"".join(resampler.process(chunk) for chunk in chunks[:half])
    with ThreadPoolExecutor(max_workers=1) as other:
        second = other.submit(lambda: b"".join(resampler.process(c) for c in chunks[half:]))
        assert first + second.result() == reference
