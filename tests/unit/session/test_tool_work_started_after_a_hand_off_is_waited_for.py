"""A node that hands a session off waits for its tool work, including work started meanwhile.

A drain may move a session while its tool batch is still between ``tool.started`` and running
its calls (a reply that waits only for its calls is a turn boundary). Its background call is
then started after the hand-off, by the batch; the node waits for the work it holds
(``ToolFlow.wait_running``) before it exits, and that must include this call: else the exit
cancels it, and the new owner reports it failed ("the gateway node running this call stopped
before it finished"). No sockets (``tests/session_kit.py``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from session_kit import make_session

from gateway.registry import Registry


async def test_waiting_for_a_sessions_tool_work_includes_the_work_it_starts_meanwhile(
    full_registry: Registry, tmp_path: Path
) -> None:
    tools = make_session(full_registry, tmp_path).session.tools
    ledger_answered, background_may_end = asyncio.Event(), asyncio.Event()
    ended: list[str] = []

    async def background_call() -> None:
        await background_may_end.wait()
        ended.append("background call")

    async def batch() -> None:
        await ledger_answered.wait()
        tools.track(background_call())  # as BackgroundCalls.run does
        ended.append("batch")

    tools.track(batch())
    waiting = asyncio.create_task(tools.wait_running())  # the hand-off: work is running
    await asyncio.sleep(0)  # one turn of the loop: the node looks at what runs
    ledger_answered.set()
    _, still_waiting = await asyncio.wait({waiting}, timeout=0.2)
    assert ended == ["batch"]
    assert still_waiting == {waiting}  # the background call runs: the node does not exit yet
    assert tools.running()

    background_may_end.set()
    await asyncio.wait_for(waiting, timeout=5)
    assert ended == ["batch", "background call"]
    assert not tools.running()
