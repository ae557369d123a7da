"""What gateway nodes share: the store interface and the records it keeps.

One process runs on ``MemoryStore``; several (processes or machines) share a ``RedisStore``.
Both keep the same things with the same rules, and ``tests/unit/store`` runs one suite on both:

- **sessions**: one record per live or parked session: who may resume it (user, tenant, the hash
  of the current resume token), its last snapshot, and its **owner**: the node that runs it and
  an **epoch**, incremented by every change of owner. A node acts for a session only while the
  record names it with the epoch it holds; every write that matters checks that atomically (a
  node that lost the session gets ``Fenced``), so a node that was paused, partitioned or slow
  cannot act for a session another node took over;
- **nodes**: a heartbeat per node with a TTL (a dead node's sessions can be taken over);
- **confirmations**: each open confirmation, taken once (approve, reject, spoken yes, expiry);
- **a tool-call ledger** per session: started → finished (with the result envelope) →
  delivered (to the model, once, by the owner of the moment);
- **limits** across nodes: connections per client address per minute, sessions per user;
- **single-use keys** (a phone-stream token's id), and a **bus**: messages to one node.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, Protocol

from gateway.errors import GatewayError
from gateway.orchestrator import PendingConfirmation
from transports.base import ConversationItem

__all__ = [
    "TOMBSTONE_S",
    "Claim",
    "ClaimOutcome",
    "Fenced",
    "LedgerEntry",
    "LedgerState",
    "RecordMissing",
    "SessionRecord",
    "SessionSnapshot",
    "SessionStore",
    "StoreUnavailable",
    "hash_token",
]


# How long an ended session's tombstone stays (it outlasts any resume window in practice).
TOMBSTONE_S = 300.0


def hash_token(token: str) -> str:
    """Resume tokens are kept hashed: a leaked store does not hand out sessions."""
    return hashlib.sha256(token.encode()).hexdigest()


class StoreUnavailable(GatewayError):
    """The shared store cannot be reached now (the client may retry: ``store_unavailable``)."""


class Fenced(GatewayError):
    """This node no longer owns the session: another node took it over (a higher epoch), or it
    ended for good."""


class RecordMissing(GatewayError):
    """The store has no record of the session at all (it restarted empty, without
    persistence): its owner may register it again (``register(..., only_if_absent=True)``)."""


@dataclass(frozen=True, slots=True)
class SessionSnapshot:
    """What survives a resume (docs/protocol.md section 4, item 5; 10.3), as plain data."""

    provider: str
    mode: str
    input_rate: int
    output_rate: int
    enabled_tools: tuple[str, ...] | None
    instructions: str
    model: str | None = None
    voice: str | None = None
    locale: str | None = None
    # The chat provider's tool-calling dialect (native when None).
    tool_dialect: str | None = None
    audio_encoding: str = "pcm16"  # "pcmu": a phone call's G.711 µ-law, both ways
    turn_number: int = 0
    retrieval_calls: int = 0
    rounds: int = 0
    last_user_text: str = ""
    pending_confirmations: tuple[PendingConfirmation, ...] = ()
    pending_messages: tuple[str, ...] = ()
    history: tuple[ConversationItem, ...] = field(default_factory=tuple)
    # What the session consumed so far (``gateway.usage.SessionUsage.as_json``).
    usage: Mapping[str, Any] = field(default_factory=dict)
    # The tools its client declared (``{name, description, parameters}``), offered to every
    # upstream the session opens, on any node.
    client_tools: tuple[Mapping[str, Any], ...] = ()
    # Who ends the user's turns and whether the model may call tools (wire forms of
    # ``session.start``; None: the defaults, server turns and ``auto``).
    turn_detection: str | Mapping[str, Any] | None = None
    tool_choice: str | Mapping[str, Any] | None = None
    # The model alias the client asked for (``GATEWAY_MODELS``): a failover picks the next of
    # its targets, on any node; None: the session's one provider, as asked.
    alias: str | None = None


@dataclass(frozen=True, slots=True)
class SessionRecord:
    session_id: str
    user_id: str
    tenant: str | None
    token_hash: str
    owner: str  # the node id that runs it
    epoch: int  # incremented by every change of owner
    state: Literal["live", "parked", "ended"]
    snapshot: SessionSnapshot
    saved_at: float  # unix time the snapshot was taken


class ClaimOutcome(StrEnum):
    CLAIMED = "claimed"  # the record is now this node's, at a new epoch
    NOT_FOUND = "not_found"  # no such session, or wrong token, user or tenant, or expired
    BUSY = "busy"  # live on a node that is alive: ask it to release first (or force)


@dataclass(frozen=True, slots=True)
class Claim:
    outcome: ClaimOutcome
    record: SessionRecord | None = None  # CLAIMED: the record as it now is
    previous_owner: str | None = None
    # CLAIMED from a live record whose owner was gone (crashed): from the last snapshot.
    recovered: bool = False


class LedgerState(StrEnum):
    STARTED = "started"
    FINISHED = "finished"
    DELIVERED = "delivered"


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    call_id: str
    tool_id: str
    state: LedgerState
    node: str  # the node that ran it
    epoch: int  # the epoch it ran under
    started_at: float  # unix time
    envelope: Mapping[str, Any] | None = None  # FINISHED and DELIVERED: the result


class SessionStore(Protocol):
    """Every method may raise ``StoreUnavailable``; those that change a session's state check
    that the caller still owns it and raise ``Fenced`` otherwise (``RecordMissing`` when there
    is no record at all). An ended session leaves a tombstone for ``TOMBSTONE_S``: nobody can
    claim or register it again meanwhile."""

    @property
    def shared(self) -> bool:
        """True when other nodes see this store (sessions may move between them)."""
        ...

    # -- nodes -----------------------------------------------------------------------------------

    async def heartbeat(self, node: str, ttl_s: float) -> None: ...

    async def node_alive(self, node: str) -> bool: ...

    async def up_for_s(self) -> float:
        """How long the store has been up: shorter than a lease, it may have restarted empty
        and the nodes may not have recorded their sessions again yet."""
        ...

    # -- sessions --------------------------------------------------------------------------------

    async def register(
        self, record: SessionRecord, ttl_s: float, *, only_if_absent: bool = False
    ) -> bool:
        """A new session, owned by ``record.owner`` at ``record.epoch``; ``only_if_absent``:
        the owner asserts its session again after the store lost it (False: a record, or the
        tombstone of an ended session, is there)."""
        ...

    async def save(
        self,
        session_id: str,
        epoch: int,
        snapshot: SessionSnapshot,
        *,
        token_hash: str | None = None,
        parked: bool = False,
        ttl_s: float,
    ) -> None:
        """The owner writes a newer snapshot (and a rotated token); ``parked``: nobody is
        attached, and any node may claim it; else it is (again) live. Raises ``Fenced``."""
        ...

    async def claim(
        self,
        session_id: str,
        token_hash: str,
        user_id: str,
        tenant: str | None,
        *,
        node: str,
        window_s: float,
        force: bool = False,
    ) -> Claim:
        """Take a session over for ``node``: a parked one at once; a live one whose owner is
        dead (its heartbeat gone, and ``window_s`` not passed since the later of its last
        snapshot and its owner's last heartbeat) as a recovery; a live one whose owner is alive
        only with ``force`` (after asking it)."""
        ...

    async def end(self, session_id: str, epoch: int) -> None:
        """The session ended for good: its record, confirmations and ledger go, unless another
        node owns it now (then nothing happens)."""
        ...

    async def owner(self, session_id: str) -> tuple[str, int] | None:
        """(node, epoch); ``("", 0)`` for an ended session, None when there is no record."""
        ...

    # -- confirmations ---------------------------------------------------------------------------

    async def open_confirmation(
        self, session_id: str, epoch: int, confirmation_id: str, ttl_s: float
    ) -> None: ...

    async def take_confirmation(self, session_id: str, epoch: int, confirmation_id: str) -> bool:
        """True for the one caller that closes it; False when it was taken (or expired)."""
        ...

    # -- the tool-call ledger --------------------------------------------------------------------

    async def ledger_start(
        self, session_id: str, epoch: int, node: str, calls: Sequence[tuple[str, str]]
    ) -> dict[str, LedgerEntry | None]:
        """Mark ``(call_id, tool_id)`` calls started by ``node``: None for each started now, the
        existing entry for a call that was started before (by anyone). Raises ``Fenced``."""
        ...

    async def ledger_finish(
        self, session_id: str, call_id: str, envelope: Mapping[str, Any]
    ) -> str | None:
        """Record a call's result (whoever owns the session now; also when the store lost the
        call's entry, as an emptied Redis does); returns the owner to tell."""
        ...

    async def ledger_deliver(
        self, session_id: str, epoch: int, call_ids: Sequence[str]
    ) -> set[str]:
        """Of the calls whose results this owner holds, those it may give the model now: every
        one not delivered before (each reaches the model once). Raises ``Fenced``."""
        ...

    async def ledger_open(self, session_id: str) -> list[LedgerEntry]:
        """Calls started or finished and not delivered."""
        ...

    # -- limits and single-use keys ------------------------------------------------------------

    async def admit_address(self, address: str, per_minute: int, now: float) -> bool: ...

    async def acquire_user_slot(
        self, user_id: str, session_id: str, node: str, limit: int
    ) -> bool: ...

    async def keep_user_slot(self, user_id: str, session_id: str, node: str) -> None:
        """The user's session runs on ``node`` now (resumed there, or recorded again after the
        store restarted empty): counted, whatever the limit."""
        ...

    async def release_user_slot(self, user_id: str, session_id: str) -> None: ...

    async def claim_once(self, key: str, ttl_s: float) -> bool:
        """True the first time ``key`` is claimed within ``ttl_s`` seconds, False after."""
        ...

    # -- the bus ---------------------------------------------------------------------------------

    async def publish(self, node: str, message: Mapping[str, Any]) -> None: ...

    def messages(self, node: str) -> AsyncIterator[dict[str, Any]]:
        """The messages published to ``node``, until ``close``."""
        ...

    async def close(self) -> None: ...
