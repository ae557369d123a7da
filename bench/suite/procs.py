"""``/proc`` for the suite: process trees, their CPU ticks and resident memory, pinning.

A peer may run helpers in child processes, so a relaying process is measured with its
descendants. The parsers are pure (tested in ``tests/unit/bench/test_suite_stats.py``).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Mapping
from pathlib import Path

from bench.relay.stats import CpuSnapshot, parse_process_cpu_ticks, parse_system_cpu_ticks

__all__ = [
    "children_named",
    "parse_comm_and_ppid",
    "parse_vmrss_kb",
    "pin_tree",
    "process_tree",
    "tree_rss_kb",
    "tree_snapshot",
]


def parse_comm_and_ppid(stat_text: str) -> tuple[str, int]:
    """The command name and the parent pid, from the text of ``/proc/<pid>/stat``."""
    head, _, tail = stat_text.rpartition(")")
    comm = head.split("(", 1)[1] if "(" in head else ""
    return comm, int(tail.split()[1])  # fields 2 and 4 of proc(5)


def parse_vmrss_kb(status_text: str) -> int:
    """``VmRSS`` in kB from the text of ``/proc/<pid>/status`` (0 for a zombie: no line)."""
    for line in status_text.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _all_parents() -> dict[int, tuple[str, int]]:
    """pid → (comm, ppid) of every process we can read right now."""
    table: dict[int, tuple[str, int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            table[int(entry)] = parse_comm_and_ppid(Path(f"/proc/{entry}/stat").read_text())
    return table


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants (those alive now)."""
    table = _all_parents()
    tree, frontier = [pid], [pid]
    while frontier:
        parent = frontier.pop()
        children = [child for child, (_, ppid) in table.items() if ppid == parent]
        tree += children
        frontier += children
    return tree


def children_named(name: str, parent: int | None = None) -> list[int]:
    """Children of ``parent`` (this process by default) whose command name is ``name``."""
    parent = os.getpid() if parent is None else parent
    return [pid for pid, (comm, ppid) in _all_parents().items() if ppid == parent and comm == name]


def _ticks(pid: int) -> int:
    try:
        return parse_process_cpu_ticks(Path(f"/proc/{pid}/stat").read_text())
    except (OSError, ValueError, IndexError):
        return 0  # gone: its CPU is no longer ours to count


def tree_snapshot(roles: Mapping[str, list[int]]) -> CpuSnapshot:
    """CPU ticks of each role (the sum over its pids: see ``process_tree``) and of the machine."""
    processes = {role: sum(_ticks(pid) for pid in pids) for role, pids in roles.items()}
    system = parse_system_cpu_ticks(Path("/proc/stat").read_text())
    return CpuSnapshot(wall_s=time.monotonic(), processes=processes, system=system)


def tree_rss_kb(pid: int) -> int:
    """Resident memory of ``pid`` and its descendants, in kB."""
    total = 0
    for member in process_tree(pid):
        with contextlib.suppress(OSError):
            total += parse_vmrss_kb(Path(f"/proc/{member}/status").read_text())
    return total


def pin_tree(pid: int, core: int) -> None:
    """Pin every thread of ``pid`` and of its descendants to ``core``."""
    for member in process_tree(pid):
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{member}/task"):
                with contextlib.suppress(OSError):
                    os.sched_setaffinity(int(task), {core})
