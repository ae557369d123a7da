"""A session in G.711 A-law ("pcma", a carrier such as Telnyx): its converter passes A-law on
untouched where the other side takes it too, and converts it as it does µ-law otherwise."""

from __future__ import annotations

import numpy as np

from gateway.audio.convert import AudioConverter, bytes_per_sample, encoded
from gateway.audio.g711 import alaw_decode, alaw_encode, ulaw_decode, ulaw_encode


def _tone(rate: int, ms: int, hz: float = 440.0) -> bytes:
    t = np.arange(rate * ms // 1000) / rate
    return (np.sin(2 * np.pi * hz * t) * 8000).astype("<i2").tobytes()


def _level(pcm: bytes, trim: int) -> int:
    """The loudest sample, away from the filter's ramps at both ends."""
    return int(np.abs(np.frombuffer(pcm, "<i2")[trim:-trim]).max())


def test_a_law_on_an_upstream_that_takes_it_passes_the_very_bytes() -> None:
    converter = AudioConverter("pcma", 8000, "pcma", 8000)
    chunk = bytes(range(160))
    assert converter.is_passthrough
    assert converter.process(chunk) is chunk
    assert converter.flush() == b""


def test_an_a_law_call_on_a_24_khz_upstream_is_decoded_and_resampled() -> None:
    converter = AudioConverter("pcma", 8000, "pcm16", 24000)
    alaw = alaw_encode(_tone(8000, 200))
    out = b"".join(converter.process(alaw[i : i + 160]) for i in range(0, len(alaw), 160))
    out += converter.flush()
    assert abs(len(out) // 2 - 4800) <= 3  # 200 ms at 24 kHz
    assert 7000 <= _level(out, 1200) <= 9000  # the tone's level survives A-law and the filter


def test_a_24_khz_reply_reaches_an_a_law_call_as_8_khz_a_law() -> None:
    converter = AudioConverter("pcm16", 24000, "pcma", 8000)
    pcm = _tone(24000, 200)
    out = b"".join(converter.process(pcm[i : i + 960]) for i in range(0, len(pcm), 960))
    out += converter.flush()
    assert abs(len(out) - 1600) <= 2  # one byte a sample at 8 kHz
    assert 7000 <= _level(alaw_decode(out), 200) <= 9000


def test_a_tone_goes_to_24_khz_and_back_to_a_law_within_a_tolerance() -> None:
    pcm = _tone(8000, 300)
    up = AudioConverter("pcma", 8000, "pcm16", 24000)
    down = AudioConverter("pcm16", 24000, "pcma", 8000)
    wide = up.process(alaw_encode(pcm)) + up.flush()
    back = alaw_decode(down.process(wide) + down.flush())
    assert abs(len(back) - len(pcm)) <= 4
    # The filters delay it by a fraction of a sample: judge its level and pitch, not each sample.
    assert 7000 <= _level(back, 400) <= 9000
    middle = np.frombuffer(back, "<i2")[400:2000].astype(np.float64)
    spectrum = np.abs(np.fft.rfft(middle * np.hanning(len(middle))))
    hz_per_bin = 8000 / len(middle)  # 5 Hz
    assert abs(np.argmax(spectrum) * hz_per_bin - 440) <= hz_per_bin
    # Nothing but the tone: away from it the spectrum is about 30 dB below its peak or more
    # (A-law's quantisation noise and the filters' images).
    near = slice(int(400 / hz_per_bin), int(480 / hz_per_bin))
    away = np.delete(spectrum, np.arange(len(spectrum))[near])
    assert away.max() < spectrum.max() / 30


def test_a_law_and_mu_law_convert_into_each_other_at_8_khz() -> None:
    pcm = _tone(8000, 100)
    to_ulaw = AudioConverter("pcma", 8000, "pcmu", 8000)
    to_alaw = AudioConverter("pcmu", 8000, "pcma", 8000)
    assert not to_ulaw.is_passthrough
    assert not to_alaw.is_passthrough
    ulaw = to_ulaw.process(alaw_encode(pcm)) + to_ulaw.flush()
    alaw = to_alaw.process(ulaw_encode(pcm)) + to_alaw.flush()
    # Decoded by one law, encoded by the other; the same rate, so nothing resampled or held.
    assert ulaw == ulaw_encode(alaw_decode(alaw_encode(pcm)))
    assert alaw == alaw_encode(ulaw_decode(ulaw_encode(pcm)))
    # Sample for sample, only the two laws' quantisation apart (each within ~1/32).
    source = np.frombuffer(pcm, "<i2").astype(np.int32)
    for heard in (ulaw_decode(ulaw), alaw_decode(alaw)):
        error = np.abs(np.frombuffer(heard, "<i2").astype(np.int32) - source)
        assert error.max() <= 8000 // 16


def test_a_law_is_one_byte_a_sample_and_judged_as_pcm16() -> None:
    pcm = _tone(8000, 20)
    judged = AudioConverter("pcma", 8000, "pcma", 8000).as_pcm16(alaw_encode(pcm))
    assert judged == alaw_decode(alaw_encode(pcm))
    assert bytes_per_sample("pcma") == 1
    # Silence in A-law is 0xD5 (PCM 0), not µ-law's 0xFF.
    assert encoded(bytes(4), "pcma") == b"\xd5\xd5"
    assert encoded(bytes(4), "pcmu") == b"\xff\xff"
    assert encoded(pcm, "pcm16") is pcm
