"""``ResponseEnds``: a response's ``response.done`` is held while a tool batch of it runs, and
goes once the last of its batches has told the client all it will. Pure, no event loop: a
batch is named by a string here (the session names it by its task)."""

from __future__ import annotations

from gateway.session.tool_batch import ResponseEnds
from transports.events import ResponseDone

Ends = ResponseEnds[str, str]


def test_an_end_with_no_batch_running_is_not_held() -> None:
    ends: Ends = ResponseEnds()
    assert not ends.hold(ResponseDone("r1", "completed"), "send-r1")
    assert not ends.holding("r1")


def test_an_end_is_held_until_its_batch_reported_and_released_once() -> None:
    ends: Ends = ResponseEnds()
    ends.started("r1", "batch-a")
    done = ResponseDone("r1", "completed")
    assert ends.hold(done, "send-r1")
    assert ends.holding("r1")
    assert ends.reported("r1", "batch-a") == (done, "send-r1")
    assert not ends.holding("r1")
    assert ends.reported("r1", "batch-a") is None  # said twice (early, then when it ends)


def test_an_end_waits_for_every_batch_of_its_response() -> None:
    ends: Ends = ResponseEnds()
    ends.started("r1", "round-1")
    ends.started("r1", "round-2")  # a chat response runs one batch per round
    done = ResponseDone("r1", "completed")
    ends.hold(done, "send-r1")
    assert ends.reported("r1", "round-2") is None  # a later batch may report first
    assert ends.holding("r1")
    assert ends.reported("r1", "round-1") == (done, "send-r1")


def test_a_batch_that_reported_before_the_end_came_lets_the_end_go_at_once() -> None:
    ends: Ends = ResponseEnds()
    ends.started("r1", "batch-a")
    assert ends.reported("r1", "batch-a") is None  # nothing held yet
    assert not ends.hold(ResponseDone("r1", "completed"), "send-r1")


def test_another_response_s_batch_releases_nothing() -> None:
    ends: Ends = ResponseEnds()
    ends.started("r1", "batch-a")
    ends.started("r2", "batch-b")
    ends.hold(ResponseDone("r1", "completed"), "send-r1")
    assert ends.reported("r1", "batch-b") is None
    assert ends.reported("r2", "batch-b") is None
    assert ends.holding("r1")


def test_only_a_cancelled_response_s_batches_hold_up_the_next_response() -> None:
    ends: Ends = ResponseEnds()
    ends.started("cancelled", "batch-a")
    ends.started("cancelled", "batch-b")
    ends.started("completed", "batch-c")
    ends.started("not_ended", "batch-d")
    ends.hold(ResponseDone("cancelled", "cancelled"), "send-cancelled")
    ends.hold(ResponseDone("completed", "completed"), "send-completed")
    assert sorted(ends.cancelled_batches()) == ["batch-a", "batch-b"]
    ends.reported("cancelled", "batch-a")
    assert ends.cancelled_batches() == ["batch-b"]
    ends.reported("cancelled", "batch-b")
    assert ends.cancelled_batches() == []
