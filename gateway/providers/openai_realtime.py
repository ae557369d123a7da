"""OpenAI Realtime (``transports/openai_realtime``), voice and text over one WebSocket."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import AliasChoices, Field, SecretStr

from gateway.providers.record import (
    VOICE_AND_TEXT,
    ModelNames,
    ProviderRecord,
    UpstreamSettings,
    secret,
)
from gateway.registry.provider_schemas import OPENAI_REALTIME
from transports.base import Transport

if TYPE_CHECKING:
    from transports.openai_realtime import RealtimeOptions

__all__ = ["OPENAI", "OpenAIKey", "OpenAISettings", "realtime_options"]


class OpenAIKey(UpstreamSettings):
    openai_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("OPENAI_API_KEY", "openai_api_key")
    )


class OpenAISettings(OpenAIKey):
    openai_ws_url: str | None = None
    openai_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("OPENAI_BASE_URL", "openai_base_url")
    )
    openai_model: str = "gpt-realtime"


def realtime_options(settings: OpenAISettings) -> RealtimeOptions:
    from transports.openai_realtime import RealtimeOptions

    return RealtimeOptions(
        api_key=secret(settings.openai_api_key, "OPENAI_API_KEY"),
        model=settings.openai_model,
        ws_url=settings.openai_ws_url,
        base_url=settings.openai_base_url,
        connect_timeout_s=settings.upstream_connect_timeout_s,
        reconnect_attempts=settings.upstream_reconnect_attempts,
        reconnect_initial_s=settings.upstream_reconnect_backoff_s,
    )


def _transport(settings: OpenAISettings) -> Transport:
    from transports.openai_realtime import OpenAIRealtimeTransport

    return OpenAIRealtimeTransport(realtime_options(settings))


def _warm_up(settings: OpenAISettings) -> None:
    """The SDK client every session shares, built now rather than in the first session."""
    if settings.openai_api_key is not None:
        from transports.openai_realtime import warm_up

        warm_up(realtime_options(settings))


OPENAI = ProviderRecord(
    name="openai",
    title="OpenAI Realtime",
    settings=OpenAISettings,
    needs=("openai_api_key",),
    modes=VOICE_AND_TEXT,
    input_rate=24000,
    output_rate=24000,
    encodings=frozenset({"pcm16", "pcmu", "pcma"}),
    dialect=OPENAI_REALTIME,
    model_names=ModelNames(prefixes=("gpt-",), passed_on=True),
    default_models=lambda s: {"voice": s.openai_model, "text": s.openai_model},
    build=_transport,
    warm_up=_warm_up,
    genai_name="openai",
)
