"""The per-session control-event limit: a token bucket with an injected time."""

from __future__ import annotations

from gateway.session.ratelimit import TokenBucket


def test_a_burst_passes_then_the_rate_applies() -> None:
    bucket = TokenBucket(rate_per_s=2.0, burst=3)
    assert [bucket.take(10.0) for _ in range(4)] == [True, True, True, False]
    assert bucket.take(10.4) is False  # 0.8 tokens
    assert bucket.take(10.5) is True  # 1.0 token
    assert bucket.take(10.5) is False


def test_idle_time_refills_only_up_to_the_burst() -> None:
    bucket = TokenBucket(rate_per_s=100.0, burst=2)
    assert bucket.take(0.0)
    assert [bucket.take(1000.0) for _ in range(3)] == [True, True, False]
