"""Every upstream transport, as the contract suite runs it: one ``TransportUnderTest`` each.

Adding a transport is adding one entry to ``TRANSPORTS``: how to start its fake (paced, so that
a long reply lasts), build the transport against it or against an address that does not answer,
inject a drop and an unknown event, and which behaviours do not apply, and why.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from contract_kit import (
    Subject,
    TransportUnderTest,
    no_upstream,
)

from fakes.chat.brain import Text
from fakes.chat.server import FakeChatOptions, FakeChatServer
from fakes.gemini_live.server import FakeGeminiOptions, FakeGeminiServer
from fakes.openai_realtime.response import UNANNOUNCED_EVENT
from fakes.openai_realtime.server import FakeOptions, FakeRealtimeServer
from transports.base import Transport
from transports.chat import ChatOptions, ChatTransport
from transports.gemini_live import GeminiLiveTransport, GeminiOptions
from transports.local import LocalBrain, LocalTransport
from transports.openai_realtime import OpenAIRealtimeTransport, RealtimeOptions

__all__ = ["TRANSPORTS"]

BACKOFF_S = 0.01
UPSTREAM_CONNECT_TIMEOUT_S = 5.0
VOICE_MODEL = "gemini-2.5-flash-native-audio-preview-09-2025"
TEXT_MODEL = "gemini-live-2.5-flash-preview"


# local: the embedded model ----------------------------------------------------------------------

NO_UPSTREAM = "the embedded local model has no upstream: nothing to reach, drop or extend"

LOCAL = TransportUnderTest(
    name="local",
    start_upstream=no_upstream,
    build=lambda _: LocalTransport(LocalBrain(), pace=1.0),  # real-time speech: cancellable
    not_applicable={
        "unreachable": NO_UPSTREAM,
        "reconnect": NO_UPSTREAM,
        "unknown_event": NO_UPSTREAM + " (its events are the neutral ones)",
    },
)


# openai: OpenAI Realtime over our WebSocket -----------------------------------------------------


@asynccontextmanager
async def openai_fake(cert_dir: Path) -> AsyncIterator[FakeRealtimeServer]:
    async with FakeRealtimeServer(FakeOptions(pace=1.0)) as fake:
        yield fake


def openai_transport(ws_url: str, connect_timeout_s: float) -> Transport:
    return OpenAIRealtimeTransport(
        RealtimeOptions(
            api_key="sk-contract",
            ws_url=ws_url,
            connect_timeout_s=connect_timeout_s,
            reconnect_initial_s=BACKOFF_S,
        )
    )


async def openai_drop(subject: Subject) -> None:
    fake: FakeRealtimeServer = subject.upstream
    await fake.connections[-1].drop(1011)


async def openai_unknown(subject: Subject, text: str) -> None:
    fake: FakeRealtimeServer = subject.upstream
    await subject.transport.send_text(f"/unknown {text}")
    await fake.connections[-1].wait_for(UNANNOUNCED_EVENT)


OPENAI = TransportUnderTest(
    name="openai",
    start_upstream=openai_fake,
    build=lambda fake: openai_transport(fake.ws_url, UPSTREAM_CONNECT_TIMEOUT_S),
    build_unreachable=lambda at, timeout_s: openai_transport(
        f"ws://{at.host}:{at.port}/v1", timeout_s
    ),
    inject_drop=openai_drop,
    inject_unknown=openai_unknown,
)


# gemini: Gemini Live through google-genai, over TLS ---------------------------------------------


@asynccontextmanager
async def gemini_fake(cert_dir: Path) -> AsyncIterator[FakeGeminiServer]:
    async with FakeGeminiServer(FakeGeminiOptions(pace=1.0), cert_dir=cert_dir) as fake:
        yield fake


def gemini_transport(base_url: str, ca_file: str | None, connect_timeout_s: float) -> Transport:
    return GeminiLiveTransport(
        GeminiOptions(
            api_key="contract-key",
            voice_model=VOICE_MODEL,
            text_model=TEXT_MODEL,
            base_url=base_url,
            ca_file=ca_file,
            connect_timeout_s=connect_timeout_s,
            reconnect_initial_s=BACKOFF_S,
        )
    )


async def gemini_drop(subject: Subject) -> None:
    fake: FakeGeminiServer = subject.upstream
    await fake.connections[-1].drop(1011)


async def gemini_unknown(subject: Subject, text: str) -> None:
    fake: FakeGeminiServer = subject.upstream
    await subject.transport.send_text(f"/unknown {text}")
    await fake.connections[-1].wait_for("unannouncedFeature")


GEMINI = TransportUnderTest(
    name="gemini",
    start_upstream=gemini_fake,
    build=lambda fake: gemini_transport(
        fake.base_url, str(fake.ca_file), UPSTREAM_CONNECT_TIMEOUT_S
    ),
    build_unreachable=lambda at, timeout_s: gemini_transport(
        f"https://{at.host}:{at.port}", None, timeout_s
    ),
    inject_drop=gemini_drop,
    inject_unknown=gemini_unknown,
)


# chat: chat completions through the openai SDK, SSE, text only ----------------------------------


@asynccontextmanager
async def chat_fake(cert_dir: Path) -> AsyncIterator[FakeChatServer]:
    # 20 ms between words: a reply to LONG_SAY streams for 2 s.
    async with FakeChatServer(FakeChatOptions(word_delay_s=0.02)) as fake:
        yield fake


def chat_transport(base_url: str, timeout_s: float) -> Transport:
    return ChatTransport(
        ChatOptions(
            api_key="sk-contract",
            model="fake-chat",
            base_url=base_url,
            timeout_s=timeout_s,
            max_retries=0,
        )
    )


async def chat_drop(subject: Subject) -> None:
    await subject.transport.send_text("/cut half an ans")  # the stream breaks off mid-answer


async def chat_unknown(subject: Subject, text: str) -> None:
    fake: FakeChatServer = subject.upstream
    requests = len(fake.requests)
    await subject.transport.send_text(f"/unknown {text}")
    await fake.wait_for_requests(requests + 1)
    reply = fake.responses[requests]
    assert isinstance(reply, Text)
    assert reply.unannounced


CHAT = TransportUnderTest(
    name="chat",
    start_upstream=chat_fake,
    build=lambda fake: chat_transport(fake.base_url, 10.0),
    build_unreachable=lambda at, timeout_s: chat_transport(
        f"http://{at.host}:{at.port}/v1", timeout_s
    ),
    # Chat completions are stateless requests: connect() only builds the client, and a provider
    # that cannot be reached fails the first message instead (retryable notice, failed reply).
    connect_opens_upstream=False,
    inject_drop=chat_drop,
    drop_recovery="fails_the_turn",
    inject_unknown=chat_unknown,
)

TRANSPORTS = (LOCAL, OPENAI, GEMINI, CHAT)
