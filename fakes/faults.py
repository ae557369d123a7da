"""Fault modes of the fake upstreams, switched on and off at runtime by a test that holds the
server (``server.faults``), for testing a client's failover. Pure: no I/O, no clock.

``UpstreamFaults`` is one mutable record shared by a server and every connection it serves;
set a field and the next connection (or response) sees it:

- ``refuse``: every new connection (chat: every new request) is reset before any HTTP answer
  (the TCP is aborted with an RST: the client reads ``ECONNRESET``; see each fake for what its
  SDK raises);
- ``status``: every new connection upgrade (chat: every new request) is answered with that HTTP
  status and the provider's own error body (``fakes.fault_replies``); 429 carries
  ``Retry-After: <retry_after_s>``;
- ``stall_first_output``: a response that starts sends nothing at all, ever (dead air), while
  the connection stays open and input is taken and answered as usual;
- ``stall_mid_response_after = N``: a response stops after its first ``N`` output chunks (what
  a chunk is, is the fake's: an audio / text / arguments delta, a ``modelTurn`` message, an SSE
  chunk), the connection stays open.

``refuse`` beats ``status`` and ``stall_first_output`` beats ``stall_mid_response_after`` when
both are on. A field set directly stays on until it is set back (or ``clear()``), unless a
``fail_next`` count for that kind is still running; ``fail_next(kind, count, …)`` switches a
mode on for the next ``count`` times it applies only, then off again by itself (a fault already
on for that kind is replaced). ``applied[kind]``
counts the times each mode was applied (a refused connection, an error answered, a response
stalled at its start, a response cut after its chunks). Kinds are ``"refuse"``, ``"status"``,
``"stall_first"`` and ``"stall_mid"``.

When a mode is read: ``refuse`` and ``status`` as a connection (request) comes in;
``stall_first_output`` as a response starts; ``stall_mid_response_after`` as each chunk of a
response goes out (so a mode switched on during a long response cuts it at its next chunk once
``N`` have gone; a counted one is used up only by a response it actually cuts). A stalled
response stays stalled when the mode is switched off: the shells stop asking for its steps.

``add_fault_arguments`` / ``faults_from_args``: the fakes' command-line flags (``--fault``).
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, get_args

__all__ = [
    "ERROR_STATUSES",
    "FAULT_KINDS",
    "FaultKind",
    "Refuse",
    "UpstreamFaults",
    "add_fault_arguments",
    "faults_from_args",
]

FaultKind = Literal["refuse", "status", "stall_first", "stall_mid"]
FAULT_KINDS: tuple[FaultKind, ...] = get_args(FaultKind)
# The statuses the fakes have a provider body for (``fakes.fault_replies``).
ERROR_STATUSES = frozenset({400, 401, 403, 404, 429, 500, 502, 503, 504})
_FLAG_KINDS: dict[str, FaultKind] = {
    "refuse": "refuse",
    "stall-first": "stall_first",
    "stall-mid": "stall_mid",
}


@dataclass(frozen=True, slots=True)
class Refuse:
    """The connection fault that resets the connection."""


@dataclass(eq=False)
class UpstreamFaults:
    """The fault modes of one fake server (see the module's docstring); all off by default."""

    refuse: bool = False  # new connections (chat: requests) are reset, no HTTP answer
    status: int | None = None  # new connections (chat: requests) get this HTTP error
    stall_first_output: bool = False  # new responses send nothing at all
    stall_mid_response_after: int | None = None  # responses stop after this many chunks
    retry_after_s: int = 1  # the ``Retry-After`` of a 429
    # Modes switched on by ``fail_next``: how many more times each applies before it goes off.
    remaining: dict[FaultKind, int] = field(default_factory=dict)
    applied: Counter[FaultKind] = field(default_factory=Counter)
    # Called with the kind each time a mode applies, once ``applied`` counts it (at the very
    # moment a connection is refused or answered, or a response stalls): what a test waits on.
    on_applied: Callable[[FaultKind], None] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        _check_status(self.status)
        _check_after(self.stall_mid_response_after)
        if self.retry_after_s < 0:
            raise ValueError("retry_after_s must be >= 0")

    # The test's side ----------------------------------------------------------------------------

    def fail_next(
        self,
        kind: FaultKind,
        count: int = 1,
        *,
        status: int | None = None,
        after: int | None = None,
    ) -> None:
        """Switch ``kind`` on for the next ``count`` times it applies, then off by itself.
        ``status`` is the HTTP status of a ``"status"`` fault; ``after`` the chunks a
        ``"stall_mid"`` response sends first."""
        if count < 1:
            raise ValueError("count must be >= 1")
        if (status is not None) != (kind == "status"):
            raise ValueError("status= goes with the 'status' fault, and only with it")
        if (after is not None) != (kind == "stall_mid"):
            raise ValueError("after= goes with the 'stall_mid' fault, and only with it")
        _check_status(status)
        _check_after(after)
        if kind == "refuse":
            self.refuse = True
        elif kind == "status":
            self.status = status
        elif kind == "stall_first":
            self.stall_first_output = True
        else:
            self.stall_mid_response_after = after
        self.remaining[kind] = count

    def clear(self) -> None:
        """Every mode off (``applied`` is kept: it counts what happened)."""
        self.refuse = False
        self.status = None
        self.stall_first_output = False
        self.stall_mid_response_after = None
        self.remaining.clear()

    # The fakes' side: each ``take_…`` that answers yes counts one application ---------------

    def take_connection_fault(self) -> Refuse | int | None:
        """A connection (chat: a request) comes in: ``Refuse()``, an HTTP status, or None."""
        if self.refuse:
            self._applied("refuse")
            return Refuse()
        status = self.status
        if status is not None:
            self._applied("status")
            return status
        return None

    def take_stall_first(self) -> bool:
        """A response starts: True when it is to send nothing."""
        if not self.stall_first_output:
            return False
        self._applied("stall_first")
        return True

    def take_stall_mid(self, chunks_sent: int) -> bool:
        """A response has sent ``chunks_sent`` chunks: True when it is to stop there."""
        after = self.stall_mid_response_after
        if after is None or chunks_sent < after:
            return False
        self._applied("stall_mid")
        return True

    def take_whole_answer_stall(self) -> bool:
        """An answer sent whole (no chunks: a non-streamed completion) is about to go: True when
        either stall mode is to hold it back (a response cut mid-way is never complete)."""
        if self.take_stall_first():
            return True
        if self.stall_mid_response_after is None:
            return False
        self._applied("stall_mid")
        return True

    def _applied(self, kind: FaultKind) -> None:
        self.applied[kind] += 1
        self._count_down(kind)
        if self.on_applied is not None:
            self.on_applied(kind)

    def _count_down(self, kind: FaultKind) -> None:
        left = self.remaining.get(kind)
        if left is None:
            return
        if left > 1:
            self.remaining[kind] = left - 1
            return
        del self.remaining[kind]
        if kind == "refuse":
            self.refuse = False
        elif kind == "status":
            self.status = None
        elif kind == "stall_first":
            self.stall_first_output = False
        else:
            self.stall_mid_response_after = None


def _check_status(status: int | None) -> None:
    if status is not None and status not in ERROR_STATUSES:
        raise ValueError(f"status must be one of {sorted(ERROR_STATUSES)}")


def _check_after(after: int | None) -> None:
    if after is not None and after < 0:
        raise ValueError("stall_mid_response_after must be >= 0")


# Command line --------------------------------------------------------------------------------


def add_fault_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("fault modes (fakes.faults)")
    statuses = "|".join(str(s) for s in sorted(ERROR_STATUSES))
    group.add_argument(
        "--fault",
        default=None,
        metavar=f"refuse|{statuses}|stall-first|stall-mid",
        help="refuse connections (TCP reset), answer them with an HTTP error, or stall responses",
    )
    group.add_argument(
        "--fault-count",
        type=int,
        default=None,
        help="only the next N times, then serve normally (default: for as long as it runs)",
    )
    group.add_argument(
        "--stall-after", type=int, default=1, help="stall-mid: the chunks a response sends first"
    )
    group.add_argument("--retry-after-s", type=int, default=1, help="Retry-After of a 429")


def faults_from_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> UpstreamFaults:
    """The faults the flags of ``add_fault_arguments`` ask for (``parser.error`` if they are
    wrong)."""
    fault: str | None = args.fault
    count: int | None = args.fault_count
    try:
        faults = UpstreamFaults(retry_after_s=args.retry_after_s)
        if fault is None:
            if count is not None:
                parser.error("--fault-count needs --fault")
            return faults
        status = int(fault) if fault.isdigit() else None
        kind = "status" if status is not None else _FLAG_KINDS.get(fault)
        if kind is None:
            parser.error(f"--fault: unknown fault {fault!r}")
        after = args.stall_after if kind == "stall_mid" else None
        faults.fail_next(kind, 1 if count is None else count, status=status, after=after)
        if count is None:
            faults.remaining.clear()  # for as long as it runs
    except ValueError as error:
        parser.error(str(error))
    return faults
