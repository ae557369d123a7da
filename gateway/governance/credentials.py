"""Gateway keys as credentials, and the budgets a session answers to.

``KeyAuthority.verify`` reads a ``gk_`` secret's record by its hash (no cache: a revoked key is
refused on every node at once); ``plan`` gathers the limits of the key, the user and the team.
A refusal's message is safe to show the client and names no key material.
"""

from __future__ import annotations

import structlog

from gateway.budgets import Limits, Plan, Scope
from gateway.clock import Clock
from gateway.errors import AuthError
from gateway.governance.ports import KeyStore
from gateway.keys.material import secret_hash, well_formed
from gateway.keys.records import ApiKey

__all__ = ["KeyAuthority", "KeyRefused"]

_log = structlog.get_logger("keys")


class KeyRefused(AuthError):
    """The key cannot be used; ``str()`` is the reason for the client."""


class KeyAuthority:
    def __init__(self, keys: KeyStore, clock: Clock) -> None:
        self._keys = keys
        self._clock = clock

    async def verify(self, secret: str) -> ApiKey:
        """The key's record; raises ``KeyRefused`` (and ``StoreUnavailable``)."""
        if not well_formed(secret):
            _log.warning("key_refused", reason="malformed")
            raise KeyRefused("invalid key")
        key = await self._keys.key_by_hash(secret_hash(secret))
        if key is None:
            _log.warning("key_refused", reason="unknown")
            raise KeyRefused("invalid key")
        return self._usable(key)

    async def active(self, key_id: str) -> ApiKey:
        """Key ``key_id``'s record while it may be used (a call it placed is being answered);
        raises ``KeyRefused`` once it is revoked, expired or gone."""
        key = await self._keys.key(key_id)
        if key is None:
            raise KeyRefused("the key is gone")
        return self._usable(key)

    def _usable(self, key: ApiKey) -> ApiKey:
        status = key.status(self._clock.now().timestamp())
        if status != "active":
            _log.warning("key_refused", reason=status, key_id=key.key_id)
            raise KeyRefused(
                f"this key was {status}" if status == "revoked" else "this key expired"
            )
        return key

    async def plan(self, user_id: str, team: str | None, key: ApiKey | None = None) -> Plan:
        """The scopes a session of this user (and key, and team) answers to."""
        scopes: list[tuple[Scope, Limits]] = []
        if key is not None:
            scopes.append((Scope("key", key.key_id), key.limits))
        user = await self._keys.user_limits(user_id)
        scopes.append((Scope("user", user_id), Limits() if user is None else user.limits))
        if team:
            found = await self._keys.team(team)
            scopes.append((Scope("team", team), Limits() if found is None else found.limits))
        return Plan(tuple(scopes))
