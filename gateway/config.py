"""Typed settings from the environment; every name has a sane default (docs/configuration.md).

Loaded once in the composition root and passed down; nothing else reads the environment.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Annotated, Literal

from pydantic import (
    AliasChoices,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from gateway.carrier_settings import CarrierSettings
from gateway.errors import ConfigError
from gateway.providers import DEFAULT_PROVIDER, PROVIDERS, ProviderSettings
from gateway.rtc_settings import RtcSettings
from gateway.security.addresses import parse_networks
from gateway.toolrun import ModeBudget

__all__ = ["RegistryLocation", "Settings", "describe_invalid_settings", "is_loopback"]

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_REGISTRY = Path("build/tool_registry.json")


def resolve_registry(path: Path) -> Path:
    """A relative path is tried from the working directory, then from the project root."""
    if path.is_absolute() or path.exists():
        return path
    beside_project = PROJECT_ROOT / path
    return beside_project if beside_project.exists() else path


class RegistryLocation(BaseSettings):
    """``GATEWAY_REGISTRY`` alone: what ``gateway check`` reads. It only lists the registry, so
    no other setting (an auth secret, a port) may stop it."""

    model_config = SettingsConfigDict(env_prefix="GATEWAY_", extra="ignore", case_sensitive=False)

    registry: Path = DEFAULT_REGISTRY

    def path(self) -> Path:
        return resolve_registry(self.registry)

    @classmethod
    def load(cls) -> RegistryLocation:
        try:
            return cls()
        except ValidationError as exc:
            raise ConfigError(describe_invalid_settings(exc)) from None


def _phone(name: str) -> AliasChoices:
    """A phone setting's names: ``phone_<name>``, then ``twilio_<name>`` (its name before there
    were other carriers), as fields and as ``GATEWAY_`` variables."""
    return AliasChoices(
        f"phone_{name}",
        f"GATEWAY_PHONE_{name.upper()}",
        f"twilio_{name}",
        f"GATEWAY_TWILIO_{name.upper()}",
    )


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Settings(ProviderSettings, CarrierSettings, RtcSettings):
    """The gateway's settings. Each upstream's own (its provider record's ``settings``: keys,
    models, endpoints, timeouts) come with ``ProviderSettings``, each phone carrier's with
    ``CarrierSettings``, WebRTC's network with ``RtcSettings``."""

    model_config = SettingsConfigDict(
        env_prefix="GATEWAY_", extra="ignore", case_sensitive=False, populate_by_name=True
    )

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    # A provider of this build (gateway.providers.PROVIDERS).
    provider: str = DEFAULT_PROVIDER
    auth: Literal["jwt", "none"] = "jwt"
    auth_secret: SecretStr | None = None
    allowed_origins: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # With auth off: the roles of the anonymous local user (none unless granted here).
    anonymous_roles: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # Proxies (addresses or networks) whose X-Forwarded-For names the client.
    trusted_proxies: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # A connection must send a whole request header within this (also the keep-alive idle).
    http_header_timeout_s: float = Field(default=10.0, gt=0)
    # The longest lifetime (exp - iat) a token may have.
    token_max_lifetime_s: float = Field(default=86400.0, gt=0)
    # /metrics: a bearer token it requires, and/or a listen address of its own.
    metrics_token: SecretStr | None = None
    metrics_host: str | None = None
    metrics_port: int | None = Field(default=None, ge=0, le=65535)
    registry: Path = DEFAULT_REGISTRY
    data_dir: Path = Path.home() / ".local" / "share" / "realtime-gateway"
    # Several nodes: the shared store (redis:// or rediss://; a password in the URL is a secret).
    redis_url: SecretStr | None = None
    redis_prefix: str = Field(default="gw", pattern=r"^[A-Za-z0-9_.:-]{1,40}$")
    # Each node's id in the cluster (default: host, pid and a random suffix).
    node_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9_.:-]{1,80}$")
    # A node whose heartbeat is this old is dead: its sessions can be taken over.
    lease_ttl_s: float = Field(default=10.0, ge=0.5)
    # A socket operation on the shared store waits this long; a call (one retry) at most twice
    # this, then the store counts as unavailable.
    store_timeout_s: float = Field(default=1.0, gt=0)
    # Connections of this node to Redis: at most this many (a call waits for a free one up to
    # the store timeout); those idle this long are closed, but the two used last
    # (gateway/store/redis_pool.py keeps the same defaults).
    redis_max_connections: int = Field(default=32, ge=2, le=10000)
    redis_idle_s: float = Field(default=30.0, gt=0)
    # Open sessions per user across every node (0: no cap).
    max_sessions_per_user: int = Field(default=0, ge=0)
    # Worker processes of `gateway serve` on this machine: a number, or "auto" (one per core).
    workers: str = Field(default="1", pattern=r"^(auto|[1-9][0-9]{0,2})$")
    # Set by the supervisor for its workers: bind with SO_REUSEPORT (several on one port).
    reuse_port: bool = False
    log_format: Literal["json", "console"] = "json"
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    # With tracing on: also record the content of model and tool calls on their spans (what
    # the user and the model said, a call's arguments and result), each only as people may
    # already see it (docs/operations.md section 2). Off: never.
    trace_content: bool = False
    # Routing (docs/routing.md): the operator's model aliases (a TOML or JSON file), and when a
    # session's target counts as stalled: no first output this long after the user's turn
    # ended (per mode), or a response silent this long mid-way. Then it fails over.
    models: Path | None = None
    first_output_voice_s: float = Field(default=2.5, gt=0)
    first_output_text_s: float = Field(default=5.0, gt=0)
    output_gap_s: float = Field(default=3.0, gt=0)
    # The breaker of each target: this many failures within the window open it for the
    # cool-down; then this many sessions may try it (half-open) before it closes again.
    breaker_failures: int = Field(default=3, ge=1)
    breaker_window_s: float = Field(default=30.0, gt=0)
    breaker_cooldown_s: float = Field(default=30.0, gt=0)
    breaker_probes: int = Field(default=2, ge=1)
    # Warm connections per target (Prewarm providers: OpenAI Realtime), opened before sessions
    # ask: how many each target keeps (0: off; an alias file's target may set its own "pool"),
    # and how long one may wait unused before it is replaced by a fresh one.
    pool_size: int = Field(default=0, ge=0, le=16)
    pool_idle_s: float = Field(default=60.0, gt=0)
    # The event loop of `gateway serve`: uvloop where it is installed (Linux, macOS), or asyncio.
    event_loop: Literal["uvloop", "asyncio"] = "uvloop"

    # Protocol limits (docs/protocol.md sections 3 and 4).
    max_text_frame: int = 256 * 1024
    max_binary_frame: int = 64 * 1024
    session_start_timeout_s: float = 10.0
    idle_timeout_s: float = 300.0
    max_duration_s: float = 3600.0
    resume_window_s: float = 30.0
    confirmation_ttl_s: float = 120.0
    # How long a call of a tool the client declared waits for the client's answer.
    client_tool_timeout_s: float = Field(default=60.0, gt=0)
    drain_grace_s: float = Field(default=5.0, ge=0, le=3600)
    # A drain spreads its moved sessions' resumes (session.moving's retry_after_ms): this much
    # apart, the whole window at most the maximum (within the drain's 10 s past its grace).
    drain_spread_per_session_ms: int = Field(default=40, ge=0, le=1000)
    drain_spread_max_ms: int = Field(default=4000, ge=0, le=10000)
    # Resumes a node takes per second (0: no limit) and their burst: one over the rate waits its
    # turn up to resume_queue_s, then is refused with rate_limited (retryable).
    resumes_per_s: float = Field(default=25.0, ge=0)
    resume_burst: int = Field(default=10, ge=1)
    resume_queue_s: float = Field(default=4.0, ge=0, le=8)
    # Connection rate limit per client address, and a cap on concurrent sessions.
    connections_per_minute: int = 600
    max_sessions: int = 2000
    # Control events (everything but audio) per session: sustained rate and burst; over the
    # limit an event is refused with rate_limited.
    client_events_per_s: float = 20.0
    client_events_burst: int = 60
    # Outbound queue per client: audio beyond this is dropped (and counted) first.
    outbound_audio_frames: int = 200
    # Events queued for a client that does not read; past this the connection is dropped.
    outbound_control_bytes: int = 8 * 1024 * 1024
    # A client silent this long is pinged; silent as long again, it is dropped (0: never).
    client_keepalive_s: float = Field(default=30.0, ge=0)
    default_instructions: str = "You are a helpful, concise assistant."
    # Usage priced per million tokens by a JSON file the operator provides (gateway.usage.prices);
    # no prices are built in.
    price_table: Path | None = None
    # The admin API (/admin/v1: keys, teams, budgets, usage; docs/keys.md) and the operator's
    # console (/console; docs/console.md), for credentials with the admin role. Off: neither is
    # served at all.
    admin: bool = False
    # The console's timelines keep the conversation's transcripts (redacted as the client's
    # are). Off: turns, tools and usage only.
    console_transcripts: bool = False
    # Where the console links a session's trace: a URL with {trace_id} (a Jaeger or Tempo page,
    # say); unset: the trace id is shown, not linked.
    console_trace_url: str | None = None
    # Budgets (docs/keys.md): sessions charged and held to the limits of their key, user and
    # team. Off: nothing is counted or limited (keys still authenticate).
    budgets: bool = True
    # Teams whose budget charges Prometheus counts (gateway_team_usage): a closed set, never a
    # label per key or user. Empty: none.
    metrics_teams: Annotated[list[str], NoDecode] = Field(default_factory=list)

    # Per-mode budgets (docs/tools.md section 7.2).
    voice_retrieval_calls: int = 2
    voice_soft_limit_ms: int = 800
    voice_hard_timeout_ms: int = 3000
    text_retrieval_calls: int = 5
    text_soft_limit_ms: int = 2000
    text_hard_timeout_ms: int = 5000
    tool_rounds_per_turn: int = 5
    # No dead air: in voice mode, what the caller hears once a tool call the model waits for
    # passes the soft limit: auto (a line from the model where the provider can say one aside,
    # else a tone), line, tone, or off.
    holding_cue: Literal["auto", "line", "tone", "off"] = "auto"
    holding_line: str = Field(
        default=(
            "In one short, natural sentence, tell the user you are still working on their "
            "request. Say nothing else."
        ),
        min_length=1,
        max_length=1000,
    )

    # The gateway's public address behind a proxy: what carriers call and sign.
    public_url: str | None = None
    # Phone calls on every carrier. Named GATEWAY_PHONE_*; the GATEWAY_TWILIO_* names they had
    # when Twilio was the only carrier still work.
    # A provider that speaks; None: GATEWAY_PROVIDER (or, with GATEWAY_MODELS, phone_model).
    phone_provider: str | None = Field(default=None, validation_alias=_phone("provider"))
    # With GATEWAY_MODELS: the model alias a phone call is served by (None: the default alias).
    phone_model: str | None = Field(default=None, validation_alias=_phone("model"))
    phone_roles: Annotated[list[str], NoDecode] = Field(
        default_factory=list, validation_alias=_phone("roles")
    )
    # Sent as the caller's first message, so the assistant speaks first; empty: wait for them.
    phone_greeting: str = Field(
        default="The caller has just connected. Greet them briefly.",
        validation_alias=_phone("greeting"),
    )
    # Said by the carrier when a call's stream ends from the gateway's side (shutdown, failure),
    # where its call-control document can say it; empty: nothing (the carrier hangs up).
    phone_farewell: str = Field(
        default="Sorry, this call has to end now. Please call again.",
        max_length=500,
        validation_alias=_phone("farewell"),
    )
    phone_token_ttl_s: float = Field(default=120.0, gt=0, validation_alias=_phone("token_ttl_s"))

    @field_validator("console_trace_url")
    @classmethod
    def _a_trace_link(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        if "{trace_id}" not in value or not value.startswith(("https://", "http://")):
            raise ValueError("must be an http(s) URL with {trace_id} where the id goes")
        return value.strip()

    @field_validator("provider")
    @classmethod
    def _a_provider_of_this_build(cls, value: str) -> str:
        if value not in PROVIDERS:
            raise ValueError(f"Input should be {_choices(PROVIDERS.names())}")
        return value

    @field_validator("phone_provider")
    @classmethod
    def _a_provider_that_speaks(cls, value: str | None) -> str | None:
        if value is not None and value not in PROVIDERS.speaking():
            raise ValueError(
                f"Input should be {_choices(PROVIDERS.speaking())}: a phone call needs a "
                "provider that speaks"
            )
        return value

    @field_validator("allowed_origins", mode="before")
    @classmethod
    def _split_origins(cls, value: object) -> object:
        if isinstance(value, str):
            return [o.strip().rstrip("/") for o in value.split(",") if o.strip()]
        return value

    @field_validator(
        "phone_roles", "anonymous_roles", "trusted_proxies", "metrics_teams", mode="before"
    )
    @classmethod
    def _split_roles(cls, value: object) -> object:
        if isinstance(value, str):
            return [r.strip() for r in value.split(",") if r.strip()]
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _valid_networks(cls, value: list[str]) -> list[str]:
        parse_networks(value)  # raises ValueError naming the bad entry
        return value

    @model_validator(mode="after")
    def _auth_is_safe(self) -> Settings:
        if self.auth == "none" and not is_loopback(self.host):
            raise ValueError(
                f"GATEWAY_AUTH=none is only allowed on a loopback address, not {self.host!r}"
            )
        if self.worker_count() > 1 and self.redis_url is None:
            raise ValueError(
                "GATEWAY_WORKERS above 1 needs GATEWAY_REDIS_URL: the workers share sessions, "
                "limits and the tool ledger through it"
            )
        if self.worker_count() > 1 and (self.port == 0 or self.metrics_port == 0):
            raise ValueError(
                "GATEWAY_WORKERS above 1 needs a fixed GATEWAY_PORT (and GATEWAY_METRICS_PORT): "
                "the workers share one port, 0 would give each its own"
            )
        if self.auth == "jwt" and (
            self.auth_secret is None or len(self.auth_secret.get_secret_value()) < 32
        ):
            raise ValueError(
                "GATEWAY_AUTH=jwt needs GATEWAY_AUTH_SECRET (at least 32 characters); "
                "or run locally with GATEWAY_AUTH=none on 127.0.0.1"
            )
        return self

    def drain_limit_s(self) -> float:
        """How long a drain may take before the process stops regardless: the grace, then a
        phone call's last sentence and the tool calls still running for moved sessions."""
        return self.drain_grace_s + 10.0

    def worker_count(self) -> int:
        return (os.cpu_count() or 1) if self.workers == "auto" else int(self.workers)

    def budget(self, mode: Literal["voice", "text"]) -> ModeBudget:
        if mode == "voice":
            return ModeBudget(
                self.voice_retrieval_calls,
                self.voice_soft_limit_ms,
                self.voice_hard_timeout_ms,
                self.tool_rounds_per_turn,
            )
        return ModeBudget(
            self.text_retrieval_calls,
            self.text_soft_limit_ms,
            self.text_hard_timeout_ms,
            self.tool_rounds_per_turn,
        )

    def registry_path(self) -> Path:
        return resolve_registry(self.registry)

    @classmethod
    def load(cls) -> Settings:
        try:
            return cls()
        except ValidationError as exc:
            raise ConfigError(describe_invalid_settings(exc)) from None


def _choices(names: tuple[str, ...]) -> str:
    """``'a'``, ``'a' or 'b'``, ``'a', 'b' or 'c'``, as pydantic lists a literal's values."""
    quoted = [f"'{name}'" for name in names]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def describe_invalid_settings(error: ValidationError) -> str:
    """What is wrong with the settings, naming variables and rules but never a value: pydantic's
    own message quotes every input (``input_value=...``), secrets included."""
    problems = []
    for item in error.errors(include_url=False, include_input=False, include_context=False):
        where = ".".join(str(part) for part in item["loc"])
        if not where:
            name = "settings"
        elif where.isupper():  # an alias that is already a variable name (OPENAI_API_KEY)
            name = where
        else:
            name = f"GATEWAY_{where.upper()}"
        message = str(item["msg"]).removeprefix("Value error, ")
        problems.append(f"{name}: {message}")
    count = len(problems)
    return f"{count} invalid setting{'s' if count != 1 else ''}: " + "; ".join(problems)
