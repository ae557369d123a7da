"""What the gateway knows of one provider, in one record: ``ProviderRecord``.

A record says what the rest of the gateway would otherwise have to know by the provider's name:
whether it speaks, its audio rates, the settings it reads and which of them it cannot open
without, the shape of tool declaration its transport reads, the names ``/v1/realtime?model=…``
picks it by, how its spans are labelled, and how it builds its ``Transport`` from the settings.
Pure data and pure functions; building a transport imports the transport's package then.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from pydantic import AliasChoices, BaseModel, Field, SecretStr

from gateway.registry.provider_schemas import DeclarationDialect
from transports.base import AudioEncoding, Mode, Transport, TransportError

__all__ = [
    "VOICE_AND_TEXT",
    "ModelNames",
    "ProviderRecord",
    "UpstreamSettings",
    "secret",
    "variable_name",
]

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")
VOICE_AND_TEXT: frozenset[Mode] = frozenset({"voice", "text"})


class UpstreamSettings(BaseModel):
    """What every upstream shares: opening one (connect + session setup), and recovering a lost
    one. A provider's own settings extend it (``ProviderRecord.settings``)."""

    upstream_connect_timeout_s: float = Field(default=10.0, gt=0)
    upstream_reconnect_attempts: int = Field(default=5, ge=0)
    upstream_reconnect_backoff_s: float = Field(default=0.25, ge=0)


def variable_name(settings: type[BaseModel], field_name: str) -> str:
    """The environment variable of a setting: its own name where it has one
    (``OPENAI_API_KEY``), else ``GATEWAY_`` and the field's name."""
    alias = settings.model_fields[field_name].validation_alias
    if isinstance(alias, AliasChoices):
        for choice in alias.choices:
            if isinstance(choice, str) and choice.isupper():
                return choice
    return f"GATEWAY_{field_name.upper()}"


def secret(value: SecretStr | None, what: str) -> str:
    """A key a builder needs (``ProviderRecord.transport`` checked it is set)."""
    if value is None:
        raise TransportError(f"{what} is not set on the gateway", retryable=False)
    return value.get_secret_value()


@dataclass(frozen=True, slots=True)
class ModelNames:
    """The model names ``/v1/realtime?model=…`` picks this provider by, whatever their case:
    whole names and prefixes. ``passed_on``: such a name is the upstream's own model, asked for
    as the session's model (else the model the gateway configured for the mode serves it)."""

    exact: tuple[str, ...] = ()
    prefixes: tuple[str, ...] = ()
    passed_on: bool = False

    def answers(self, model: str) -> bool:
        name = model.lower()
        return name in self.exact or name.startswith(self.prefixes)

    def described(self) -> tuple[str, ...]:
        """Each as a refusal lists it: ``'local'``, ``'gpt-…'``."""
        return (*(f"'{name}'" for name in self.exact), *(f"'{p}…'" for p in self.prefixes))

    def overlap(self, other: ModelNames) -> str | None:
        """A name both would answer to, or None: a name must pick one provider."""
        for name in self.exact:
            if other.answers(name):
                return name
        for name in other.exact:
            if self.answers(name):
                return name
        for mine in self.prefixes:
            for theirs in other.prefixes:
                if mine.startswith(theirs) or theirs.startswith(mine):
                    return max(mine, theirs, key=len) + "…"
        return None


S = TypeVar("S", bound=BaseModel, contravariant=True)


def _no_warm_up(settings: BaseModel) -> None:
    return None


async def _nothing_to_close() -> None:
    return None


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderRecord(Generic[S]):
    """One provider, as the gateway knows it. ``S``: the settings it reads (``settings``), which
    the gateway's ``Settings`` extends."""

    # What GATEWAY_PROVIDER, GATEWAY_TWILIO_PROVIDER and session.start's ``provider`` name.
    name: str
    # Itself in words, for messages ("OpenAI Realtime").
    title: str
    # Its configuration fields; ``needs``: those of which one must be set (an API key) for it
    # to open, reported as "<VARIABLE> (or <OTHER>) is not set on the gateway".
    settings: type[S]
    needs: tuple[str, ...] = ()
    # The modes it serves (it speaks when voice is one), and its transport's audio rates
    # before a session asks for its own (PCM16 mono, Hz).
    modes: frozenset[Mode]
    input_rate: int
    output_rate: int
    # The encodings it takes as they are: PCM16, and G.711 µ-law and A-law (a phone call's
    # audio, which then passes through untouched both ways) where it takes them.
    encodings: frozenset[AudioEncoding] = frozenset({"pcm16"})
    # The declarations (``providerSchemas``) its transport reads; None: only the tools' names.
    dialect: DeclarationDialect | None
    model_names: ModelNames = ModelNames()
    # Per mode, the model a session that names none gets (the usage metrics' labels).
    default_models: Callable[[S], Mapping[str, str]]
    build: Callable[[S], Transport]
    # What its first session would otherwise do (imports, shared clients), done at start.
    warm_up: Callable[[S], None] = _no_warm_up
    # Closes what its sessions share in the running loop (pooled clients), at the app's shutdown.
    close_shared: Callable[[], Awaitable[None]] = _nothing_to_close
    # ``gen_ai.provider.name`` of its spans (the conventions' well-known value where one applies).
    genai_name: str
    # It runs in the gateway's own process (its model spans are internal, not client calls).
    in_process: bool = False
    # session.start's ``tool_dialect`` values other than native that it honours (the text
    # dialects of a chat model); any other provider uses its native tool calling.
    tool_dialects: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if not NAME_PATTERN.match(self.name):
            raise ValueError(
                f"provider name {self.name!r}: lower-case letters, digits, '_' and '-', "
                "starting with a letter, at most 40"
            )
        if not self.modes or not self.modes <= VOICE_AND_TEXT:
            raise ValueError(f"provider {self.name!r}: modes must be voice and/or text")
        unknown = [need for need in self.needs if need not in self.settings.model_fields]
        if unknown:
            raise ValueError(f"provider {self.name!r} needs settings it does not have: {unknown}")

    @property
    def speaks(self) -> bool:
        return "voice" in self.modes

    def needed(self) -> str | None:
        """The variables of which one must be set, in words (``OPENAI_API_KEY``,
        ``GATEWAY_CHAT_API_KEY (or OPENAI_API_KEY)``); None: it needs nothing."""
        if not self.needs:
            return None
        first, *others = (variable_name(self.settings, need) for need in self.needs)
        return f"{first} (or {', '.join(others)})" if others else first

    def missing(self, settings: S) -> str | None:
        """What must be set before this provider can open, or None when it can."""
        if any(getattr(settings, need) is not None for need in self.needs):
            return None
        return self.needed()

    def transport(self, settings: S) -> Transport:
        """Its transport, not connected; ``TransportError`` naming what is not set."""
        missing = self.missing(settings)
        if missing is not None:
            raise TransportError(f"{missing} is not set on the gateway", retryable=False)
        return self.build(settings)
