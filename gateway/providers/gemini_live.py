"""Gemini Live (``transports/gemini_live``), through google-genai: voice and text."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import AliasChoices, Field, SecretStr

from gateway.providers.record import (
    VOICE_AND_TEXT,
    ModelNames,
    ProviderRecord,
    UpstreamSettings,
    secret,
)
from gateway.registry.provider_schemas import GEMINI as GEMINI_DECLARATIONS
from transports.base import Transport

if TYPE_CHECKING:
    from transports.gemini_live import GeminiOptions

__all__ = ["GEMINI", "GeminiSettings"]


class GeminiSettings(UpstreamSettings):
    gemini_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("GEMINI_API_KEY", "gemini_api_key")
    )
    gemini_base_url: str | None = None
    gemini_ca_file: Path | None = None
    gemini_model: str = "gemini-2.5-flash-native-audio-preview-09-2025"
    gemini_text_model: str = "gemini-live-2.5-flash-preview"
    gemini_api_version: str = "v1beta"


def _options(settings: GeminiSettings) -> GeminiOptions:
    from transports.gemini_live import GeminiOptions

    return GeminiOptions(
        api_key=secret(settings.gemini_api_key, "GEMINI_API_KEY"),
        voice_model=settings.gemini_model,
        text_model=settings.gemini_text_model,
        base_url=settings.gemini_base_url,
        ca_file=None if settings.gemini_ca_file is None else str(settings.gemini_ca_file),
        api_version=settings.gemini_api_version,
        connect_timeout_s=settings.upstream_connect_timeout_s,
        reconnect_attempts=settings.upstream_reconnect_attempts,
        reconnect_initial_s=settings.upstream_reconnect_backoff_s,
    )


def _transport(settings: GeminiSettings) -> Transport:
    from transports.gemini_live import GeminiLiveTransport

    return GeminiLiveTransport(_options(settings))


def _warm_up(settings: GeminiSettings) -> None:
    """The client every session shares, built now rather than in a node's first session."""
    from transports.gemini_live.transport import warm_up

    warm_up(_options(settings))


GEMINI = ProviderRecord(
    name="gemini",
    title="Gemini Live",
    settings=GeminiSettings,
    needs=("gemini_api_key",),
    modes=VOICE_AND_TEXT,
    input_rate=16000,
    output_rate=24000,
    dialect=GEMINI_DECLARATIONS,
    # A gemini-… name picks Gemini, whose model is then the one configured for the mode (its
    # voice and text models differ).
    model_names=ModelNames(prefixes=("gemini-",)),
    default_models=lambda s: {"voice": s.gemini_model, "text": s.gemini_text_model},
    build=_transport,
    warm_up=_warm_up,
    genai_name="gcp.gemini",
)
