"""Per-connection sessions: state table, outbound writer, tool flow, the async loop."""

from gateway.session.outbound import Outbound
from gateway.session.parts import SessionParts
from gateway.session.session import Session, SessionUser
from gateway.session.states import SessionState, transition

__all__ = ["Outbound", "Session", "SessionParts", "SessionState", "SessionUser", "transition"]
