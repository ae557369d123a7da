"""The shipped filter designs (``gateway/audio/filter_bank.json``): every pair of the protocol's
rates, each what a fresh design gives today, and a gateway that starts without scipy."""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys

import numpy as np
import pytest

from gateway.audio import filters
from gateway.protocol import ALLOWED_SAMPLE_RATES

PAIRS = [(a, b) for a, b in itertools.permutations(ALLOWED_SAMPLE_RATES, 2)]


def _shipped() -> dict[str, list[float]]:
    bank: dict[str, list[float]] = json.loads(filters.BANK_PATH.read_text())["filters"]
    return bank


def test_every_pair_of_the_protocols_rates_is_shipped() -> None:
    assert set(_shipped()) == {f"{a}>{b}:{filters.DEFAULT_QUALITY}" for a, b in PAIRS}


@pytest.mark.parametrize(("in_rate", "out_rate"), PAIRS)
def test_a_shipped_design_is_what_a_fresh_design_gives(in_rate: int, out_rate: int) -> None:
    g = math.gcd(in_rate, out_rate)
    nyquist = min(in_rate, out_rate) / 2
    fresh = filters._minimum_phase_lowpass(  # the designer itself, with scipy
        out_rate // g * in_rate,
        filters.PASSBAND * nyquist,
        filters.STOPBAND * nyquist,
        filters.ATTENUATION_DB[filters.DEFAULT_QUALITY],
    )
    shipped = np.array(_shipped()[f"{in_rate}>{out_rate}:{filters.DEFAULT_QUALITY}"])
    assert shipped.shape == fresh.shape
    np.testing.assert_allclose(shipped, fresh, rtol=1e-9, atol=1e-12)


def test_the_protocols_resamplers_are_ready_without_importing_scipy() -> None:
    script = (
        "import sys\n"
        "from gateway.audio.resample import design_resamplers\n"
        f"design_resamplers({tuple(ALLOWED_SAMPLE_RATES)})\n"
        "print('scipy' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "False", done.stderr
