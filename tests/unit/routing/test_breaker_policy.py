"""The breaker's rules as pure functions: times passed in, no event loop, no clock read."""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.routing.breaker import (
    CLOSED,
    Admission,
    AdmissionKind,
    BreakerPhase,
    BreakerPolicy,
    BreakerState,
    admit,
    failure,
    success,
    view,
)

T0 = 1_767_225_600.0  # 2026-01-01, as unix seconds
POLICY = BreakerPolicy(failures=3, window_s=30.0, cooldown_s=30.0, half_open_probes=2)


def fail_times(state: BreakerState, *times: float, policy: BreakerPolicy = POLICY) -> BreakerState:
    for t in times:
        state = failure(state, policy, t)
    return state


def opened_at(t: float) -> BreakerState:
    state = fail_times(CLOSED, t - 2, t - 1, t)
    assert state.phase(t) is BreakerPhase.OPEN
    return state


# -- the policy --------------------------------------------------------------------------------


def test_the_defaults() -> None:
    assert BreakerPolicy() == POLICY
    assert POLICY.forget_after_s == 90.0


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("failures", 0, "BreakerPolicy.failures must be at least 1, not 0"),
        ("failures", 2.5, "BreakerPolicy.failures must be a whole number, not 2.5"),
        ("failures", True, "BreakerPolicy.failures must be a whole number, not True"),
        ("half_open_probes", 0, "BreakerPolicy.half_open_probes must be at least 1"),
        ("half_open_probes", "2", "BreakerPolicy.half_open_probes must be a whole number"),
        ("window_s", 0, "BreakerPolicy.window_s must be a finite number of seconds above 0"),
        ("window_s", -1.0, "BreakerPolicy.window_s must be a finite number of seconds above 0"),
        ("cooldown_s", math.inf, "BreakerPolicy.cooldown_s must be a finite number of seconds"),
        ("cooldown_s", math.nan, "BreakerPolicy.cooldown_s must be a finite number of seconds"),
        ("cooldown_s", "30", "BreakerPolicy.cooldown_s must be a number of seconds, not '30'"),
    ],
)
def test_a_policy_that_cannot_hold_says_which_field(field: str, value: object, said: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(said)):
        BreakerPolicy(**{field: value})  # type: ignore[arg-type]


# -- closed ------------------------------------------------------------------------------------


def test_closed_admits_and_changes_nothing() -> None:
    admission, state = admit(CLOSED, POLICY, T0)
    assert admission == Admission(AdmissionKind.ALLOWED)
    assert admission.allowed
    assert not admission.probe
    assert state == CLOSED


def test_failures_within_the_window_open_it_for_the_cooldown() -> None:
    state = fail_times(CLOSED, T0, T0 + 10)
    assert state.phase(T0 + 10) is BreakerPhase.CLOSED
    assert admit(state, POLICY, T0 + 10)[0].allowed
    state = failure(state, POLICY, T0 + 20)
    assert state.phase(T0 + 20) is BreakerPhase.OPEN
    assert state.open_until == T0 + 50
    assert state.failures == ()
    admission, same = admit(state, POLICY, T0 + 29)
    assert admission == Admission.refused(21.0)
    assert not admission.allowed
    assert same == state


def test_failures_older_than_the_window_do_not_count() -> None:
    # Exactly window_s old is out: a failure counts while it is less than window_s old.
    state = fail_times(CLOSED, T0, T0 + 10, T0 + 30, T0 + 40)
    assert state.phase(T0 + 40) is BreakerPhase.CLOSED
    assert state.failures == (T0 + 30, T0 + 40)
    assert view(state, POLICY, T0 + 65).recent_failures == 1
    assert failure(state, POLICY, T0 + 41).phase(T0 + 41) is BreakerPhase.OPEN


def test_a_success_while_closed_keeps_the_recent_failures() -> None:
    # An upstream failing two calls in three must still open the breaker.
    state = fail_times(CLOSED, T0, T0 + 1)
    state = success(state, POLICY, T0 + 2)
    assert state.failures == (T0, T0 + 1)
    state = failure(state, POLICY, T0 + 3)
    assert state.phase(T0 + 3) is BreakerPhase.OPEN


def test_one_failure_opens_a_policy_of_one() -> None:
    policy = BreakerPolicy(failures=1)
    assert failure(CLOSED, policy, T0).phase(T0) is BreakerPhase.OPEN


# -- open --------------------------------------------------------------------------------------


def test_reports_while_open_are_ignored() -> None:
    state = opened_at(T0)
    assert failure(state, POLICY, T0 + 5) == state  # admitted before it opened
    assert success(state, POLICY, T0 + 5) == state


# -- half-open ---------------------------------------------------------------------------------


def test_after_the_cooldown_only_the_probes_are_admitted() -> None:
    state = opened_at(T0)
    assert state.phase(T0 + 30) is BreakerPhase.HALF_OPEN
    first, state = admit(state, POLICY, T0 + 30)
    second, state = admit(state, POLICY, T0 + 31)
    third, state = admit(state, POLICY, T0 + 32)
    assert (first.kind, second.kind) == (AdmissionKind.PROBE, AdmissionKind.PROBE)
    assert first.allowed
    assert first.probe
    # Refused until fresh probes would be handed out: a cool-down after the period began.
    assert third == Admission.refused(28.0)
    assert state.probes_taken == 2


def test_a_success_in_half_open_closes_it_and_forgets_the_failures() -> None:
    state = opened_at(T0)
    _, state = admit(state, POLICY, T0 + 30)
    state = success(state, POLICY, T0 + 31)
    assert state == CLOSED
    assert state.phase(T0 + 31) is BreakerPhase.CLOSED
    assert fail_times(state, T0 + 32, T0 + 33).phase(T0 + 33) is BreakerPhase.CLOSED


def test_a_failure_in_half_open_reopens_at_once() -> None:
    state = opened_at(T0)
    _, state = admit(state, POLICY, T0 + 30)
    state = failure(state, POLICY, T0 + 31)
    assert state.phase(T0 + 31) is BreakerPhase.OPEN
    assert state.open_until == T0 + 61
    assert state.probes_taken == 0
    assert not admit(state, POLICY, T0 + 60)[0].allowed
    assert admit(state, POLICY, T0 + 61)[0].probe


def test_probes_that_never_report_are_replaced_after_a_cooldown() -> None:
    # Their node died holding them: the breaker must not refuse for ever.
    state = opened_at(T0)
    for t in (T0 + 30, T0 + 31):
        _, state = admit(state, POLICY, t)
    assert not admit(state, POLICY, T0 + 59.5)[0].allowed
    admission, state = admit(state, POLICY, T0 + 60)
    assert admission.probe
    assert (state.open_until, state.probes_taken) == (T0 + 60, 1)
    second, state = admit(state, POLICY, T0 + 61)
    assert second.probe
    assert admit(state, POLICY, T0 + 62)[0] == Admission.refused(28.0)


# -- lapse -------------------------------------------------------------------------------------


def test_a_record_left_alone_lapses_into_a_fresh_closed_breaker() -> None:
    state = opened_at(T0)
    assert state.expires_at == T0 + POLICY.forget_after_s
    # Half-open and idle: still a probe just before the lapse...
    assert admit(state, POLICY, T0 + 89.9)[0].probe
    # ...and a fresh breaker from it on.
    admission, after = admit(state, POLICY, T0 + 90)
    assert admission.kind is AdmissionKind.ALLOWED
    assert after == CLOSED
    assert state.phase(T0 + 90) is BreakerPhase.CLOSED


def test_the_view_shows_what_an_operator_needs() -> None:
    state = fail_times(CLOSED, T0)
    shown = view(state, POLICY, T0 + 1)
    assert (shown.phase, shown.recent_failures, shown.open_until, shown.retry_after_s) == (
        BreakerPhase.CLOSED,
        1,
        None,
        None,
    )
    shown = view(opened_at(T0), POLICY, T0 + 10)
    assert (shown.phase, shown.retry_after_s) == (BreakerPhase.OPEN, 20.0)
    assert view(opened_at(T0), POLICY, T0 + 30).phase is BreakerPhase.HALF_OPEN


# -- properties --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    op: str  # admit, failure or success
    after_s: float


policies = st.builds(
    BreakerPolicy,
    failures=st.integers(1, 4),
    window_s=st.sampled_from([1.0, 5.0, 30.0]),
    cooldown_s=st.sampled_from([0.5, 5.0, 30.0]),
    half_open_probes=st.integers(1, 3),
)
steps = st.lists(
    st.builds(
        Step,
        op=st.sampled_from(["admit", "admit", "failure", "success"]),
        after_s=st.sampled_from([0.0, 0.001, 0.25, 1.0, 4.9, 10.0, 29.999, 30.0, 31.0, 200.0])
        | st.floats(0, 100, allow_nan=False),
    ),
    max_size=80,
)


@settings(max_examples=400, deadline=None)
@given(policy=policies, sequence=steps)
def test_no_sequence_admits_more_probes_than_allowed_or_anything_while_open(
    policy: BreakerPolicy, sequence: list[Step]
) -> None:
    state, now = CLOSED, T0
    probes_by_period: Counter[float] = Counter()
    refuse_until = -math.inf  # the end of the last cool-down the test saw start
    periods_seen: list[float] = []
    for step in sequence:
        now += step.after_s
        if step.op == "admit":
            admission, state = admit(state, policy, now)
            if now < refuse_until:
                assert not admission.allowed, "admitted while open"
            if admission.probe:
                assert state.open_until is not None
                probes_by_period[state.open_until] += 1
                assert probes_by_period[state.open_until] <= policy.half_open_probes
                if not periods_seen or periods_seen[-1] != state.open_until:
                    assert not periods_seen or state.open_until > periods_seen[-1]
                    periods_seen.append(state.open_until)
            if not admission.allowed:
                assert admission.retry_after_s is not None
                assert admission.retry_after_s > 0
        elif step.op == "failure":
            before = state.phase(now)
            state = failure(state, policy, now)
            if before is not BreakerPhase.OPEN and state.phase(now) is BreakerPhase.OPEN:
                assert state.open_until == now + policy.cooldown_s
                refuse_until = state.open_until
        else:
            state = success(state, policy, now)
        # A closed record never holds as many failures as open it.
        assert state.open_until is not None or len(state.failures) < policy.failures
