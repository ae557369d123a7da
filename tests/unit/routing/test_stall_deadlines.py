"""When an upstream counts as stalled (``StallWatch``): a first output owed once the user's turn
ends, a gap allowed between outputs while a response is producing; times are passed in."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.routing.stall import StallWatch

T0 = 1_767_225_600.0  # 2026-01-01, as unix seconds
FIRST, GAP = 8.0, 15.0


def watch() -> StallWatch:
    return StallWatch(first_output_s=FIRST, gap_s=GAP)


def before(t: float) -> float:
    return math.nextafter(t, -math.inf)


def test_a_new_watch_owes_nothing() -> None:
    w = watch()
    assert w.deadline is None
    assert w.stalled(T0) is None
    assert w.stalled(T0 + 10_000) is None


def test_a_turn_that_ended_owes_a_first_output() -> None:
    w = watch()
    w.turn_ended(T0)
    assert w.deadline == T0 + FIRST
    assert w.stalled(T0) is None
    assert w.stalled(before(T0 + FIRST)) is None
    assert w.stalled(T0 + FIRST) == "stall_first_output"
    assert w.stalled(T0 + FIRST + 100) == "stall_first_output"


def test_asking_does_not_change_the_state() -> None:
    w = watch()
    w.turn_ended(T0)
    assert w.stalled(T0 + 100) == "stall_first_output"
    assert w.stalled(T0 + 100) == "stall_first_output"
    assert w.deadline == T0 + FIRST


def test_a_second_turn_end_keeps_the_first_deadline() -> None:
    w = watch()
    w.turn_ended(T0)
    w.turn_ended(T0 + 5)
    assert w.deadline == T0 + FIRST
    assert w.stalled(T0 + FIRST) == "stall_first_output"


def test_output_clears_the_first_output_deadline_and_starts_the_gap() -> None:
    w = watch()
    w.turn_ended(T0)
    w.output(T0 + 2)
    assert w.deadline == T0 + 2 + GAP
    assert w.stalled(T0 + FIRST) is None  # the first output came in time
    assert w.stalled(before(T0 + 2 + GAP)) is None
    assert w.stalled(T0 + 2 + GAP) == "stall_mid_response"


def test_each_output_pushes_the_gap_deadline() -> None:
    w = watch()
    w.turn_ended(T0)
    for i in range(1, 6):
        w.output(T0 + 10 * i)
        assert w.deadline == T0 + 10 * i + GAP
        assert w.stalled(T0 + 10 * i + GAP - 1) is None
    assert w.stalled(T0 + 50 + GAP) == "stall_mid_response"


def test_output_without_a_turn_end_starts_the_gap() -> None:
    w = watch()
    w.output(T0)
    assert w.deadline == T0 + GAP
    assert w.stalled(T0 + GAP) == "stall_mid_response"


def test_a_late_first_output_still_clears_the_first_output_stall() -> None:
    w = watch()
    w.turn_ended(T0)
    assert w.stalled(T0 + 20) == "stall_first_output"
    w.output(T0 + 20)
    assert w.stalled(T0 + 20) is None
    assert w.deadline == T0 + 20 + GAP


def test_a_turn_end_while_producing_does_not_arm_the_first_output() -> None:
    w = watch()
    w.turn_ended(T0)
    w.output(T0 + 1)
    w.turn_ended(T0 + 2)  # e.g. tool results given back while the response goes on
    assert w.owed_since is None
    assert w.deadline == T0 + 1 + GAP
    assert w.stalled(T0 + 2 + FIRST) is None
    assert w.stalled(T0 + 1 + GAP) == "stall_mid_response"


@pytest.mark.parametrize("end", ["response_done", "quiet"])
def test_the_end_of_a_response_or_quiet_clears_everything(end: str) -> None:
    producing = watch()
    producing.turn_ended(T0)
    producing.output(T0 + 1)
    owing = watch()
    owing.turn_ended(T0)
    for w in (producing, owing):
        getattr(w, end)()
        assert w.deadline is None
        assert w.owed_since is None
        assert w.last_output is None
        assert w.stalled(T0 + 10_000) is None


def test_after_a_response_the_next_turn_owes_a_first_output_again() -> None:
    w = watch()
    w.turn_ended(T0)
    w.output(T0 + 1)
    w.response_done()
    w.turn_ended(T0 + 30)
    assert w.deadline == T0 + 30 + FIRST
    assert w.stalled(before(T0 + 30 + FIRST)) is None
    assert w.stalled(T0 + 30 + FIRST) == "stall_first_output"


def test_quiet_then_a_turn_end_owes_from_the_new_turn() -> None:
    w = watch()
    w.turn_ended(T0)
    w.quiet()  # the user talks again
    w.turn_ended(T0 + 20)
    assert w.deadline == T0 + 20 + FIRST
    assert w.stalled(T0 + FIRST) is None


def test_the_two_durations_are_independent() -> None:
    w = StallWatch(first_output_s=30.0, gap_s=1.0)
    w.turn_ended(T0)
    assert w.stalled(T0 + 29) is None
    w.output(T0 + 29)
    assert w.stalled(T0 + 30) == "stall_mid_response"


# -- any sequence ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Step:
    op: str  # turn_ended | output | response_done | quiet
    delay: float  # seconds after the previous step


STEPS = st.builds(
    Step,
    op=st.sampled_from(["turn_ended", "output", "response_done", "quiet"]),
    delay=st.floats(min_value=0, max_value=60, allow_nan=False, allow_infinity=False),
)
DURATION = st.floats(min_value=0, max_value=120, allow_nan=False, allow_infinity=False)
PROBE = st.floats(min_value=0, max_value=200, allow_nan=False, allow_infinity=False)


def check(w: StallWatch, now: float) -> None:
    deadline = w.deadline
    verdict = w.stalled(now)
    assert (verdict is not None) == (deadline is not None and now >= deadline)
    if verdict == "stall_first_output":
        assert w.owed_since is not None
    if verdict == "stall_mid_response":
        assert w.last_output is not None
        assert w.owed_since is None


@given(st.lists(STEPS, max_size=30), DURATION, DURATION, st.lists(PROBE, max_size=4))
def test_stalled_iff_a_deadline_has_come(
    steps: list[Step], first: float, gap: float, probes: list[float]
) -> None:
    w = StallWatch(first_output_s=first, gap_s=gap)
    now = T0
    for step in steps:
        now += step.delay
        if step.op in ("turn_ended", "output"):
            getattr(w, step.op)(now)
        else:
            getattr(w, step.op)()
        # A first output is never owed while a response is producing.
        assert w.owed_since is None or w.last_output is None
        check(w, now)
        for probe in probes:
            check(w, now + probe)
        if w.deadline is not None:
            check(w, w.deadline)
            check(w, before(w.deadline))
            check(w, math.nextafter(w.deadline, math.inf))
