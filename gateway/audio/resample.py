"""Streaming PCM16 sample-rate conversion for the audio relay, with under 0.3 ms of delay.

One ``StreamResampler`` per direction per session. It keeps the filter history between chunks,
so a stream cut into chunks of any size resamples like the whole signal at once (to ±1 LSB of
float rounding): no clicks at chunk boundaries, and no drift in length. Nothing is held back:
each call returns all the output its input completes, so after ``n`` input samples in all the
output is exactly ``round(n × out_rate / in_rate)`` samples (halves up). A 20 ms chunk in
gives 20 ms out, to within one sample, at once, and ``flush`` has nothing left to add.

Theory of operation. A polyphase FIR resampler for the rational ratio ``L/M``, with one
minimum-phase lowpass per rate pair (``gateway.audio.filters``: passband flat to ±0.1 dB up to
0.85 of the lower Nyquist, stopband from the lower Nyquist, 70 dB down for the default "MQ";
the module says why). Outputs are computed in blocks of ``B·L`` that consume ``B·M`` inputs and
each read a window of ``K - 1 + B·M`` inputs (``K``: taps per output). A call copies the windows
of its blocks out of one strided view of the input buffer and multiplies them by the filter's
block matrix, one float32 BLAS product, then clips and rounds to int16. The inputs after the
last complete block, and the ``K - 1`` before it, are the history carried to the next call.
The views a call needs depend only on the chunk's length and the state before it, which cycle
(11 states for 20 ms chunks at 16 → 24 kHz): they are made once per state and kept, so a call
is nine numpy operations on ready views. In the relay that count is what costs (each numpy call
takes microseconds with the caches cold), more than the arithmetic.

Why not libsoxr, used here before: it compensates its linear-phase filter's delay by holding
input back until a block is full, so with 20 ms chunks its "MQ" held back 21 ms on average
(38 ms at most) at 16↔24 kHz and 43 ms (75 ms) at 8→24 kHz, on each leg; LQ and HQ hold back
as much. Its "QQ" holds nothing back because it does no anti-alias filtering at all: a 7 kHz
tone at 16 kHz comes out of 16→8 kHz as a full-level 1 kHz alias. The python binding exposes
no other knob (no phase or low-delay setting), hence scipy's filter design and this loop.

Measured (tests/unit/audio/test_audio_resample.py holds every pair to the 5 ms budget, the
spec and these properties; µs from a throwaway timeit per 20 ms chunk on one core of the
2-core dev box, with soxr "MQ" timed in the same run for scale):

=========  ===  ============  ============  ======  ===========  ========  ========
pair, kHz   K   impulse peak  pulse xcorr   gd 1k   gd passband  µs/chunk  soxr µs
=========  ===  ============  ============  ======  ===========  ========  ========
16 → 24     43  0.15 ms       0.13 ms       0.10    ≤ 0.59 ms    5.1       5.0
24 → 16     64  0.15 ms       0.13 ms       0.10    ≤ 0.59 ms    5.3       4.9
8 → 24      43  0.29 ms       0.25 ms       0.23    ≤ 1.17 ms    5.0       4.0
24 → 8     127  0.21 ms       0.25 ms       0.23    ≤ 1.17 ms    5.4       3.7
8 → 16      43  0.25 ms       0.25 ms       0.19    ≤ 1.15 ms    4.6       3.3
16 → 8      86  0.19 ms       0.25 ms       0.19    ≤ 1.15 ms    4.9       3.1
48 → 16    127  0.10 ms       0.13 ms       0.10    ≤ 0.59 ms    6.3       5.1
48 → 24     86  0.06 ms       0.08 ms       0.07    ≤ 0.38 ms    6.3       4.8
=========  ===  ============  ============  ======  ===========  ========  ========

("impulse peak": where a click's response peaks; "pulse xcorr": the lag of a band-limited
pulse, by cross-correlation; "gd": the filter's group delay at 1 kHz and its largest over the
passband.) The cost is that of libsoxr's one call at 16 ↔ 24 kHz, and 1–2 µs more at the other
pairs.

Consequences for callers:

* the output of one ``process`` call is empty only when the chunk completes no output sample
  (a single input sample at 24→8 kHz): pass empty output on;
* ``flush`` returns nothing and resets for a new stream: the filter's ring-out (its energy is
  almost all in the first millisecond) is not appended, so that lengths stay exact;
* on barge-in, ``reset`` drops the history, so the next stream starts from silence.

Not thread-safe per instance. The windows' scratch array is per thread, shared by all the
instances of that thread, so thousands of sessions do not each keep one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
from numpy.lib.stride_tricks import as_strided

from gateway.audio.filters import (
    ATTENUATION_DB,
    DEFAULT_QUALITY,
    PolyphaseFilter,
    ResampleQuality,
    design,
)

__all__ = ["DEFAULT_QUALITY", "ResampleQuality", "StreamResampler", "design_resamplers"]

_PCM16 = np.dtype("<i2")
_FLOAT = np.dtype(np.float32)
_LOWEST, _HIGHEST = np.float32(-32768), np.float32(32767)

# Input samples resampled per matrix product (43 ms at 48 kHz): bounds the buffers and keeps
# the product small enough for one BLAS thread. A longer chunk is done in pieces, which changes
# nothing in the result.
_PIECE = 2048


class _Scratch(threading.local):
    """Per thread: the windows gathered for one product, its float outputs, and their int16."""

    windows: npt.NDArray[np.float32] = np.zeros(0, dtype=_FLOAT)
    outputs: npt.NDArray[np.float32] = np.zeros(0, dtype=_FLOAT)
    pcm: npt.NDArray[np.int16] = np.zeros(0, dtype=_PCM16)


_SCRATCH = _Scratch()

# Calls of the same shape repeat: a stream of 20 ms chunks cycles through a few states (11 at
# 16 → 24 kHz). Each state's views are made once and kept, so that a call is nine numpy calls
# (in the relay, each costs microseconds with cold caches). At most this many per stream.
_PLANS_KEPT = 24


_NOTHING = np.zeros(0, dtype=_FLOAT)


class _Plan(NamedTuple):
    """One call's work for a given (chunk length, pending inputs, emitted outputs), as views
    (``_NOTHING`` where a step does not apply: ``speaks`` and ``drops`` say which)."""

    scratch: npt.NDArray[np.float32]  # the thread's windows array the views below are into
    inputs: npt.NDArray[np.float32]  # where the chunk goes in the buffer
    pending: int  # after the call
    emitted: int  # after the call
    speaks: bool  # the call completes at least one output
    blocks: npt.NDArray[np.float32]  # the windows in the buffer
    windows: npt.NDArray[np.float32]  # ... gathered contiguously (scratch)
    products: npt.NDArray[np.float32]  # blocks × outputs per block (scratch)
    outputs: npt.NDArray[np.float32]  # the new outputs, flat, within products
    pcm: npt.NDArray[np.int16]  # their int16 (scratch)
    drops: bool  # complete blocks are dropped from the buffer's head
    kept_to: npt.NDArray[np.float32]  # the buffer's head
    kept_from: npt.NDArray[np.float32]  # what moves there


class StreamResampler:
    """Resample one continuous PCM16 mono stream from ``in_rate`` to ``out_rate`` Hz.

    When the rates are equal, ``process`` returns its argument itself (no copy, no state).
    Not thread-safe; use one instance per stream.
    """

    __slots__ = (
        "_blocks",
        "_buffer",
        "_emitted",
        "_filter",
        "_matrix",
        "_pending",
        "_plans",
        "in_rate",
        "out_rate",
        "quality",
    )

    def __init__(
        self, in_rate: int, out_rate: int, *, quality: ResampleQuality = DEFAULT_QUALITY
    ) -> None:
        if in_rate <= 0 or out_rate <= 0:
            raise ValueError(f"sample rates must be positive, got {in_rate} → {out_rate} Hz")
        if quality not in ATTENUATION_DB:  # checked here too: passthrough designs nothing
            raise ValueError(f"unknown quality {quality!r}, not one of {list(ATTENUATION_DB)}")
        self.in_rate = in_rate
        self.out_rate = out_rate
        self.quality = quality
        self._filter: PolyphaseFilter | None = None
        if in_rate == out_rate:
            return
        f = self._filter = design(in_rate, out_rate, quality)
        self._matrix = f.block_matrix
        # The history (K - 1 inputs), the inputs of a block not yet complete (under B·M + M),
        # one piece, and what a last, partly complete block reads past them (under B·M + M).
        size = f.phase_taps - 1 + _PIECE + 3 * f.block_inputs + 2
        self._buffer = np.zeros(size, dtype=_FLOAT)
        # Block q's window is buffer[q·B·M : q·B·M + window]: all of them, as one strided view.
        count = (size - f.window) // f.block_inputs + 1
        self._blocks: npt.NDArray[np.float32] = as_strided(
            self._buffer,
            shape=(count, f.window),
            strides=(f.block_inputs * _FLOAT.itemsize, _FLOAT.itemsize),
            writeable=False,
        )
        # buffer[0] is input q·B·M - K + 1, q the first block not yet complete; _pending inputs
        # from q·B·M on are in the buffer, and _emitted outputs from q·B·L on were returned.
        self._pending = 0
        self._emitted = 0
        self._plans: dict[tuple[int, int, int], _Plan] = {}

    @property
    def is_passthrough(self) -> bool:
        """True when the rates are equal and audio goes through untouched."""
        return self._filter is None

    def process(self, pcm: bytes) -> bytes:
        """Resample the next chunk of the stream (any whole number of samples, even one).

        Returns every output sample this input completes: ``n`` samples in give
        ``n × out_rate / in_rate`` out, to within one sample, at once.
        """
        if len(pcm) % 2:
            raise ValueError(f"PCM16 chunk has an odd length ({len(pcm)} bytes)")
        if self._filter is None:
            return pcm
        samples = np.frombuffer(pcm, dtype=_PCM16)
        if len(samples) <= _PIECE:
            return self._process(samples)
        return b"".join(
            self._process(samples[start : start + _PIECE])
            for start in range(0, len(samples), _PIECE)
        )

    def _process(self, samples: npt.NDArray[np.int16]) -> bytes:
        n = len(samples)
        if not n:
            return b""
        plan = self._plans.get((n, self._pending, self._emitted))
        if plan is None or plan.scratch is not _SCRATCH.windows:
            plan = self._plan(n)
        # One unpacking, and item assignment rather than np.copyto (no Python-level dispatch).
        (_, inputs, self._pending, self._emitted, speaks, blocks, windows, products, out, pcm,
         drops, kept_to, kept_from) = plan  # fmt: skip
        inputs[...] = samples
        if not speaks:
            return b""
        windows[...] = blocks
        np.dot(windows, self._matrix, out=products)
        out.clip(_LOWEST, _HIGHEST, out=out)
        np.rint(out, out=out)
        pcm[...] = out
        if drops:
            kept_to[...] = kept_from
        return pcm.tobytes()

    def _plan(self, n: int) -> _Plan:
        """The views for a call of ``n`` samples in the current state (kept for the next)."""
        f = self._filter
        assert f is not None
        history = f.phase_taps - 1
        pending = self._pending + n
        fill = history + pending
        inputs = self._buffer[fill - n : fill]
        # round(pending · L / M), half up, in integers. Output m needs inputs up to
        # floor(m·M / L) only, so every one of these is complete now.
        total = (2 * f.up * pending + f.down) // (2 * f.down)
        emitted = self._emitted
        scratch = _SCRATCH.windows
        if total == emitted:
            nothing = (_NOTHING,) * 4
            plan = _Plan(
                scratch,
                inputs,
                pending,
                emitted,
                False,
                *nothing,
                _SCRATCH.pcm[:0],
                False,
                _NOTHING,
                _NOTHING,
            )
        else:
            # The last block may be partly complete: its other outputs read stale buffer past
            # ``fill`` and are dropped (they are computed again once their inputs are in).
            per_block = f.block_outputs
            blocks = (total - 1) // per_block + 1
            scratch = self._scratch(blocks, f)
            windows = scratch[: blocks * f.window].reshape(blocks, f.window)
            products = _SCRATCH.outputs[: blocks * per_block].reshape(blocks, per_block)
            # Drop the blocks that are complete; keep the one partly output.
            done = total // per_block
            shift = done * f.block_inputs
            keep = history + pending - shift
            plan = _Plan(
                scratch,
                inputs,
                pending - shift,
                total - done * per_block,
                True,
                self._blocks[:blocks],
                windows,
                products,
                products.reshape(-1)[emitted:total],
                _SCRATCH.pcm[: total - emitted],
                done > 0,
                self._buffer[:keep],
                self._buffer[shift : shift + keep],
            )
        if len(self._plans) >= _PLANS_KEPT or any(
            kept.scratch is not scratch for kept in self._plans.values()
        ):
            self._plans.clear()
        self._plans[(n, self._pending, emitted)] = plan
        return plan

    @staticmethod
    def _scratch(blocks: int, f: PolyphaseFilter) -> npt.NDArray[np.float32]:
        """The thread's scratch, grown (for a whole piece of this filter) if too small."""
        s = _SCRATCH
        if len(s.windows) < blocks * f.window or len(s.outputs) < blocks * f.block_outputs:
            most = (_PIECE + 3 * f.block_inputs) // f.block_inputs + 2
            s.windows = np.empty(max(len(s.windows), most * f.window), dtype=_FLOAT)
            s.outputs = np.empty(max(len(s.outputs), most * f.block_outputs), dtype=_FLOAT)
            s.pcm = np.empty(max(len(s.pcm), most * f.block_outputs), dtype=_PCM16)
        return s.windows

    def flush(self) -> bytes:
        """End the stream: return what is left of it (nothing, as nothing is held back), then
        reset for a new stream.

        After ``flush`` the instance is ready for an unrelated stream (for example the next
        response), with no history from the previous one: exactly as if freshly created.
        """
        self.reset()
        return b""

    def reset(self) -> None:
        """Drop the filter history (barge-in, cancelled response): the next chunk starts a new
        stream, as from a fresh instance."""
        if self._filter is not None:
            self._buffer[: self._filter.phase_taps - 1] = 0.0
            self._pending = 0
            self._emitted = 0  # the plans stay: they depend on the state, not on the samples

    def __repr__(self) -> str:
        return (
            f"StreamResampler(in_rate={self.in_rate}, out_rate={self.out_rate}, "
            f"quality={self.quality!r})"
        )


def design_resamplers(rates: Iterable[int], quality: ResampleQuality = DEFAULT_QUALITY) -> None:
    """Design the filter of every pair of ``rates`` now (each is cached for the process), so
    that no session's start pays for one while other sessions wait on the event loop."""
    chosen = sorted(set(rates))
    for in_rate in chosen:
        for out_rate in chosen:
            if in_rate != out_rate:
                design(in_rate, out_rate, quality)
