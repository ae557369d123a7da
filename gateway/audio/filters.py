"""Filter design for ``StreamResampler``: one minimum-phase FIR lowpass per rate pair.

Resampling by the rational ratio ``L/M`` (``L = out/g``, ``M = in/g``, ``g = gcd(in, out)``)
is: put ``L - 1`` zeros between input samples, lowpass at the common rate ``L × in``, keep every
``M``-th sample. The one lowpass does both jobs: it removes the images of the input spectrum that
the zeros create (upsampling) and the band that would alias (downsampling). So its cutoff is the
lower of the two Nyquist frequencies, ``min(in, out) / 2``. The filter:

* passband flat (within ±0.1 dB) up to ``PASSBAND`` = 0.85 of the lower Nyquist: 3.4 kHz
  where 8 kHz is involved, the telephone band's own edge (G.711 calls carry nothing above it);
  6.8 kHz at 16 kHz, 10.2 kHz at 24 kHz. The response is -3 dB at 0.89–0.90 of the Nyquist
  (7.1 kHz at 16 kHz). Recognisers and listeners lose nothing that matters for speech; a wider
  passband needs a narrower transition band, so more taps (1.5× for 0.9);
* stopband from the lower Nyquist itself (``STOPBAND`` = 1.0): everything that would alias or
  image starts there, so nothing at all lands below the Nyquist, not even in the 0.85–1.0
  transition band, less attenuated than the stated figure;
* attenuation by quality preset (``ATTENUATION_DB``): LQ 50 dB, MQ 70 dB (the default), HQ
  90 dB. With 70 dB an alias sits 25–35 dB under the noise of a phone line or a laptop
  microphone (their signal-to-noise ratio is 35–45 dB), beyond what any recogniser can notice;
  90 dB reaches int16's own quantisation floor, past which more taps buy nothing.

Why minimum phase: a linear-phase FIR delays every frequency by half its length. Meeting the
spec above, that is 2.6 ms each way at the 8 kHz pairs and 1.3 ms at 16↔24 kHz: within the
5 ms budget, but ten times what is needed. The minimum-phase filter with the same magnitude
response puts its energy at the front: 0.1–0.25 ms of group delay at 1 kHz, rising to 0.6 ms
(16↔24 kHz) or 1.2 ms (8 kHz pairs) at the passband edge (measured figures in
``gateway.audio.resample``). The price is that dispersion near the band edge: a phase change
that neither listeners nor recognisers hear.

How: an equiripple linear-phase prototype (``scipy.signal.remez``, the fewest taps for the spec,
so the least work per sample) made minimum phase with ``scipy.signal.minimum_phase(half=False)``
(homomorphic), which keeps its magnitude response and its length. The result is checked against
the spec on a dense grid and lengthened until it meets it. For rate pairs whose common rate is
so high that the prototype would be thousands of taps long (none of the gateway's: its rates
share 48 kHz), a Kaiser window (``firwin``, closed form) stands in for ``remez``, which would be
slow there. Designed once per (in, out, quality) and cached for the process: about 10 ms for
each of the gateway's pairs (0.3 s for 44.1→48 kHz, 2 s for 44.1→16 kHz). ``scipy.signal`` is
imported only to design a filter that is not shipped: it takes most of a second and about 70 MB.
The default quality's filters for every pair of the protocol's rates are designed ahead and
shipped in ``filter_bank.json`` (``python -m gateway.audio.filter_bank`` writes it; a test checks it
against a fresh design), so ``gateway serve`` starts without scipy.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt

__all__ = [
    "ATTENUATION_DB",
    "BANK_PATH",
    "DEFAULT_QUALITY",
    "PASSBAND",
    "PASSBAND_RIPPLE_DB",
    "STOPBAND",
    "PolyphaseFilter",
    "ResampleQuality",
    "design",
    "write_bank",
]

BANK_PATH = Path(__file__).with_name("filter_bank.json")
"""The default quality's filters for every pair of the protocol's rates, designed ahead
(``write_bank``), so that ``gateway serve`` needs neither scipy's import nor a design to start;
a test checks them against a fresh design."""

ResampleQuality = Literal["LQ", "MQ", "HQ"]
"""Stopband attenuation presets (``ATTENUATION_DB``); passband and delay are about the same."""

DEFAULT_QUALITY: ResampleQuality = "MQ"

ATTENUATION_DB: dict[ResampleQuality, float] = {"LQ": 50.0, "MQ": 70.0, "HQ": 90.0}
"""The least stopband attenuation of each preset, over the whole stopband."""

PASSBAND = 0.85
"""Passband edge, as a fraction of the lower Nyquist frequency ``min(in, out) / 2``."""

PASSBAND_RIPPLE_DB = 0.1
"""The passband gain stays within ± this of the gain at DC, which is 0 dB."""

STOPBAND = 1.0
"""Stopband edge, as a fraction of the lower Nyquist frequency."""

# Taps per output over inputs per block (see ``PolyphaseFilter``): blocks of about K/2 inputs.
# Measured per 20 ms chunk, anything from K/4 to K inputs costs about the same; the smallest
# blocks (B = 1) cost 20–70% more, and blocks of 4·K inputs 50–120% more.
_BLOCK_SPAN = 2.0

# Past this many prototype taps, remez gets slow (0.1 s at 2,000) and may fail to converge.
_MAX_EQUIRIPPLE_TAPS = 4000


@dataclass(frozen=True, slots=True, eq=False)
class PolyphaseFilter:
    """A designed lowpass, laid out for block-wise polyphase resampling.

    Output sample ``m`` is ``Σ_t taps[p + t·L] · x[i - t]`` (``t < K``) where
    ``m·M = i·L + p``, ``0 ≤ p < L``. Outputs are computed in blocks of ``B·L`` that consume
    ``B·M`` inputs: block ``q`` (outputs ``q·B·L ..``) reads the ``window = K - 1 + B·M``
    inputs from ``x[q·B·M - K + 1]`` on, and ``block_matrix`` (``window × B·L``) maps them to
    the block's outputs, so a run of blocks is one matrix product. ``B`` trades the copy that
    gathers the (overlapping) windows, about ``(1 + K / (B·M))`` × the input, against the zeros
    that the banded block matrix multiplies, about ``B·M / K`` × the useful work.
    """

    up: int
    """``L``: the output rate over the rates' greatest common divisor."""
    down: int
    """``M``: the input rate over the rates' greatest common divisor."""
    taps: npt.NDArray[np.float64]
    """The minimum-phase lowpass at the common rate ``L × in``, DC gain ``L``."""
    phase_taps: int
    """``K``: taps per output sample, ``ceil(len(taps) / L)``."""
    block_outputs: int
    """``B·L``: the outputs of one block."""
    block_inputs: int
    """``B·M``: the inputs one block consumes (its window is ``K - 1`` longer)."""
    block_matrix: npt.NDArray[np.float32]
    """``(K - 1 + B·M, B·L)``: one block's input window to its outputs."""
    common_rate: int
    """The rate the filter runs at: ``L × in``, the least common multiple of the rates."""
    passband_hz: float
    stopband_hz: float
    attenuation_db: float

    @property
    def window(self) -> int:
        """Inputs that one block reads: ``K - 1 + B·M``."""
        return self.phase_taps - 1 + self.block_inputs


def design(
    in_rate: int, out_rate: int, quality: ResampleQuality = DEFAULT_QUALITY
) -> PolyphaseFilter:
    """The lowpass for resampling ``in_rate`` → ``out_rate`` Hz (the rates must differ),
    designed at the first call and cached for the process."""
    if in_rate <= 0 or out_rate <= 0 or in_rate == out_rate:
        raise ValueError(f"no resampling filter for {in_rate} → {out_rate} Hz")
    if quality not in ATTENUATION_DB:
        raise ValueError(f"unknown quality {quality!r}, not one of {list(ATTENUATION_DB)}")
    return _design(in_rate, out_rate, quality)


@functools.cache
def _design(in_rate: int, out_rate: int, quality: ResampleQuality) -> PolyphaseFilter:
    attenuation = ATTENUATION_DB[quality]
    g = math.gcd(in_rate, out_rate)
    up, down = out_rate // g, in_rate // g
    common = up * in_rate
    nyquist = min(in_rate, out_rate) / 2
    passband, stopband = PASSBAND * nyquist, STOPBAND * nyquist
    shipped = _shipped().get(_bank_key(in_rate, out_rate, quality))
    taps = (
        np.array(shipped, dtype=np.float64)
        if shipped is not None
        else _minimum_phase_lowpass(common, passband, stopband, attenuation)
    )
    taps *= up / taps.sum()  # DC gain L: after the zeros, each output phase has gain 1
    taps.setflags(write=False)
    phase_taps = -(-len(taps) // up)
    # Blocks of about K/2 inputs: the window copy is then about three times the input, and the
    # matrix product about 1.5 times the useful work (measured best, see _BLOCK_SPAN).
    blocks = max(1, round(phase_taps / (_BLOCK_SPAN * down)))
    matrix = _block_matrix(taps, up, down, phase_taps, blocks)
    matrix.setflags(write=False)
    return PolyphaseFilter(
        up=up,
        down=down,
        taps=taps,
        phase_taps=phase_taps,
        block_outputs=blocks * up,
        block_inputs=blocks * down,
        block_matrix=matrix,
        common_rate=common,
        passband_hz=passband,
        stopband_hz=stopband,
        attenuation_db=attenuation,
    )


def _minimum_phase_lowpass(
    rate: int, passband: float, stopband: float, attenuation_db: float
) -> npt.NDArray[np.float64]:
    """The shortest minimum-phase lowpass found that meets the spec at ``rate`` Hz."""
    from scipy import signal  # slow to import: see the module docstring

    # Equiripple about the mean gain, to half the spec: normalising to DC can double it.
    ripple = 10 ** (PASSBAND_RIPPLE_DB / 2 / 20) - 1  # passband deviation, linear
    leak = 10 ** (-attenuation_db / 20)  # stopband deviation, linear
    bands = [0, passband, stopband, rate / 2]
    # Kaiser's estimate of the equiripple length; then lengthen until the spec is met.
    width = (stopband - passband) / rate
    numtaps = math.ceil((-10 * math.log10(ripple * leak) - 13) / (14.6 * width)) | 1
    equiripple = numtaps <= _MAX_EQUIRIPPLE_TAPS
    while True:
        prototype: npt.NDArray[np.float64] | None = None
        if equiripple:
            try:
                prototype = signal.remez(numtaps, bands, [1, 0], weight=[1, ripple / leak], fs=rate)
            except ValueError:  # remez failed to converge: the window method cannot fail
                equiripple = False
                numtaps = 0
        if prototype is None:
            kaiser_taps, beta = signal.kaiserord(attenuation_db + 1, 2 * width)
            numtaps = max(numtaps, kaiser_taps | 1)
            cutoff = (passband + stopband) / 2
            prototype = signal.firwin(numtaps, cutoff, window=("kaiser", beta), fs=rate)
        taps = np.asarray(signal.minimum_phase(prototype, half=False), dtype=np.float64)
        if _meets_spec(taps, rate, passband, stopband, attenuation_db):
            return taps
        numtaps += 2 + numtaps // 50


def _meets_spec(
    taps: npt.NDArray[np.float64],
    rate: int,
    passband: float,
    stopband: float,
    attenuation_db: float,
) -> bool:
    """Whether ``taps`` (any gain) keep the passband ripple and stopband attenuation."""
    from scipy import signal  # slow to import: see the module docstring

    # A whole number of points makes freqz one FFT, 16 points per tap's worth of spectrum.
    points = 1 << max(13, (16 * len(taps)).bit_length())
    freqs, response = signal.freqz(taps, worN=points, fs=rate)
    gain_db = 20 * np.log10(np.abs(response) / abs(taps.sum()) + 1e-300)
    return bool(
        np.abs(gain_db[freqs <= passband]).max() <= PASSBAND_RIPPLE_DB
        and gain_db[freqs >= stopband].max() <= -attenuation_db
    )


def _bank_key(in_rate: int, out_rate: int, quality: ResampleQuality) -> str:
    return f"{in_rate}>{out_rate}:{quality}"


@functools.cache
def _shipped() -> dict[str, list[float]]:
    """The designs shipped with the package (``filter_bank.json``), by ``_bank_key``."""
    raw = json.loads(BANK_PATH.read_text(encoding="utf-8"))
    filters: dict[str, list[float]] = raw["filters"]
    return filters


def write_bank(rates: Iterable[int], path: Path = BANK_PATH) -> None:
    """Design every pair of ``rates`` at the default quality and write them to ``path`` (the
    prototypes, before their DC gain is set). ``python -m gateway.audio.filter_bank`` runs it."""
    chosen = sorted(set(rates))
    filters: dict[str, list[float]] = {}
    for in_rate in chosen:
        for out_rate in chosen:
            if in_rate == out_rate:
                continue
            g = math.gcd(in_rate, out_rate)
            nyquist = min(in_rate, out_rate) / 2
            taps = _minimum_phase_lowpass(
                out_rate // g * in_rate,
                PASSBAND * nyquist,
                STOPBAND * nyquist,
                ATTENUATION_DB[DEFAULT_QUALITY],
            )
            filters[_bank_key(in_rate, out_rate, DEFAULT_QUALITY)] = [float(t) for t in taps]
    body = {"passband": PASSBAND, "stopband": STOPBAND, "filters": filters}
    path.write_text(json.dumps(body, indent=0) + "\n", encoding="utf-8")


def _block_matrix(
    taps: npt.NDArray[np.float64], up: int, down: int, phase_taps: int, blocks: int
) -> npt.NDArray[np.float32]:
    """Lay the taps out so that ``window @ matrix`` gives one block's ``B·L`` outputs.

    Output ``r`` of block ``q`` is ``m = q·B·L + r``; ``m·M = (q·B·M + a)·L + p`` with
    ``a = r·M // L`` and ``p = r·M % L``. It reads ``x[q·B·M + a - t]`` for ``t < K``, which is
    window position ``s = a + K - 1 - t``, with the tap ``taps[p + t·L]``.
    """
    padded = np.zeros(phase_taps * up)
    padded[: len(taps)] = taps
    matrix = np.zeros((phase_taps - 1 + blocks * down, blocks * up), dtype=np.float32)
    t = np.arange(phase_taps)
    for r in range(blocks * up):
        a, p = divmod(r * down, up)
        matrix[a + phase_taps - 1 - t, r] = padded[p + t * up]
    return matrix
