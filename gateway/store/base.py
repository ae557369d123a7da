"""The store interface and the records it keeps."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Protocol

from gateway.orchestrator import PendingConfirmation
from transports.base import ConversationItem

__all__ = ["ResumeRecord", "SessionSnapshot", "SessionStore", "hash_token"]


def hash_token(token: str) -> str:
    """Resume tokens are kept hashed: a leaked store does not hand out sessions."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class SessionSnapshot:
    """What survives a resume (PROTOCOL.md section 4, item 5), as plain data."""

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
    turn_number: int = 0
    retrieval_calls: int = 0
    rounds: int = 0
    last_user_text: str = ""
    pending_confirmations: tuple[PendingConfirmation, ...] = ()
    pending_messages: tuple[str, ...] = ()
    history: tuple[ConversationItem, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class ResumeRecord:
    session_id: str
    user_id: str
    token_hash: str
    snapshot: SessionSnapshot
    # The tenant the session belongs to: a resume must come from the same tenant.
    tenant: str | None = None


class SessionStore(Protocol):
    async def park(self, record: ResumeRecord, ttl_s: float) -> None:
        """Keep ``record`` for ``ttl_s`` seconds (the resume window), replacing any older one."""
        ...

    async def claim(
        self, session_id: str, token_hash: str, user_id: str, tenant: str | None = None
    ) -> ResumeRecord | None:
        """Take the record if id, token, user and tenant all match and it has not expired.

        A record can be claimed once; a wrong token, user or tenant leaves it in place.
        """
        ...

    async def drop(self, session_id: str, token_hash: str) -> None:
        """Forget the record if it is still the one parked with ``token_hash`` (the session
        ended for good here; a newer park, on another node, stays)."""
        ...

    async def claim_once(self, key: str, ttl_s: float) -> bool:
        """True the first time ``key`` is claimed within ``ttl_s`` seconds, False after (a
        single-use token's id)."""
        ...
