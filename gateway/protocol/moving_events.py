"""The protocol's extensions for several gateway nodes (``docs/protocol.md`` 10.13).

- ``session.moving``: the node is draining; the client reconnects (to any node) and resumes
  with the ``resume_token`` it carries after ``retry_after_ms``: each session moved by one drain
  is given its own, so that their resumes reach the other nodes spread out rather than in one
  burst (``gateway.session.resume_pacing``). The socket closes with 1012 after it.
- ``session.started.recovery``: a resumed session whose node stopped (crashed) was rebuilt from
  its last snapshot; ``lost_turn`` is the user's last message or utterance when no reply to it
  was saved (the client may send it again), else null.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .json_types import JsonObject

__all__ = ["Recovery", "SessionMoving"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionMoving:
    TYPE: ClassVar[str] = "session.moving"

    session_id: str
    resume_token: str
    reason: str = "drain"
    retry_after_ms: int = 0  # wait this long before resuming

    def to_dict(self) -> JsonObject:
        return {
            "type": self.TYPE,
            "session_id": self.session_id,
            "resume_token": self.resume_token,
            "reason": self.reason,
            "retry_after_ms": self.retry_after_ms,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Recovery:
    """``session.started.recovery``."""

    reason: str = "node_lost"
    lost_turn: str | None = None  # the user's text (an utterance: its transcript), if any
    failed_calls: tuple[str, ...] = ()  # call ids whose node stopped while they ran

    def to_dict(self) -> JsonObject:
        return {
            "reason": self.reason,
            "lost_turn": None if self.lost_turn is None else {"text": self.lost_turn},
            "failed_calls": list(self.failed_calls),
        }
