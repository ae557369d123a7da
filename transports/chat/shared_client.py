"""One ``AsyncOpenAI`` client per configuration and event loop, shared by every chat session.

A client per session cost each session's first message a new connection pool: a fresh SSL
context (loading the CA bundle, milliseconds of CPU) and a TCP and TLS handshake with the
provider. When a node takes over the sessions of a restarted one, dozens of those came at
once, and the sessions it already held waited behind them. Shared, the keep-alive connections
are reused across sessions and users (the SDK's pool bounds them; nothing user-specific lives
in the client: each request carries its own messages).

The composition root hands it to each ``ChatTransport`` it builds (``gateway.providers.chat``);
a transport built without one makes and closes its own. The client belongs to the loop that made
it (its connections do), so the cache is per loop: each test runs its own loop, and a loop that
ended takes its clients with it. The app closes the running loop's clients at shutdown
(``close_shared_chat_clients``).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import weakref

from openai import AsyncOpenAI, OpenAIError

from transports.chat.transport import ChatOptions

__all__ = ["close_shared_chat_clients", "shared_chat_client", "warm_up"]

_Key = tuple[str, str | None, float, int]
_BY_LOOP: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[_Key, AsyncOpenAI]] = (
    weakref.WeakKeyDictionary()
)


def shared_chat_client(options: ChatOptions) -> AsyncOpenAI | None:
    """The running loop's client for these options, made now if there is none. None outside a
    running loop, or for options the SDK refuses: the transport then makes its own at
    ``connect`` (and reports what is wrong there, as a ``TransportError``)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    clients = _BY_LOOP.setdefault(loop, {})
    key = (options.api_key, options.base_url, options.timeout_s, options.max_retries)
    client = clients.get(key)
    if client is None or client.is_closed():
        try:
            client = AsyncOpenAI(
                api_key=options.api_key,
                base_url=options.base_url,
                timeout=options.timeout_s,
                max_retries=options.max_retries,
            )
        except OpenAIError:
            return None
        clients[key] = client
    return client


def warm_up(options: ChatOptions) -> None:
    """What a node's first chat turn would otherwise do on its loop: import what the SDK loads
    lazily (its chat resources; anyio's asyncio backend, at the first client and the first
    request) and, inside the running loop, build the shared client (an SSL context). Measured
    in a fresh process: the first turn's 60-70 ms of this, on the loop every session shares."""
    for module in ("openai.resources.chat.chat", "anyio._backends._asyncio"):
        importlib.import_module(module)
    shared_chat_client(options)


async def close_shared_chat_clients() -> None:
    """The app's shutdown hook: close the running loop's clients (after its sessions ended)."""
    clients = _BY_LOOP.pop(asyncio.get_running_loop(), {})
    for client in clients.values():
        with contextlib.suppress(Exception):
            await client.close()
