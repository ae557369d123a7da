"""The upstream providers this build offers: one entry per provider, picked by name.

Adding a provider is: a folder under ``transports/`` with a ``Transport``, an entry here, its name
in ``Settings.provider`` and in the protocol's ``Provider`` enum. ``tests/test_providers.py``
fails until all four agree, and ``tests/contract/`` until the transport passes the shared suite.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from gateway.config import Settings
from transports.base import Transport, TransportError

if TYPE_CHECKING:
    from transports.openai_realtime import RealtimeOptions

__all__ = [
    "PROVIDERS",
    "configured_models",
    "make_transport",
    "realtime_options",
    "warm_up_upstreams",
]

TransportBuilder = Callable[[Settings], Transport]


def _local(settings: Settings) -> Transport:
    from transports.local import LocalBrain, LocalTransport

    brain = (
        LocalBrain.from_scenario(settings.local_scenario)
        if settings.local_scenario
        else LocalBrain()
    )
    return LocalTransport(brain, pace=settings.local_pace)


def realtime_options(settings: Settings) -> RealtimeOptions:
    from transports.openai_realtime import RealtimeOptions

    if settings.openai_api_key is None:
        raise TransportError("OPENAI_API_KEY is not set on the gateway", retryable=False)
    return RealtimeOptions(
        api_key=settings.openai_api_key.get_secret_value(),
        model=settings.openai_model,
        ws_url=settings.openai_ws_url,
        base_url=settings.openai_base_url,
        connect_timeout_s=settings.upstream_connect_timeout_s,
        reconnect_attempts=settings.upstream_reconnect_attempts,
        reconnect_initial_s=settings.upstream_reconnect_backoff_s,
    )


def _openai(settings: Settings) -> Transport:
    from transports.openai_realtime import OpenAIRealtimeTransport

    return OpenAIRealtimeTransport(realtime_options(settings))


def _gemini(settings: Settings) -> Transport:
    from transports.gemini_live import GeminiLiveTransport, GeminiOptions

    if settings.gemini_api_key is None:
        raise TransportError("GEMINI_API_KEY is not set on the gateway", retryable=False)
    return GeminiLiveTransport(
        GeminiOptions(
            api_key=settings.gemini_api_key.get_secret_value(),
            voice_model=settings.gemini_model,
            text_model=settings.gemini_text_model,
            base_url=settings.gemini_base_url,
            ca_file=None if settings.gemini_ca_file is None else str(settings.gemini_ca_file),
            api_version=settings.gemini_api_version,
            connect_timeout_s=settings.upstream_connect_timeout_s,
            reconnect_attempts=settings.upstream_reconnect_attempts,
            reconnect_initial_s=settings.upstream_reconnect_backoff_s,
        )
    )


def _chat(settings: Settings) -> Transport:
    from transports.chat import ChatOptions, ChatTransport

    key = settings.chat_api_key or settings.openai_api_key
    if key is None:
        raise TransportError(
            "GATEWAY_CHAT_API_KEY (or OPENAI_API_KEY) is not set on the gateway",
            retryable=False,
        )
    return ChatTransport(
        ChatOptions(
            api_key=key.get_secret_value(),
            model=settings.chat_model,
            base_url=settings.chat_base_url,
            max_rounds=settings.chat_max_rounds,
            history_tokens=settings.chat_history_tokens,
            timeout_s=settings.chat_timeout_s,
            max_retries=settings.chat_max_retries,
        )
    )


# Imports stay inside the builders: a gateway that never opens Gemini never imports its SDK.
PROVIDERS: Mapping[str, TransportBuilder] = {
    "local": _local,
    "openai": _openai,
    "gemini": _gemini,
    "chat": _chat,
}


def configured_models(settings: Settings) -> dict[str, dict[str, str]]:
    """Per provider and mode, the model a session that names none gets."""
    return {
        "local": {"voice": "local", "text": "local"},
        "openai": {"voice": settings.openai_model, "text": settings.openai_model},
        "gemini": {"voice": settings.gemini_model, "text": settings.gemini_text_model},
        "chat": {"voice": settings.chat_model, "text": settings.chat_model},
    }


def make_transport(provider: str, settings: Settings) -> Transport:
    builder = PROVIDERS.get(provider)
    if builder is None:
        raise TransportError(f"provider '{provider}' is not available in this build")
    return builder(settings)


def warm_up_upstreams(settings: Settings) -> None:
    """Do now what the first session of a provider would otherwise do (imports, shared
    clients), so that it is not billed to that session and is frozen with the rest."""
    providers = {settings.provider, settings.twilio_provider or settings.provider}
    if "openai" in providers and settings.openai_api_key is not None:
        from transports.openai_realtime import warm_up

        warm_up(realtime_options(settings))
