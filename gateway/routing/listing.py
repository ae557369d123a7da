"""``GET /v1/models``: the models a caller may ask for, in OpenAI's list shape. Pure.

With the operator's aliases: the aliases the caller's roles and key may use. Without: the
model each configured provider serves per mode (what a session naming none gets)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from gateway.routing.aliases import ModelCatalog
from gateway.routing.resolve import key_allows_alias, key_allows_model

__all__ = ["models_listing"]


def models_listing(
    catalog: ModelCatalog | None,
    *,
    roles: Collection[str],
    key_models: tuple[str, ...] | None,
    configured: Mapping[str, Mapping[str, str]],
) -> dict[str, Any]:
    """``configured``: per usable provider, its model per mode."""
    if catalog is not None:
        names = [
            (alias.name, "gateway")
            for alias in catalog.visible_to(roles)
            if key_allows_alias(key_models, alias)
        ]
    else:
        names = []
        for provider, models in configured.items():
            for model in dict.fromkeys(models.values()):
                if key_models is None or key_allows_model(key_models, provider, model):
                    names.append((model, provider))
    return {
        "object": "list",
        "data": [
            {"id": name, "object": "model", "created": 0, "owned_by": owner}
            for name, owner in names
        ],
    }
