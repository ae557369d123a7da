"""Chat completions (``transports/chat``), through the openai SDK: text only, any endpoint that
speaks OpenAI's chat API."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field, SecretStr

from gateway.providers.openai_realtime import OpenAIKey
from gateway.providers.record import ProviderRecord, secret
from gateway.registry.provider_schemas import OPENAI_CHAT
from transports.base import Transport

if TYPE_CHECKING:
    from transports.chat import ChatOptions

__all__ = ["CHAT", "ChatSettings"]


class ChatSettings(OpenAIKey):
    """Its own key, else OpenAI's (``OpenAIKey``)."""

    chat_base_url: str | None = None
    chat_api_key: SecretStr | None = None
    chat_model: str = "gpt-4o-mini"
    # Tool rounds per user message before the model must answer without tools.
    chat_max_rounds: int = Field(default=5, ge=0, le=50)
    # The conversation kept per session, as a token estimate; the oldest turns go first.
    chat_history_tokens: int = Field(default=16000, ge=256)
    chat_timeout_s: float = Field(default=60.0, gt=0)
    # The SDK's own retries of 408/409/429/5xx and connection failures, with backoff.
    chat_max_retries: int = Field(default=2, ge=0, le=10)


def _options(settings: ChatSettings) -> ChatOptions:
    from transports.chat import ChatOptions

    return ChatOptions(
        api_key=secret(settings.chat_api_key or settings.openai_api_key, "GATEWAY_CHAT_API_KEY"),
        model=settings.chat_model,
        base_url=settings.chat_base_url,
        max_rounds=settings.chat_max_rounds,
        history_tokens=settings.chat_history_tokens,
        timeout_s=settings.chat_timeout_s,
        max_retries=settings.chat_max_retries,
    )


def _transport(settings: ChatSettings) -> Transport:
    from transports.chat import ChatTransport
    from transports.chat.shared_client import shared_chat_client

    options = _options(settings)
    return ChatTransport(options, client=shared_chat_client(options))


def _warm_up(settings: ChatSettings) -> None:
    """A node's first chat turn's imports and the shared client, done at start."""
    from transports.chat.shared_client import warm_up

    warm_up(_options(settings))


async def _close_shared() -> None:
    from transports.chat.shared_client import close_shared_chat_clients

    await close_shared_chat_clients()


CHAT = ProviderRecord(
    name="chat",
    title="a chat-completions model",
    settings=ChatSettings,
    needs=("chat_api_key", "openai_api_key"),
    modes=frozenset({"text"}),
    input_rate=16000,
    output_rate=24000,
    dialect=OPENAI_CHAT,
    default_models=lambda s: {"voice": s.chat_model, "text": s.chat_model},
    build=_transport,
    warm_up=_warm_up,
    close_shared=_close_shared,
    genai_name="openai",  # it speaks OpenAI's chat API, whoever serves it
    tool_dialects=frozenset({"inline", "json"}),
)
