"""The soak tools' journal: one JSON line per phase of each execution (``start``, then ``end``,
``cancelled`` or ``raised``), appended to the file named by ``$SOAK_JOURNAL`` by every node.

Each line is written with one ``write`` on a file opened ``O_APPEND``, so lines of several
processes never interleave. ``run_key`` names one execution of one call (its session and call
ids); a tool returns it in its result, so the upstream fakes can see where it went.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

from tools._core import ToolContext, ToolResponse

__all__ = ["JOURNAL_ENV", "RUN_PREFIX", "record", "run_key"]

JOURNAL_ENV = "SOAK_JOURNAL"
RUN_PREFIX = "soakrun:"


def run_key(ctx: ToolContext) -> str:
    return f"{RUN_PREFIX}{ctx.session_id}:{ctx.call_id}"


def record(ctx: ToolContext, phase: str, **extra: Any) -> None:
    line = {
        "t": time.time(),
        "phase": phase,
        "run": run_key(ctx),
        "tool": ctx.tool_id,
        "session_id": ctx.session_id,
        "call_id": ctx.call_id,
        "pid": os.getpid(),
        **extra,
    }
    data = (json.dumps(line, separators=(",", ":")) + "\n").encode()
    fd = os.open(os.environ[JOURNAL_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


async def sleep_journaled(args: dict[str, Any], ctx: ToolContext) -> ToolResponse:
    """A tool's work that takes ``ms`` milliseconds, journaled as it starts, ends or is
    cancelled (the slow tool, and the background one: the same work, run two ways)."""
    record(ctx, "start", label=args["label"])
    try:
        await asyncio.sleep(args.get("ms", 0) / 1000)
    except asyncio.CancelledError:
        record(ctx, "cancelled", label=args["label"])
        raise
    record(ctx, "end", label=args["label"])
    return ToolResponse.success({"label": args["label"], "run": run_key(ctx)})
