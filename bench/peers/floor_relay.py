"""The floor: a verbatim ``websockets`` relay, no parsing, compression off on both hops.

``python -m bench.peers.floor_relay PORT UPSTREAM`` relays ``ws://127.0.0.1:PORT/<path>`` to
``UPSTREAM/<path>`` frame by frame; what any relay costs at least, with the main venv's Python.
"""

from __future__ import annotations

import asyncio
import sys

from websockets.asyncio.client import ClientConnection, connect
from websockets.asyncio.server import ServerConnection, serve


async def _pipe(
    source: ClientConnection | ServerConnection, sink: ClientConnection | ServerConnection
) -> None:
    async for message in source:
        await sink.send(message)


async def _relay(client: ServerConnection, upstream_base: str) -> None:
    url = upstream_base + client.request.path if client.request else upstream_base
    async with connect(url, max_size=None, compression=None, ping_interval=None) as upstream:
        pipes = [
            asyncio.create_task(_pipe(client, upstream)),
            asyncio.create_task(_pipe(upstream, client)),
        ]
        await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
        for pipe in pipes:
            pipe.cancel()


async def _main(port: int, upstream_base: str) -> None:
    async with serve(
        lambda client: _relay(client, upstream_base),
        "127.0.0.1",
        port,
        max_size=None,
        compression=None,
        ping_interval=None,
    ):
        print(f"floor relay listening ws://127.0.0.1:{port} -> {upstream_base}", flush=True)
        await asyncio.Future()


if __name__ == "__main__":
    asyncio.run(_main(int(sys.argv[1]), sys.argv[2].rstrip("/")))
