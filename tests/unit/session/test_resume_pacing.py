"""How fast moved sessions come back: the drain's spread of ``retry_after_ms`` and a node's gate
of resumes per second. Pure policies; time is given, nothing sleeps."""

from __future__ import annotations

import pytest

from gateway.config import Settings
from gateway.session.resume_pacing import (
    Admitted,
    Deferred,
    MoveSpread,
    ResumeDecision,
    ResumeGate,
)


def wait_of(decision: ResumeDecision) -> float:
    assert isinstance(decision, Admitted), decision
    return decision.wait_s


def retry_of(decision: ResumeDecision) -> float:
    assert isinstance(decision, Deferred), decision
    return decision.retry_after_s


# -- MoveSpread: the draining node ---------------------------------------------------------------


def test_sessions_moving_together_get_distinct_waits_one_spacing_apart() -> None:
    spread = MoveSpread.plan(5, per_session_ms=40, max_window_ms=4000, now=100.0)
    assert [spread.retry_after_ms(100.0) for _ in range(5)] == [0, 40, 80, 120, 160]


def test_the_window_grows_with_the_sessions_up_to_its_maximum() -> None:
    few = MoveSpread.plan(10, per_session_ms=40, max_window_ms=4000, now=0.0)
    many = MoveSpread.plan(1000, per_session_ms=40, max_window_ms=4000, now=0.0)
    few_waits = [few.retry_after_ms(0.0) for _ in range(10)]
    many_waits = [many.retry_after_ms(0.0) for _ in range(1000)]
    assert few_waits[-1] == 360  # 10 × 40 ms
    assert many_waits[-1] == 3996  # 1000 × 4 ms: the whole within 4 s
    assert len(set(many_waits)) == 1000
    assert many_waits == sorted(many_waits)


def test_a_session_that_moves_after_its_slot_resumes_at_once_and_keeps_the_rest_spaced() -> None:
    spread = MoveSpread.plan(4, per_session_ms=100, max_window_ms=4000, now=0.0)
    assert spread.retry_after_ms(0.0) == 0
    # The others were mid-reply; the next one moves 0.5 s later, past its slot at 0.1 s.
    assert spread.retry_after_ms(0.5) == 0
    assert spread.retry_after_ms(0.5) == 100  # still one spacing after the previous one
    assert spread.retry_after_ms(0.55) == 150
    assert spread.last_resume_at == pytest.approx(0.7)


def test_a_zero_spread_sends_everyone_at_once() -> None:
    spread = MoveSpread.plan(3, per_session_ms=0, max_window_ms=4000, now=5.0)
    assert [spread.retry_after_ms(5.0) for _ in range(3)] == [0, 0, 0]
    nobody = MoveSpread.plan(0, per_session_ms=40, max_window_ms=4000, now=5.0)
    assert nobody.retry_after_ms(6.0) == 0


# -- ResumeGate: every node ----------------------------------------------------------------------


def test_a_burst_goes_in_at_once_then_resumes_wait_their_turn_in_order() -> None:
    gate = ResumeGate(rate_per_s=10.0, burst=3, max_wait_s=1.0)
    waits = [wait_of(gate.reserve(50.0)) for _ in range(6)]
    assert waits == pytest.approx([0.0, 0.0, 0.0, 0.1, 0.2, 0.3])


def test_a_resume_whose_turn_is_too_far_is_deferred_and_spends_nothing() -> None:
    gate = ResumeGate(rate_per_s=10.0, burst=1, max_wait_s=0.25)
    assert gate.reserve(0.0) == Admitted(0.0)
    assert wait_of(gate.reserve(0.0)) == pytest.approx(0.1)
    assert wait_of(gate.reserve(0.0)) == pytest.approx(0.2)
    # Its turn would be at 0.3 s: 0.05 s past the longest wait.
    assert retry_of(gate.reserve(0.0)) == pytest.approx(0.05)
    assert retry_of(gate.reserve(0.0)) == pytest.approx(0.05)  # the refusal took no token
    # Asked again when it was told to: it is admitted, with the longest wait.
    assert wait_of(gate.reserve(0.05)) == pytest.approx(0.25)


def test_idle_time_refills_only_up_to_the_burst() -> None:
    gate = ResumeGate(rate_per_s=5.0, burst=2, max_wait_s=0.0)
    assert gate.reserve(0.0) == Admitted(0.0)
    later = [gate.reserve(3600.0) for _ in range(3)]
    assert later[:2] == [Admitted(0.0), Admitted(0.0)]
    assert retry_of(later[2]) == pytest.approx(0.2)


def test_the_admitted_rate_over_time_is_the_configured_one() -> None:
    gate = ResumeGate(rate_per_s=20.0, burst=5, max_wait_s=2.0)
    admitted_at = []
    now = 0.0
    for _ in range(200):  # a resume every 10 ms: twice the rate
        decision = gate.reserve(now)
        if isinstance(decision, Admitted):
            admitted_at.append(now + decision.wait_s)
        now += 0.01
    # Over the two seconds: the burst, then 20 a second (the rest were deferred).
    assert len([t for t in admitted_at if t <= 2.0]) == pytest.approx(5 + 40, abs=1)
    assert admitted_at == sorted(admitted_at)  # turns are kept in the order of arrival


def test_a_rate_of_zero_admits_everything_at_once() -> None:
    gate = ResumeGate(rate_per_s=0.0, burst=1, max_wait_s=0.0)
    assert [gate.reserve(0.0) for _ in range(100)] == [Admitted(0.0)] * 100


# -- the settings --------------------------------------------------------------------------------


def test_by_default_one_drain_s_spread_stays_within_a_node_s_rate() -> None:
    settings = Settings(auth="none")
    assert settings.drain_spread_per_session_ms / 1000 >= 1 / settings.resumes_per_s
    assert settings.drain_spread_max_ms / 1000 < settings.resume_window_s
