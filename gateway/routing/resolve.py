"""Which targets serve a session: the alias a client's model name resolves to, and the order one
session tries its targets in. Pure.

Without a catalog (no ``GATEWAY_MODELS``) a session has one target, the provider and model it
asked for, as before aliases existed. With one, a model name must name an alias (none: the
catalog's default); a provider asked for as well goes first among the alias's targets.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from gateway.routing.aliases import Alias, ModelCatalog, Target

__all__ = [
    "NoSuchModel",
    "Route",
    "first_target",
    "key_allows_alias",
    "key_allows_model",
    "pick_alias",
    "route_of",
]


class NoSuchModel(Exception):
    """The name resolves to nothing this caller may use: the message says what exists.
    ``forbidden``: it exists, but not for this caller."""

    def __init__(self, message: str, *, forbidden: bool = False) -> None:
        super().__init__(message)
        self.forbidden = forbidden


@dataclass(frozen=True, slots=True)
class Route:
    """The targets one session may be served by, in the order it tries them (the first is the
    one it starts on, or the one it is on)."""

    alias: str | None
    targets: tuple[Target, ...]

    @property
    def fails_over(self) -> bool:
        return len(self.targets) > 1

    def after(self, target: Target) -> tuple[Target, ...]:
        """What is left to try once ``target`` failed: the targets after it, then those before
        (a session that failed over once may come back to its first target)."""
        index = next((i for i, t in enumerate(self.targets) if t.key == target.key), -1)
        return self.targets[index + 1 :] + self.targets[:index] if index >= 0 else self.targets


def pick_alias(
    catalog: ModelCatalog,
    model: str | None,
    provider: str | None,
    roles: Collection[str],
    key_models: tuple[str, ...] | None,
) -> Alias | None:
    """The alias ``model`` names (None: the default) for a caller with ``roles`` and a key
    limited to ``key_models`` (None: any); ``NoSuchModel`` when it names none, or one this
    caller may not use. None when the client named a provider and no model, and the default
    alias is not one it may use with that provider: the session then has that one provider,
    as without a catalog (the key's models are checked for it as for any provider)."""
    name = catalog.default if model is None else model
    alias = catalog.get(name)
    if model is None and provider is not None and alias is not None:
        usable = alias.allowed_for(roles) and key_allows_alias(key_models, alias)
        if not usable or all(t.provider != provider for t in alias.targets):
            return None
    if alias is None:
        raise NoSuchModel(
            f"model: no model named {model!r}; this gateway serves "
            f"{_listed(_usable(catalog, roles, key_models))}"
        )
    if not alias.allowed_for(roles) or not key_allows_alias(key_models, alias):
        raise NoSuchModel(
            f"model: {name!r} is not available to this caller; it may use "
            f"{_listed(_usable(catalog, roles, key_models))}",
            forbidden=True,
        )
    if provider is not None and all(t.provider != provider for t in alias.targets):
        if model is None:
            return None  # a provider asked for by name, outside the default alias
        providers = sorted({t.provider for t in alias.targets})
        raise NoSuchModel(
            f"provider: {provider!r} does not serve model {name!r} (served by "
            f"{', '.join(providers)})"
        )
    return alias


def route_of(
    alias: Alias | None,
    *,
    session_id: str,
    current: Target,
) -> Route:
    """The session's route: ``current`` first (the target it starts or runs on), then the
    alias's other targets in the order the alias gives this session."""
    if alias is None:
        return Route(None, (current,))
    rest = tuple(t for t in alias.order(session_id) if t.key != current.key)
    return Route(alias.name, (current, *rest))


def first_target(alias: Alias, session_id: str, provider: str | None, voice: str | None) -> Target:
    """The target a new session starts on: the first of the alias's order for it (of the
    provider it asked for, if any), with the voice it asked for unless the target sets one."""
    order: Sequence[Target] = alias.order(session_id)
    if provider is not None:
        order = [t for t in order if t.provider == provider]
    target = order[0]
    if target.voice is None and voice is not None:
        return dataclasses.replace(target, voice=voice)
    return target


def key_allows_model(allowed: tuple[str, ...], provider: str, model: str) -> bool:
    """``model``, ``provider/model`` or ``provider/*`` on the key's list."""
    return bool({model, f"{provider}/{model}", f"{provider}/*"} & set(allowed))


def key_allows_alias(key_models: tuple[str, ...] | None, alias: Alias) -> bool:
    """A key limited to models may use an alias it names, or one whose every target it
    allows (``provider/model``, ``provider/*`` or the bare model)."""
    if key_models is None or alias.name in key_models:
        return True
    return all(key_allows_model(key_models, t.provider, t.model or "*") for t in alias.targets)


def _usable(
    catalog: ModelCatalog, roles: Collection[str], key_models: tuple[str, ...] | None
) -> list[str]:
    return [a.name for a in catalog.visible_to(roles) if key_allows_alias(key_models, a)]


def _listed(names: list[str]) -> str:
    return ", ".join(repr(n) for n in names) if names else "no model to this caller"
