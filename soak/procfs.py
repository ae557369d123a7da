"""What ``/proc`` says of a process: resident memory, open files, CPU time, and where its TCP
sockets go. Parsers are pure (``parse_*``); readers return ``None`` for a process that is gone."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from bench.relay.stats import parse_process_cpu_ticks
from bench.suite.procs import parse_vmrss_kb

__all__ = [
    "CLOCK_TICKS_PER_S",
    "ProcessSample",
    "TcpSocket",
    "parse_tcp_table",
    "sample_process",
    "tcp_sockets_of",
]

CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
_LISTEN = "0A"


@dataclass(frozen=True)
class ProcessSample:
    rss_kb: int
    fds: int
    cpu_s: float


def sample_process(pid: int) -> ProcessSample | None:
    base = Path(f"/proc/{pid}")
    try:
        rss_kb = parse_vmrss_kb((base / "status").read_text())
        fds = len(os.listdir(base / "fd"))
        ticks = parse_process_cpu_ticks((base / "stat").read_text())
    except (OSError, ValueError, IndexError):
        return None
    return ProcessSample(rss_kb, fds, ticks / CLOCK_TICKS_PER_S)


@dataclass(frozen=True)
class TcpSocket:
    local_port: int
    remote_port: int
    listening: bool


def parse_tcp_table(text: str) -> dict[int, TcpSocket]:
    """inode → socket, from the text of ``/proc/net/tcp`` (or ``tcp6``)."""
    table: dict[int, TcpSocket] = {}
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10:
            continue
        local, remote, state, inode = fields[1], fields[2], fields[3], int(fields[9])
        table[inode] = TcpSocket(
            int(local.rsplit(":", 1)[1], 16), int(remote.rsplit(":", 1)[1], 16), state == _LISTEN
        )
    return table


def tcp_sockets_of(pid: int) -> list[TcpSocket]:
    """The TCP sockets ``pid`` holds open (``[]`` if it is gone)."""
    inodes: set[int] = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(int(target[8:-1]))
    table: dict[int, TcpSocket] = {}
    for name in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            table.update(parse_tcp_table(Path(f"/proc/{pid}/net/{name}").read_text()))
    return [table[inode] for inode in inodes if inode in table]
