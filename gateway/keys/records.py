"""The records the key store keeps (keys, teams, users' limits) and the admin input that makes
and changes them. Pure: every rule is a unit test.

Input is checked whole before anything is written: an unknown field, a wrong type, a negative
or huge budget, an unknown team or tool each raise ``KeyInputError`` naming the field, and
nothing is created or changed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Literal

from gateway.budgets.limits import BudgetInputError, Limits, parse_limits

__all__ = [
    "ApiKey",
    "KeyInputError",
    "KeyStatus",
    "Team",
    "UserLimits",
    "key_changes",
    "new_key_fields",
    "parse_team_id",
]

KeyStatus = Literal["active", "revoked", "expired"]
_NAME = re.compile(r"^[A-Za-z0-9_.:@-]{1,128}$")
MAX_LIST = 200
# A key may live at most ten years (an expiry in the year 3000 is a typo, not a plan).
MAX_EXPIRY_S = 10 * 365 * 86400


class KeyInputError(BudgetInputError):
    """Admin input that cannot be used (the message names the field)."""


@dataclass(frozen=True, slots=True)
class ApiKey:
    key_id: str
    secret_hash: str = field(repr=False)
    hint: str
    owner: str
    team: str | None = None
    roles: tuple[str, ...] = ()
    # None: any model / the tools its roles allow; a tuple: only these.
    models: tuple[str, ...] | None = None
    tools: tuple[str, ...] | None = None
    expires_at: float | None = None
    limits: Limits = field(default_factory=Limits)
    name: str = ""
    created_at: float = 0.0
    revoked_at: float | None = None

    def status(self, now: float) -> KeyStatus:
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and now >= self.expires_at:
            return "expired"
        return "active"

    def allows_model(self, model: str) -> bool:
        return self.models is None or model in self.models

    def as_json(self, now: float) -> dict[str, Any]:
        """What the admin API shows (never the secret, nor its hash)."""
        return {
            "id": self.key_id,
            "hint": self.hint,
            "name": self.name,
            "owner": self.owner,
            "team": self.team,
            "roles": list(self.roles),
            "models": None if self.models is None else list(self.models),
            "tools": None if self.tools is None else list(self.tools),
            "expires_at": _iso(self.expires_at),
            "budgets": self.limits.as_json(),
            "created_at": _iso(self.created_at),
            "revoked_at": _iso(self.revoked_at),
            "status": self.status(now),
        }

    def to_record(self) -> dict[str, Any]:
        return {
            "key_id": self.key_id,
            "secret_hash": self.secret_hash,
            "hint": self.hint,
            "owner": self.owner,
            "team": self.team,
            "roles": list(self.roles),
            "models": None if self.models is None else list(self.models),
            "tools": None if self.tools is None else list(self.tools),
            "expires_at": self.expires_at,
            "limits": self.limits.as_json(),
            "name": self.name,
            "created_at": self.created_at,
            "revoked_at": self.revoked_at,
        }

    @classmethod
    def from_record(cls, raw: Mapping[str, Any]) -> ApiKey:
        models, tools = raw.get("models"), raw.get("tools")
        return cls(
            key_id=str(raw["key_id"]),
            secret_hash=str(raw["secret_hash"]),
            hint=str(raw.get("hint", "")),
            owner=str(raw["owner"]),
            team=raw.get("team"),
            roles=tuple(raw.get("roles") or ()),
            models=None if models is None else tuple(models),
            tools=None if tools is None else tuple(tools),
            expires_at=raw.get("expires_at"),
            limits=parse_limits(raw.get("limits")),
            name=str(raw.get("name", "")),
            created_at=float(raw.get("created_at", 0.0)),
            revoked_at=raw.get("revoked_at"),
        )


@dataclass(frozen=True, slots=True)
class Team:
    team_id: str
    limits: Limits = field(default_factory=Limits)
    created_at: float = 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.team_id,
            "budgets": self.limits.as_json(),
            "created_at": _iso(self.created_at),
        }

    def to_record(self) -> dict[str, Any]:
        return {
            "team_id": self.team_id,
            "limits": self.limits.as_json(),
            "created_at": self.created_at,
        }

    @classmethod
    def from_record(cls, raw: Mapping[str, Any]) -> Team:
        return cls(str(raw["team_id"]), parse_limits(raw.get("limits")), float(raw["created_at"]))


@dataclass(frozen=True, slots=True)
class UserLimits:
    user_id: str
    limits: Limits = field(default_factory=Limits)

    def as_json(self) -> dict[str, Any]:
        return {"id": self.user_id, "budgets": self.limits.as_json()}


def _iso(unix: float | None) -> str | None:
    if unix is None:
        return None
    return datetime.fromtimestamp(unix, UTC).isoformat().replace("+00:00", "Z")


def parse_team_id(value: Any, where: str = "id") -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise KeyInputError(f"{where}: 1-128 characters of letters, digits and _ . : @ -")
    return value


def _names(raw: Any, where: str) -> tuple[str, ...]:
    if not isinstance(raw, list) or len(raw) > MAX_LIST:
        raise KeyInputError(f"{where}: expected a list of at most {MAX_LIST} names")
    for item in raw:
        if not isinstance(item, str) or not _NAME.fullmatch(item):
            raise KeyInputError(f"{where}: each entry 1-128 characters of letters, digits, _.:@-")
    return tuple(dict.fromkeys(raw))


def _expiry(raw: Any, now: float) -> float | None:
    """``expires_at``: an ISO 8601 time with a zone, or unix seconds; in the future."""
    if raw is None:
        return None
    if isinstance(raw, str):
        try:
            when = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            raise KeyInputError("expires_at: an ISO 8601 time (2027-01-31T00:00:00Z)") from None
        if when.tzinfo is None:
            raise KeyInputError("expires_at: give the timezone (…Z or +01:00)")
        value = when.timestamp()
    elif isinstance(raw, int | float) and not isinstance(raw, bool) and math.isfinite(raw):
        value = float(raw)
    else:
        raise KeyInputError("expires_at: an ISO 8601 time or unix seconds")
    if value <= now:
        raise KeyInputError("expires_at: must be in the future")
    if value - now > MAX_EXPIRY_S:
        raise KeyInputError("expires_at: at most ten years ahead")
    return value


_CREATE_FIELDS = frozenset(
    {"owner", "team", "roles", "models", "tools", "expires_at", "budgets", "name"}
)
_CHANGE_FIELDS = _CREATE_FIELDS - {"owner"}


def _fields(
    body: Any,
    allowed: frozenset[str],
    *,
    teams: Collection[str],
    tools: Collection[str],
    now: float,
) -> dict[str, Any]:
    if not isinstance(body, Mapping):
        raise KeyInputError("body: expected a JSON object")
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise KeyInputError(f"unknown fields {unknown}; known: {sorted(allowed)}")
    out: dict[str, Any] = {}
    if "owner" in body:
        owner = body["owner"]
        if not isinstance(owner, str) or not owner.strip() or len(owner) > 256:
            raise KeyInputError("owner: the user id the key acts for (1-256 characters)")
        out["owner"] = owner
    if "team" in body:
        team = body["team"]
        if team is not None:
            parse_team_id(team, "team")
            if team not in teams:
                raise KeyInputError(f"team: no team {team!r}; create it first (/admin/v1/teams)")
        out["team"] = team
    if "roles" in body:
        out["roles"] = _names(body["roles"], "roles")
    for name in ("models", "tools"):
        if name in body:
            out[name] = None if body[name] is None else _names(body[name], name)
    if out.get("tools"):
        unknown_tools = sorted(set(out["tools"]) - set(tools))
        if unknown_tools:
            raise KeyInputError(f"tools: not in the registry: {unknown_tools}")
    if "expires_at" in body:
        out["expires_at"] = _expiry(body["expires_at"], now)
    if "name" in body:
        label = body["name"]
        if not isinstance(label, str) or len(label) > 100:
            raise KeyInputError("name: a label of at most 100 characters")
        out["name"] = label
    return out


def new_key_fields(
    body: Any, *, teams: Collection[str], tools: Collection[str], now: float
) -> dict[str, Any]:
    """The fields of a key to create (``ApiKey`` keywords, ``limits`` included)."""
    out = _fields(body, _CREATE_FIELDS, teams=teams, tools=tools, now=now)
    if "owner" not in out:
        raise KeyInputError("owner: required (the user id the key acts for)")
    out["limits"] = _budgets(body.get("budgets"))
    out.pop("budgets", None)
    return out


def key_changes(
    key: ApiKey, body: Any, *, teams: Collection[str], tools: Collection[str], now: float
) -> ApiKey:
    """``key`` with the admin API's changes (a PATCH); budgets merge field by field."""
    out = _fields(body, _CHANGE_FIELDS, teams=teams, tools=tools, now=now)
    if "budgets" in body:
        raw = body["budgets"]
        if not isinstance(raw, Mapping):
            raise KeyInputError("budgets: expected an object of limits")
        try:
            out["limits"] = key.limits.merged(raw)
        except BudgetInputError as exc:
            raise KeyInputError(str(exc)) from None
    return replace(key, **out)


def _budgets(raw: Any) -> Limits:
    try:
        return parse_limits(raw)
    except KeyInputError:
        raise
    except BudgetInputError as exc:
        raise KeyInputError(str(exc)) from None
