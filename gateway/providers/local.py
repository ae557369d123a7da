"""The embedded local model (``transports/local``): no network, no key, deterministic."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

from gateway.providers.record import VOICE_AND_TEXT, ModelNames, ProviderRecord
from transports.base import Transport

__all__ = ["LOCAL", "LocalSettings"]


class LocalSettings(BaseModel):
    # 1.0 speaks in real time, 0 as fast as possible.
    local_pace: float = 1.0
    local_scenario: Path | None = None


def _transport(settings: LocalSettings) -> Transport:
    from transports.local import LocalBrain, LocalTransport

    brain = (
        LocalBrain.from_scenario(settings.local_scenario)
        if settings.local_scenario
        else LocalBrain()
    )
    return LocalTransport(brain, pace=settings.local_pace)


LOCAL = ProviderRecord(
    name="local",
    title="the gateway's embedded model",
    settings=LocalSettings,
    modes=VOICE_AND_TEXT,
    input_rate=16000,
    output_rate=24000,
    dialect=None,  # it calls tools by name, from its scenario
    model_names=ModelNames(exact=("local",)),
    default_models=lambda _: {"voice": "local", "text": "local"},
    build=_transport,
    genai_name="gateway.local",  # the conventions know no such model: a value of our own
    in_process=True,
)
