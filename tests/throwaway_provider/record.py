"""The echo upstream's record: what the gateway knows of it."""

from __future__ import annotations

from gateway.providers import VOICE_AND_TEXT, ModelNames, ProviderRecord, UpstreamSettings
from gateway.registry.provider_schemas import OPENAI_REALTIME
from throwaway_provider.transport import RATE, EchoTransport

__all__ = ["ECHO", "ECHO_MODEL"]

ECHO_MODEL = "echo-1"

ECHO = ProviderRecord(
    name="echo",
    title="the echo upstream",
    settings=UpstreamSettings,
    modes=VOICE_AND_TEXT,
    input_rate=RATE,
    output_rate=RATE,
    dialect=OPENAI_REALTIME,  # the declarations its transport reads (DIALECT_KEY)
    model_names=ModelNames(prefixes=("echo-",)),
    default_models=lambda _: {"voice": ECHO_MODEL, "text": ECHO_MODEL},
    build=lambda _: EchoTransport(),
    genai_name="echo",
)
