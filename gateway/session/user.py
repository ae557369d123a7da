"""Who a session is for: the user a credential named (a JWT's claims, or a gateway key's
record), with what limits them."""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.budgets import Plan

__all__ = ["SessionUser"]


@dataclass(frozen=True, slots=True)
class SessionUser:
    user_id: str
    roles: tuple[str, ...] = ()
    tenant: str | None = None  # the team, for budgets
    token: str | None = field(default=None, repr=False)
    # A gateway-issued key (gateway.keys): its id, and the models and tools it is limited to.
    key_id: str | None = None
    models: tuple[str, ...] | None = None
    tools: tuple[str, ...] | None = None
    # The budgets of its key, user and team (None: nothing counted, e.g. a phone stream).
    plan: Plan | None = None
    # The store could not be read when the credential was: its session's start reads them
    # (``SessionSlots.with_budgets``), and is refused with store_unavailable while it cannot.
    budgets_unread: bool = False
