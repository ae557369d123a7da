"""Model aliases: the names clients use, each mapped by the operator to an ordered list of
upstream targets (``GATEWAY_MODELS``, a TOML or JSON file; docs/routing.md).

Pure: ``parse_catalog`` checks a loaded document completely and returns an immutable
``ModelCatalog``; ``load_catalog`` reads the file. ``Route.order`` says in which order one
session tries the targets: the alias's weighted targets spread new sessions in proportion to
their weights (deterministically by session id), then the rest follow in the file's order.
"""

from __future__ import annotations

import hashlib
import json
import re
import tomllib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gateway.errors import ConfigError

__all__ = [
    "Alias",
    "CatalogError",
    "ModelCatalog",
    "Target",
    "catalog_lines",
    "load_catalog",
    "parse_catalog",
    "spread_order",
]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$")
# Weights are shares: a bound keeps their sum finite (an infinite one would pick wrongly).
MAX_WEIGHT = 1e6
_TARGET_FIELDS = frozenset({"provider", "model", "voice", "weight", "pool"})
MAX_POOL = 16  # warm connections one node keeps open for one target, at most
_ALIAS_FIELDS = frozenset({"targets", "roles", "description"})


class CatalogError(ConfigError):
    """The model file cannot be used: the message names the file's field that is wrong."""


@dataclass(frozen=True, slots=True)
class Target:
    """One upstream an alias may be served by: a provider of this build, the model it is asked
    for (None: the provider's configured model for the mode) and the voice."""

    provider: str
    model: str | None = None
    voice: str | None = None
    weight: float | None = None  # set: the target shares new sessions in proportion
    pool: int | None = None  # warm connections kept for it (None: GATEWAY_POOL_SIZE)

    @property
    def key(self) -> str:
        """The breaker's name for it: ``provider/model`` (``provider/*`` for its default)."""
        return f"{self.provider}/{self.model or '*'}"

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"provider": self.provider}
        if self.model is not None:
            data["model"] = self.model
        if self.voice is not None:
            data["voice"] = self.voice
        return data


@dataclass(frozen=True, slots=True)
class Alias:
    name: str
    targets: tuple[Target, ...]
    roles: frozenset[str] | None = None  # None: any caller; else one of these roles
    description: str = ""

    def allowed_for(self, roles: Collection[str]) -> bool:
        return self.roles is None or bool(self.roles & set(roles))

    def order(self, session_id: str) -> tuple[Target, ...]:
        return spread_order(self.targets, session_id)


def spread_order(targets: Sequence[Target], session_id: str) -> tuple[Target, ...]:
    """The order one session tries ``targets`` in: a weighted target picked by the session id's
    hash in proportion to the weights, then every other target in the file's order."""
    weighted = [t for t in targets if t.weight is not None]
    if not weighted:
        return tuple(targets)
    total = sum(t.weight or 0.0 for t in weighted)
    digest = hashlib.sha256(session_id.encode()).digest()
    point = int.from_bytes(digest[:8], "big") / 2**64 * total
    picked = weighted[-1]
    for target in weighted:
        point -= target.weight or 0.0
        if point < 0:
            picked = target
            break
    return (picked, *(t for t in targets if t is not picked))


@dataclass(frozen=True, slots=True)
class ModelCatalog:
    aliases: Mapping[str, Alias]
    default: str
    source: str = ""  # the file it came from, for messages

    def get(self, name: str) -> Alias | None:
        return self.aliases.get(name)

    def names(self) -> tuple[str, ...]:
        return tuple(self.aliases)

    def visible_to(self, roles: Collection[str]) -> tuple[Alias, ...]:
        return tuple(a for a in self.aliases.values() if a.allowed_for(roles))


def catalog_lines(catalog: ModelCatalog) -> list[str]:
    """What ``gateway check`` says of the alias file: each alias, its roles and its targets."""
    lines = [f"{len(catalog.aliases)} models (default {catalog.default!r}) from {catalog.source}"]
    for alias in catalog.aliases.values():
        roles = "" if alias.roles is None else f" roles={','.join(sorted(alias.roles))}"
        targets = " → ".join(
            t.key + ("" if t.weight is None else f" weight {t.weight:g}") for t in alias.targets
        )
        lines.append(f"  {alias.name}{roles}: {targets}")
    return lines


def load_catalog(path: Path, providers: Collection[str]) -> ModelCatalog:
    """The catalog in ``path`` (``.toml``, else JSON), checked against this build's
    ``providers``; ``CatalogError`` says what is wrong."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CatalogError(f"GATEWAY_MODELS: cannot read {path}: {exc.strerror}") from None
    try:
        if path.suffix.lower() == ".toml":
            document: object = tomllib.loads(raw.decode())
        else:
            document = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise CatalogError(f"GATEWAY_MODELS: {path} is not valid: {exc}") from None
    return parse_catalog(document, providers, source=str(path))


def parse_catalog(
    document: object, providers: Collection[str], *, source: str = "GATEWAY_MODELS"
) -> ModelCatalog:
    """``{"default": name, "models": {name: {"targets": [...], "roles": [...]}}}``."""
    if not isinstance(document, Mapping):
        raise CatalogError(f"{source}: the document must be a table of 'default' and 'models'")
    unknown = set(document) - {"default", "models"}
    if unknown:
        raise CatalogError(f"{source}: unknown field {sorted(unknown)[0]!r}")
    models = document.get("models")
    if not isinstance(models, Mapping) or not models:
        raise CatalogError(f"{source}: 'models' must name at least one model")
    aliases = {
        name: _alias(name, entry, providers, f"{source}: models.{name}")
        for name, entry in models.items()
    }
    default = document.get("default", next(iter(aliases)))
    if not isinstance(default, str) or default not in aliases:
        raise CatalogError(
            f"{source}: 'default' must name one of the models ({', '.join(aliases)})"
        )
    return ModelCatalog(aliases=aliases, default=default, source=source)


def _alias(name: object, entry: object, providers: Collection[str], at: str) -> Alias:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise CatalogError(
            f"{at}: a model name is 1-128 letters, digits and . _ : / - (starting with a "
            "letter or digit)"
        )
    if not isinstance(entry, Mapping):
        raise CatalogError(f"{at}: must be a table with 'targets'")
    unknown = set(entry) - _ALIAS_FIELDS
    if unknown:
        raise CatalogError(f"{at}: unknown field {sorted(unknown)[0]!r}")
    targets = entry.get("targets")
    if not isinstance(targets, list) or not targets:
        raise CatalogError(f"{at}.targets: must list at least one target")
    parsed = tuple(_target(raw, providers, f"{at}.targets[{i}]") for i, raw in enumerate(targets))
    if len({t.key for t in parsed}) != len(parsed):
        raise CatalogError(f"{at}.targets: a target is listed twice")
    roles = entry.get("roles")
    if roles is not None and (
        not isinstance(roles, list) or not roles or not all(isinstance(r, str) for r in roles)
    ):
        raise CatalogError(f"{at}.roles: must be a non-empty list of role names")
    description = entry.get("description", "")
    if not isinstance(description, str):
        raise CatalogError(f"{at}.description: must be a string")
    return Alias(
        name=name,
        targets=parsed,
        roles=None if roles is None else frozenset(roles),
        description=description,
    )


def _target(raw: object, providers: Collection[str], at: str) -> Target:
    if not isinstance(raw, Mapping):
        raise CatalogError(f"{at}: must be a table with 'provider'")
    unknown = set(raw) - _TARGET_FIELDS
    if unknown:
        raise CatalogError(f"{at}: unknown field {sorted(unknown)[0]!r}")
    provider = raw.get("provider")
    if not isinstance(provider, str) or provider not in providers:
        raise CatalogError(
            f"{at}.provider: {provider!r} is not a provider of this build "
            f"({', '.join(sorted(providers))})"
        )
    model, voice = raw.get("model"), raw.get("voice")
    for field, value in (("model", model), ("voice", voice)):
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise CatalogError(f"{at}.{field}: must be a non-empty string")
    weight = raw.get("weight")
    if weight is not None and (
        isinstance(weight, bool)
        or not isinstance(weight, int | float)
        or not 0 < weight <= MAX_WEIGHT
    ):
        raise CatalogError(f"{at}.weight: must be a number above 0, at most {MAX_WEIGHT:g}")
    pool = raw.get("pool")
    if pool is not None and (
        isinstance(pool, bool) or not isinstance(pool, int) or not 0 <= pool <= MAX_POOL
    ):
        raise CatalogError(f"{at}.pool: must be a whole number from 0 to {MAX_POOL}")
    return Target(
        provider=provider,
        model=model,
        voice=voice,
        weight=None if weight is None else float(weight),
        pool=pool,
    )
