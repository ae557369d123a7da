"""A session's audio converter: untouched when both sides agree, µ-law and rates otherwise."""

from __future__ import annotations

import numpy as np

from gateway.audio.convert import AudioConverter, bytes_per_sample
from gateway.audio.g711 import ulaw_decode, ulaw_encode


def _tone(rate: int, ms: int, hz: float = 440.0) -> bytes:
    t = np.arange(rate * ms // 1000) / rate
    return (np.sin(2 * np.pi * hz * t) * 8000).astype("<i2").tobytes()


def test_the_same_format_both_sides_passes_the_very_bytes() -> None:
    for encoding, rate in (("pcmu", 8000), ("pcm16", 24000)):
        converter = AudioConverter(encoding, rate, encoding, rate)
        chunk = bytes(range(160))
        assert converter.is_passthrough
        assert converter.process(chunk) is chunk
        assert converter.flush() == b""


def test_a_phone_call_on_a_16_khz_upstream_is_decoded_and_resampled() -> None:
    converter = AudioConverter("pcmu", 8000, "pcm16", 16000)
    ulaw = ulaw_encode(_tone(8000, 200))
    out = b"".join(converter.process(ulaw[i : i + 160]) for i in range(0, len(ulaw), 160))
    out += converter.flush()
    assert abs(len(out) // 2 - 3200) <= 2  # 200 ms at 16 kHz
    level = np.abs(np.frombuffer(out, "<i2")[400:-400]).max()
    assert 7000 <= level <= 9000  # the tone's level survives µ-law and the filter


def test_a_24_khz_reply_reaches_a_phone_call_as_8_khz_mu_law() -> None:
    converter = AudioConverter("pcm16", 24000, "pcmu", 8000)
    pcm = _tone(24000, 200)
    out = b"".join(converter.process(pcm[i : i + 960]) for i in range(0, len(pcm), 960))
    out += converter.flush()
    assert abs(len(out) - 1600) <= 2  # one byte a sample at 8 kHz
    level = np.abs(np.frombuffer(ulaw_decode(out), "<i2")[200:-200]).max()
    assert 7000 <= level <= 9000


def test_speech_is_judged_on_pcm16_whatever_the_client_sends() -> None:
    pcm = _tone(8000, 20)
    assert AudioConverter("pcmu", 8000, "pcmu", 8000).as_pcm16(ulaw_encode(pcm)) == ulaw_decode(
        ulaw_encode(pcm)
    )
    assert AudioConverter("pcm16", 16000, "pcm16", 24000).as_pcm16(pcm) is pcm
    assert (bytes_per_sample("pcmu"), bytes_per_sample("pcm16")) == (1, 2)
