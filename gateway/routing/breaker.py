"""The circuit breaker of one upstream target, as pure functions of a state, a policy and the
time (unix seconds, passed in: no clock is read here, no I/O, no event loop).

Phases, read from the state at a time ``now`` (``BreakerState.phase``):

    closed      every session is admitted; failures are remembered for ``window_s``, and
                ``failures`` of them within that window open the breaker
    open        until ``open_until``: every session is refused, with the seconds left
    half_open   from ``open_until``: ``half_open_probes`` sessions are admitted as probes; a
                success closes the breaker (its failures forgotten), a failure opens it again
                at once for another ``cooldown_s``

Choices, each for a reason:

- A success while closed does not erase recent failures: an upstream failing two calls in three
  must still open the breaker (a reset on every success never would). Failures age out of the
  window instead.
- A failure or a success while open is ignored: it comes from a session admitted before the
  breaker opened, and says nothing of the upstream after it.
- Probes that never report (their node died) would leave the breaker half-open and refusing
  for ever: once every probe is out and ``cooldown_s`` has passed since the half-open period
  began, a new period starts with fresh probes.
- A record nobody changed for ``policy.forget_after_s`` lapses (it reads as a fresh closed
  breaker): a shared store can then expire idle targets without changing any answer. The
  lapse is timed on the caller's clock (``expires_at``), so every implementation agrees.

Every comparison is a stored time against ``now`` shifted by a policy constant (``now -
window_s``, ``now - cooldown_s``), so the Redis script, given those numbers by the caller,
compares exactly the same floats as these functions.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, replace

__all__ = [
    "ALLOWED",
    "CLOSED",
    "PROBE",
    "Admission",
    "AdmissionKind",
    "BreakerPhase",
    "BreakerPolicy",
    "BreakerState",
    "BreakerView",
    "admit",
    "failure",
    "success",
    "view",
]


@dataclass(frozen=True, slots=True)
class BreakerPolicy:
    """``failures`` failures within ``window_s`` seconds open the breaker for ``cooldown_s``;
    then ``half_open_probes`` sessions may try the target."""

    failures: int = 3
    window_s: float = 30.0
    cooldown_s: float = 30.0
    half_open_probes: int = 2

    def __post_init__(self) -> None:
        _check_count("failures", self.failures)
        _check_seconds("window_s", self.window_s)
        _check_seconds("cooldown_s", self.cooldown_s)
        _check_count("half_open_probes", self.half_open_probes)

    @property
    def forget_after_s(self) -> float:
        """How long a record nobody changed lives. Longer than the window (its failures are
        gone by then) and than a cool-down plus a probe period (an open breaker is never
        forgotten while it refuses)."""
        return self.window_s + 2 * self.cooldown_s


def _check_count(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"BreakerPolicy.{name} must be a whole number, not {value!r}")
    if value < 1:
        raise ValueError(f"BreakerPolicy.{name} must be at least 1, not {value}")


def _check_seconds(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"BreakerPolicy.{name} must be a number of seconds, not {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"BreakerPolicy.{name} must be a finite number of seconds above 0")


class BreakerPhase(enum.Enum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True, slots=True)
class BreakerState:
    """One target's record. ``failures``: unix times of the failures still counted (closed
    only); ``open_until``: the end of the cool-down, then the start of the current half-open
    period (None while closed); ``probes_taken``: probes admitted in that period;
    ``expires_at``: when the record lapses if nothing changes it (None: the fresh record)."""

    failures: tuple[float, ...] = ()
    open_until: float | None = None
    probes_taken: int = 0
    expires_at: float | None = None

    def phase(self, now: float) -> BreakerPhase:
        live = _live(self, now)
        if live.open_until is None:
            return BreakerPhase.CLOSED
        return BreakerPhase.OPEN if now < live.open_until else BreakerPhase.HALF_OPEN


CLOSED = BreakerState()


class AdmissionKind(enum.Enum):
    ALLOWED = "allowed"
    PROBE = "probe"
    REFUSED = "refused"


@dataclass(frozen=True, slots=True)
class Admission:
    """The breaker's answer for one session. ``retry_after_s`` (refused only): when to try
    again — the end of the cool-down, or when fresh probes would be handed out."""

    kind: AdmissionKind
    retry_after_s: float | None = None

    @property
    def allowed(self) -> bool:
        return self.kind is not AdmissionKind.REFUSED

    @property
    def probe(self) -> bool:
        return self.kind is AdmissionKind.PROBE

    @classmethod
    def refused(cls, retry_after_s: float) -> Admission:
        return cls(AdmissionKind.REFUSED, retry_after_s)


ALLOWED = Admission(AdmissionKind.ALLOWED)
PROBE = Admission(AdmissionKind.PROBE)


@dataclass(frozen=True, slots=True)
class BreakerView:
    """What metrics and the admin API show of a target at a time."""

    phase: BreakerPhase
    recent_failures: int
    open_until: float | None
    probes_taken: int
    retry_after_s: float | None


def _live(state: BreakerState, now: float) -> BreakerState:
    if state.expires_at is not None and now >= state.expires_at:
        return CLOSED
    return state


def _opened(policy: BreakerPolicy, now: float) -> BreakerState:
    return BreakerState(open_until=now + policy.cooldown_s, expires_at=now + policy.forget_after_s)


def admit(state: BreakerState, policy: BreakerPolicy, now: float) -> tuple[Admission, BreakerState]:
    state = _live(state, now)
    if state.open_until is None:
        return ALLOWED, state
    if now < state.open_until:
        return Admission.refused(state.open_until - now), state
    expires_at = now + policy.forget_after_s
    if state.probes_taken < policy.half_open_probes:
        return PROBE, replace(state, probes_taken=state.probes_taken + 1, expires_at=expires_at)
    if state.open_until <= now - policy.cooldown_s:
        # Every probe is out and none reported for a cool-down: a new half-open period.
        return PROBE, replace(state, open_until=now, probes_taken=1, expires_at=expires_at)
    return Admission.refused(state.open_until + policy.cooldown_s - now), state


def failure(state: BreakerState, policy: BreakerPolicy, now: float) -> BreakerState:
    state = _live(state, now)
    if state.open_until is not None:
        if now < state.open_until:
            return state  # a session admitted before it opened: already open
        return _opened(policy, now)  # a probe failed: open again at once
    floor = now - policy.window_s
    recent = (*(t for t in state.failures if t > floor), now)
    if len(recent) >= policy.failures:
        return _opened(policy, now)
    return BreakerState(failures=recent, expires_at=now + policy.forget_after_s)


def success(state: BreakerState, policy: BreakerPolicy, now: float) -> BreakerState:
    state = _live(state, now)
    if state.open_until is not None and now >= state.open_until:
        return CLOSED  # half-open: the target answers again
    return state


def view(state: BreakerState, policy: BreakerPolicy, now: float) -> BreakerView:
    state = _live(state, now)
    floor = now - policy.window_s
    phase = state.phase(now)
    retry_after_s: float | None = None
    if phase is BreakerPhase.OPEN:
        assert state.open_until is not None
        retry_after_s = state.open_until - now
    return BreakerView(
        phase=phase,
        recent_failures=sum(1 for t in state.failures if t > floor),
        open_until=state.open_until,
        probes_taken=state.probes_taken,
        retry_after_s=retry_after_s,
    )
