"""A resource window too short to mean anything is shown, not judged: a one-minute run's node
whose open files grew 10.3 % in 30-odd seconds around a Redis restart is not a leak, while the
same growth over minutes is. Pure: made-up samples in, rows and violations out."""

from __future__ import annotations

from soak.monitor import ResourceSample
from soak.resources import JUDGED_MIN_SPAN_S, growth_rows


def node_b(until_s: int, every_s: int, step_at: float) -> list[ResourceSample]:
    """Steady memory; open files 100, then 111 (+11 %) from ``step_at`` on."""
    return [
        ResourceSample(float(t), "node-b", 7, 100_000, 100 if t < step_at else 111, 0.0)
        for t in range(0, until_s + 1, every_s)
    ]


def test_a_window_too_short_is_measured_and_shown_but_not_judged() -> None:
    # The one-minute run: samples every 5 s, the window from 24 s to the load's end at 60 s.
    violations, (row,) = growth_rows(node_b(60, 5, step_at=45), [], 24.0, 60.0, 15.0)
    assert violations == []
    assert row["measured"] is True
    assert row["fds_growth"] > 0.10  # the growth is there, and shown
    assert row["judged"] is False
    assert row["note"].startswith("not judged (window too short: 35 s, 8 samples")


def test_the_same_growth_over_a_window_long_enough_is_a_violation() -> None:
    violations, (row,) = growth_rows(node_b(200, 5, step_at=150), [], 20.0, 200.0, 60.0)
    assert row["to_s"] - row["from_s"] >= JUDGED_MIN_SPAN_S
    assert row["judged"] is True
    assert [v.detail.split(":")[0] for v in violations] == ["node-b (pid 7)"]
    assert "fds grew" in violations[0].detail


def test_many_samples_over_a_short_span_are_still_too_short() -> None:
    # Sampled every second: plenty of samples, but 35 s say nothing of a leak.
    violations, (row,) = growth_rows(node_b(60, 1, step_at=45), [], 24.0, 60.0, 15.0)
    assert violations == []
    assert row["judged"] is False
