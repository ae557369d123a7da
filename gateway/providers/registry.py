"""The providers this gateway offers, by name: ``PROVIDERS``, and what is asked of them all.

The built-in records are listed here (``BUILTIN``), with the settings they read
(``ProviderSettings``, which the gateway's ``Settings`` extends). Another provider is one more
record, handed to ``PROVIDERS.register`` (``PROVIDERS.registered`` for a while): from then on
the settings accept its name, ``session.start`` may ask for it, ``/v1/realtime`` picks it by
its model names, and the gateway builds its transport, as for any built-in one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from pydantic_settings import BaseSettings, SettingsConfigDict

from gateway.providers.chat import CHAT, ChatSettings
from gateway.providers.gemini_live import GEMINI, GeminiSettings
from gateway.providers.local import LOCAL, LocalSettings
from gateway.providers.openai_realtime import OPENAI, OpenAISettings
from gateway.providers.record import ProviderRecord
from transports.base import Transport, TransportError

__all__ = [
    "BUILTIN",
    "DEFAULT_PROVIDER",
    "PROVIDERS",
    "ProviderRegistry",
    "ProviderSettings",
    "close_shared_upstream_clients",
    "configured_models",
    "make_transport",
    "provider_lines",
    "warm_up_upstreams",
]


class ProviderSettings(LocalSettings, OpenAISettings, GeminiSettings, ChatSettings, BaseSettings):
    """Every built-in provider's settings (each record's ``settings``), as ``GATEWAY_*``
    variables (and the providers' own ``OPENAI_API_KEY``, ``GEMINI_API_KEY``...)."""

    model_config = SettingsConfigDict(
        env_prefix="GATEWAY_", extra="ignore", case_sensitive=False, populate_by_name=True
    )


Record = ProviderRecord[ProviderSettings]

BUILTIN: tuple[Record, ...] = (OPENAI, GEMINI, CHAT, LOCAL)
# GATEWAY_PROVIDER's default: the embedded model needs no key and no network.
DEFAULT_PROVIDER = LOCAL.name


class ProviderRegistry:
    """Provider records by name, in the order they were registered."""

    def __init__(self, records: Iterable[Record] = ()) -> None:
        self._records: dict[str, Record] = {}
        for record in records:
            self.register(record)

    def register(self, record: Record) -> None:
        """``ValueError`` when its name is taken, or a model name would pick two providers."""
        if record.name in self._records:
            raise ValueError(f"a provider named {record.name!r} is registered already")
        for other in self._records.values():
            shared = record.model_names.overlap(other.model_names)
            if shared is not None:
                raise ValueError(
                    f"provider {record.name!r} answers to model names of {other.name!r} "
                    f"({shared!r}): a name must pick one provider"
                )
        self._records[record.name] = record

    def unregister(self, name: str) -> None:
        if self._records.pop(name, None) is None:
            raise KeyError(name)

    @contextmanager
    def registered(self, record: Record) -> Iterator[Record]:
        """``record`` offered for the duration of the ``with`` block."""
        self.register(record)
        try:
            yield record
        finally:
            self.unregister(record.name)

    def get(self, name: str | None) -> Record | None:
        return None if name is None else self._records.get(name)

    def __getitem__(self, name: str) -> Record:
        return self._records[name]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._records

    def __iter__(self) -> Iterator[Record]:
        return iter(tuple(self._records.values()))

    def __len__(self) -> int:
        return len(self._records)

    def names(self) -> tuple[str, ...]:
        return tuple(self._records)

    def speaking(self) -> tuple[str, ...]:
        """The names of those that speak (what a phone call needs)."""
        return tuple(name for name, record in self._records.items() if record.speaks)

    def for_model(self, model: str) -> Record | None:
        """The provider a ``/v1/realtime`` model name picks; None: the default provider."""
        return next((r for r in self._records.values() if r.model_names.answers(model)), None)


PROVIDERS = ProviderRegistry(BUILTIN)


def make_transport(provider: str, settings: ProviderSettings) -> Transport:
    """The gateway's transport factory: the named provider's transport, not connected."""
    record = PROVIDERS.get(provider)
    if record is None:
        raise TransportError(f"provider '{provider}' is not available in this build")
    return record.transport(settings)


def configured_models(settings: ProviderSettings) -> dict[str, dict[str, str]]:
    """Per provider and mode, the model a session that names none gets."""
    return {record.name: dict(record.default_models(settings)) for record in PROVIDERS}


def warm_up_upstreams(settings: ProviderSettings) -> None:
    """Do now what the first session of each usable provider would otherwise do (imports,
    shared clients), so that it is not billed to that session, nor to the sessions whose turns
    wait behind it on this node's loop (a node restarted under load took 70 ms of one chat turn
    to import the SDK's chat resources), and is frozen with the rest. Usable: its key is set
    (any session may ask for any provider, not only the default one)."""
    for record in PROVIDERS:
        if record.missing(settings) is None:
            record.warm_up(settings)


async def close_shared_upstream_clients() -> None:
    """The app's shutdown hook, after its sessions ended: each provider closes what its
    sessions shared (pooled clients of the running loop)."""
    for record in PROVIDERS:
        await record.close_shared()


def provider_lines() -> list[str]:
    """What ``gateway check`` says of the providers: for each, the modes it serves, its audio
    rates and encodings, the declarations it reads, the model names that pick it and what it
    needs set."""
    width = max(8, *(len(name) for name in PROVIDERS.names()))
    lines = [f"{len(PROVIDERS)} providers"]
    for record in PROVIDERS:
        facts = ["+".join(sorted(record.modes))]
        if record.speaks:
            facts.append(f"{record.input_rate}/{record.output_rate} Hz")
            facts.append("+".join(sorted(record.encodings)))
        if record.dialect is not None:
            facts.append(f"declarations {record.dialect.key}")
        if record.model_names.described():
            facts.append(f"models {', '.join(record.model_names.described())}")
        needed = record.needed()
        if needed is not None:
            facts.append(f"needs {needed}")
        lines.append(f"  {record.name:<{width}} {'  '.join(facts)}")
    return lines
