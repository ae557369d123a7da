"""SequenceReorder: frames released in order as soon as they can be, a gap given up on after
``hold`` frames wait behind it, late and duplicate frames dropped."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.edges.phone.reorder import SequenceReorder


def frame(n: int) -> bytes:
    return n.to_bytes(2, "big")


def test_in_order_frames_pass_at_once_after_the_first_two() -> None:
    reorder = SequenceReorder()
    released = [reorder.push(n, frame(n)) for n in (7, 8, 9, 10)]
    assert released == [[], [frame(7), frame(8)], [frame(9)], [frame(10)]]


def test_the_first_frame_may_be_the_late_one() -> None:
    reorder = SequenceReorder()
    assert reorder.push(8, frame(8)) == []
    assert reorder.push(7, frame(7)) == [frame(7), frame(8)]
    assert reorder.dropped == 0


def test_a_frame_that_came_early_waits_for_the_one_before_it() -> None:
    reorder = SequenceReorder()
    reorder.push(0, frame(0))
    assert reorder.push(1, frame(1)) == [frame(0), frame(1)]
    assert reorder.push(3, frame(3)) == []
    assert reorder.push(2, frame(2)) == [frame(2), frame(3)]


def test_a_missing_frame_is_given_up_once_hold_frames_wait_behind_it() -> None:
    reorder = SequenceReorder(hold=3)
    reorder.push(0, frame(0))
    reorder.push(1, frame(1))
    assert reorder.push(3, frame(3)) == []
    assert reorder.push(4, frame(4)) == []
    assert reorder.push(5, frame(5)) == [frame(3), frame(4), frame(5)]
    assert reorder.skipped == 1
    assert reorder.push(2, frame(2)) == []  # too late now: it would play out of place
    assert reorder.dropped == 1


def test_duplicates_are_dropped() -> None:
    reorder = SequenceReorder()
    reorder.push(0, frame(0))
    reorder.push(1, frame(1))
    reorder.push(3, frame(3))
    assert reorder.push(3, frame(3)) == []
    assert reorder.push(1, frame(1)) == []
    assert reorder.dropped == 2


def test_flush_releases_what_waits_in_order() -> None:
    reorder = SequenceReorder(hold=5)
    reorder.push(0, frame(0))
    reorder.push(1, frame(1))
    reorder.push(4, frame(4))
    reorder.push(3, frame(3))
    assert reorder.flush() == [frame(3), frame(4)]
    assert reorder.push(5, frame(5)) == [frame(5)]


def test_hold_must_be_positive() -> None:
    with pytest.raises(ValueError, match="hold"):
        SequenceReorder(hold=0)


@given(st.data())
def test_neighbours_swapped_within_the_hold_come_out_in_order(data: st.DataObject) -> None:
    """Frames shuffled by at most one place (Telnyx's network reorders neighbours) lose
    nothing and come out in their order."""
    count = data.draw(st.integers(min_value=1, max_value=60))
    order = list(range(count))
    for index in range(count - 1):
        if data.draw(st.booleans()) and order[index] == index:
            order[index], order[index + 1] = order[index + 1], order[index]
    reorder = SequenceReorder(hold=3)
    out: list[bytes] = []
    for n in order:
        out += reorder.push(n, frame(n))
    out += reorder.flush()
    assert out == [frame(n) for n in range(count)]
    assert (reorder.skipped, reorder.dropped) == (0, 0)
