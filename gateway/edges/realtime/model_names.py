"""Which upstream ``/v1/realtime?model=…`` names, and whether this gateway can serve it.

``model`` picks the upstream by the names each provider's record answers to
(``ProviderRecord.model_names``: ``gpt-…`` OpenAI Realtime, ``gemini-…`` Gemini Live,
``local`` the embedded model, as built); any other name the gateway's default provider. An
upstream is served when the gateway has what its record needs (its API key; the embedded model
needs nothing). A name whose upstream is not served is refused at once, before
``session.created``, with OpenAI's ``model_not_found`` error listing the names this gateway
serves as configured, rather than with what the upstream's start would have said (a missing key)
at the client's first audio. Pure.
"""

from __future__ import annotations

from gateway.config import Settings
from gateway.providers import PROVIDERS, ProviderRecord, ProviderSettings
from gateway.routing import ModelCatalog, NoSuchModel, pick_alias

from .errors import CompatError

__all__ = ["alias_refusal", "model_refusal", "provider_for_model", "served_models"]


def provider_for_model(model: str) -> str | None:
    """The provider a model name asks for; None: the gateway's default provider."""
    record = PROVIDERS.for_model(model)
    return None if record is None else record.name


def _configured(record: ProviderRecord[ProviderSettings], settings: Settings) -> bool:
    """The gateway can open this upstream (what its record needs is set)."""
    return record.missing(settings) is None


def served_models(settings: Settings) -> list[str]:
    """The names this gateway serves, as configured, each with its upstream."""
    served = [
        f"{name} ({record.title})"
        for record in PROVIDERS
        if _configured(record, settings)
        for name in record.model_names.described()
    ]
    default = PROVIDERS[settings.provider]
    if _configured(default, settings):
        served.append(f"any other name (the default provider, {default.title})")
    return served


def model_refusal(model: str, settings: Settings) -> CompatError | None:
    """None when this gateway serves ``model``; else the ``error`` that says which it does."""
    asked = PROVIDERS.for_model(model)
    record = asked if asked is not None else PROVIDERS[settings.provider]
    if _configured(record, settings):
        return None
    reason = (
        f"{record.title} is not configured on this gateway"
        if asked is not None
        else f"its default provider ({record.title}) is not configured"
    )
    served = _listed(served_models(settings))  # never empty: the embedded model needs nothing
    return CompatError(
        "model_not_found",
        f"The model '{model}' is not served by this gateway: {reason}. It serves {served}.",
        param="model",
    )


def alias_refusal(
    model: str, catalog: ModelCatalog, roles: tuple[str, ...], key_models: tuple[str, ...] | None
) -> CompatError | None:
    """With the operator's model aliases, ``model`` must name one this caller may use: None
    when it does; else OpenAI's ``model_not_found`` naming those it may."""
    try:
        pick_alias(catalog, model, None, roles, key_models)
    except NoSuchModel as refused:
        return CompatError("model_not_found", str(refused), param="model")
    return None


def _listed(described: list[str]) -> str:
    """``a``, ``a and b``, ``a, b, and c``, as OpenAI lists what it supports."""
    if len(described) <= 2:
        return " and ".join(described)
    return ", ".join(described[:-1]) + ", and " + described[-1]
