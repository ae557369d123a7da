"""``python -m gateway.audio.filter_bank``: design the shipped resampler filters again.

Writes ``filter_bank.json`` beside it: the default quality's filter for every pair of the
protocol's sample rates (``tests/unit/audio/test_audio_filter_bank.py`` checks that the file is
what a fresh design gives). Run it after changing the filter specification.
"""

from __future__ import annotations

from gateway.audio.filters import BANK_PATH, write_bank

__all__ = ["PROTOCOL_RATES"]

PROTOCOL_RATES = (8000, 16000, 24000, 48000)  # gateway.protocol.ALLOWED_SAMPLE_RATES

if __name__ == "__main__":
    write_bank(PROTOCOL_RATES)
    print(f"wrote {BANK_PATH}")
