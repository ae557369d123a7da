"""Session states and their transitions, as data; a transition not in the table raises.

STARTING ──started──▶ ACTIVE ──detach──▶ DETACHED ──resume──▶ ACTIVE
    │                   │                    │
    └──────end──────────┴────────end─────────┴──▶ ENDED
"""

from __future__ import annotations

from enum import StrEnum

from gateway.errors import SessionStateError

__all__ = ["SessionState", "transition"]


class SessionState(StrEnum):
    STARTING = "starting"
    ACTIVE = "active"
    DETACHED = "detached"
    ENDED = "ended"


_TRANSITIONS: dict[tuple[SessionState, str], SessionState] = {
    (SessionState.STARTING, "started"): SessionState.ACTIVE,
    (SessionState.STARTING, "end"): SessionState.ENDED,
    (SessionState.ACTIVE, "detach"): SessionState.DETACHED,
    (SessionState.ACTIVE, "end"): SessionState.ENDED,
    (SessionState.DETACHED, "resume"): SessionState.ACTIVE,
    (SessionState.DETACHED, "end"): SessionState.ENDED,
}


def transition(state: SessionState, event: str) -> SessionState:
    try:
        return _TRANSITIONS[(state, event)]
    except KeyError:
        raise SessionStateError(f"no transition from {state.value} on {event!r}") from None
