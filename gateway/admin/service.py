"""What an operator does to keys, teams and users' limits: one service behind the admin HTTP API
(``gateway.admin.routes``) and ``python -m gateway keys`` (``gateway.admin.cli``).

Every action is checked whole before anything is written (``gateway.keys.records``), and
audited with who did it (``admin_action`` lines: actor, action, target; never key material).
A new key's secret is returned once, by ``create_key``, and never again.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import replace
from typing import Any

import structlog

from gateway.budgets.limits import BudgetInputError, parse_limits
from gateway.clock import Clock
from gateway.governance.ports import Governance
from gateway.keys.material import hint_of, new_key_id, new_secret, secret_hash
from gateway.keys.records import (
    ApiKey,
    KeyInputError,
    Team,
    UserLimits,
    key_changes,
    new_key_fields,
    parse_team_id,
)

__all__ = ["KeyAdmin", "NotFound"]

_audit = structlog.get_logger("audit.admin")


class NotFound(KeyInputError):
    """No such key, team or user."""


class KeyAdmin:
    def __init__(self, store: Governance, clock: Clock, tool_ids: Collection[str]) -> None:
        self.store = store
        self._clock = clock
        self._tools = frozenset(tool_ids)

    def _now(self) -> float:
        return self._clock.now().timestamp()

    def _audited(self, actor: str, action: str, target: str, **fields: Any) -> None:
        _audit.info("admin_action", actor=actor, action=action, target=target, **fields)

    def acted(self, actor: str, action: str, target: str, **fields: Any) -> None:
        """An action taken elsewhere (the console's drain): audited like the API's own."""
        self._audited(actor, action, target, **fields)

    def refused(self, actor: str, action: str, why: str) -> None:
        """A request refused for bad input: audited too (the message names the field)."""
        _audit.warning("admin_refused", actor=actor, action=action, reason=why)

    # -- keys ------------------------------------------------------------------------------------

    async def create_key(self, actor: str, body: Any) -> tuple[ApiKey, str]:
        """The key and its secret (shown once)."""
        teams = {team.team_id for team in await self.store.teams()}
        fields = new_key_fields(body, teams=teams, tools=self._tools, now=self._now())
        secret = new_secret()
        key = ApiKey(
            key_id=new_key_id(),
            secret_hash=secret_hash(secret),
            hint=hint_of(secret),
            created_at=self._now(),
            **fields,
        )
        await self.store.put_key(key)
        self._audited(actor, "key.create", key.key_id, owner=key.owner, team=key.team)
        return key, secret

    async def key(self, key_id: str) -> ApiKey:
        key = await self.store.key(key_id)
        if key is None:
            raise NotFound(f"no key {key_id!r}")
        return key

    async def keys(self, *, owner: str | None = None, team: str | None = None) -> list[ApiKey]:
        return [
            key
            for key in await self.store.keys()
            if (owner is None or key.owner == owner) and (team is None or key.team == team)
        ]

    async def update_key(self, actor: str, key_id: str, body: Any) -> ApiKey:
        key = await self.key(key_id)
        if key.revoked_at is not None:
            raise KeyInputError(f"key {key_id!r} is revoked: it cannot be changed")
        teams = {team.team_id for team in await self.store.teams()}
        changed = key_changes(key, body, teams=teams, tools=self._tools, now=self._now())
        await self.store.put_key(changed)
        self._audited(actor, "key.update", key_id, fields=sorted(body))
        return changed

    async def revoke_key(self, actor: str, key_id: str) -> ApiKey:
        """Refused everywhere from now on; every node ends its sessions within a second
        (``gateway.governance.revocations``). Revoking twice changes nothing."""
        key = await self.key(key_id)
        if key.revoked_at is not None:
            return key
        revoked = replace(key, revoked_at=self._now())
        await self.store.put_key(revoked)
        self._audited(actor, "key.revoke", key_id)
        return revoked

    # -- teams and users -------------------------------------------------------------------------

    async def put_team(self, actor: str, team_id: str, body: Any) -> Team:
        parse_team_id(team_id)
        budgets = _budgets_of(body)
        existing = await self.store.team(team_id)
        team = Team(
            team_id,
            budgets,
            existing.created_at if existing is not None else self._now(),
        )
        await self.store.put_team(team)
        self._audited(actor, "team.put", team_id)
        return team

    async def team(self, team_id: str) -> Team:
        team = await self.store.team(team_id)
        if team is None:
            raise NotFound(f"no team {team_id!r}")
        return team

    async def put_user(self, actor: str, user_id: str, body: Any) -> UserLimits:
        if not user_id.strip() or len(user_id) > 256:
            raise KeyInputError("user: 1-256 characters")
        user = UserLimits(user_id, _budgets_of(body))
        await self.store.put_user_limits(user)
        self._audited(actor, "user.put", user_id)
        return user

    async def user(self, user_id: str) -> UserLimits:
        user = await self.store.user_limits(user_id)
        return UserLimits(user_id) if user is None else user


def _budgets_of(body: Any) -> Any:
    """``{"budgets": {...}}``: the whole of a team's or user's limits (a PUT)."""
    if not isinstance(body, dict):
        raise KeyInputError("body: expected a JSON object")
    unknown = sorted(set(body) - {"budgets"})
    if unknown:
        raise KeyInputError(f"unknown fields {unknown}; known: ['budgets']")
    try:
        return parse_limits(body.get("budgets"))
    except BudgetInputError as exc:
        raise KeyInputError(str(exc)) from None
