"""``fan_out.for_each``: a node's round trips over all its sessions, a bounded number at a
time, in order, and none begun once the store is down again."""

from __future__ import annotations

import asyncio

from gateway.session.fan_out import for_each
from gateway.store import StoreUnavailable


async def test_at_most_the_limit_run_at_once_and_all_of_them_run_in_order() -> None:
    running, most, begun = 0, 0, []
    release = asyncio.Event()

    async def work(item: int) -> bool:
        nonlocal running, most
        begun.append(item)
        running += 1
        most = max(most, running)
        if len(begun) == 3:  # three in flight: the fourth waits for one of them
            release.set()
        await release.wait()
        running -= 1
        return True

    assert await for_each(range(10), work, limit=3) is True
    assert most == 3
    assert begun == list(range(10))


async def test_once_the_store_is_down_nothing_more_begins() -> None:
    begun: list[int] = []

    async def work(item: int) -> bool:
        begun.append(item)
        if item == 2:
            raise StoreUnavailable("the shared store did not answer")
        return True

    assert await for_each(range(10), work, limit=1) is False
    assert begun == [0, 1, 2]


async def test_work_that_says_the_store_went_away_stops_the_rest_too() -> None:
    begun: list[int] = []

    async def work(item: int) -> bool:
        begun.append(item)
        return item != 1  # False: its write found the store down again

    assert await for_each(range(5), work, limit=1) is False
    assert begun == [0, 1]
