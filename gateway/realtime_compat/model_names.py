"""Which upstream ``/v1/realtime?model=…`` names, and whether this gateway can serve it.

``model`` picks the upstream: ``gpt-…`` OpenAI Realtime, ``gemini-…`` Gemini Live, ``local``
the embedded model; any other name the gateway's default provider. An upstream is served when
the gateway has what it needs to open it (its API key; the embedded model needs nothing). A
name whose upstream is not served is refused at once, before ``session.created``, with
OpenAI's ``model_not_found`` error listing the names this gateway serves as configured, rather
than with what the upstream's start would have said (a missing key) at the client's first
audio. Pure.
"""

from __future__ import annotations

from gateway.config import Settings
from gateway.protocol import Provider

from .errors import CompatError

__all__ = ["model_refusal", "provider_for_model", "served_models"]

_TITLES = {
    Provider.OPENAI: "OpenAI Realtime",
    Provider.GEMINI: "Gemini Live",
    Provider.LOCAL: "the gateway's embedded model",
    Provider.CHAT: "a chat-completions model",
}
# The names that pick an upstream themselves (any other name goes to the default provider).
_NAMED = ((Provider.OPENAI, "gpt-…"), (Provider.GEMINI, "gemini-…"), (Provider.LOCAL, "local"))


def provider_for_model(model: str) -> Provider | None:
    """The upstream a model name asks for; None: the gateway's default provider."""
    name = model.lower()
    if name.startswith("gpt-"):
        return Provider.OPENAI
    if name.startswith("gemini-"):
        return Provider.GEMINI
    if name == "local":
        return Provider.LOCAL
    return None


def _configured(provider: Provider, settings: Settings) -> bool:
    """The gateway can open this upstream (what ``gateway.providers`` needs is set)."""
    if provider is Provider.OPENAI:
        return settings.openai_api_key is not None
    if provider is Provider.GEMINI:
        return settings.gemini_api_key is not None
    if provider is Provider.CHAT:
        return settings.chat_api_key is not None or settings.openai_api_key is not None
    return True  # the embedded model


def served_models(settings: Settings) -> list[str]:
    """The names this gateway serves, as configured, each with its upstream."""
    served = [
        f"'{name}' ({_TITLES[provider]})"
        for provider, name in _NAMED
        if _configured(provider, settings)
    ]
    default = Provider(settings.provider)
    if _configured(default, settings):
        served.append(f"any other name (the default provider, {_TITLES[default]})")
    return served


def model_refusal(model: str, settings: Settings) -> CompatError | None:
    """None when this gateway serves ``model``; else the ``error`` that says which it does."""
    asked = provider_for_model(model)
    provider = asked if asked is not None else Provider(settings.provider)
    if _configured(provider, settings):
        return None
    reason = (
        f"{_TITLES[provider]} is not configured on this gateway"
        if asked is not None
        else f"its default provider ({_TITLES[provider]}) is not configured"
    )
    served = _listed(served_models(settings))  # never empty: the embedded model needs nothing
    return CompatError(
        "model_not_found",
        f"The model '{model}' is not served by this gateway: {reason}. It serves {served}.",
        param="model",
    )


def _listed(described: list[str]) -> str:
    """``a``, ``a and b``, ``a, b, and c``, as OpenAI lists what it supports."""
    if len(described) <= 2:
        return " and ".join(described)
    return ", ".join(described[:-1]) + ", and " + described[-1]
