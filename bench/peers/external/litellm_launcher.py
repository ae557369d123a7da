"""LiteLLM's proxy CLI with compression explicitly off on both hops (run with the LiteLLM venv).

    python litellm_launcher.py --config CONFIG --host 127.0.0.1 --port P   (litellm's own flags)

LiteLLM opens its upstream WebSocket with ``websockets.connect(...)`` and no ``compression``
argument, so it offers permessage-deflate, which the OpenAI fake accepts; and its uvicorn accepts
permessage-deflate whenever a client offers it. Neither is configurable, so this launcher sets
both defaults before LiteLLM imports them: ``websockets.connect`` with ``compression=None`` and
``uvicorn.run`` with ``ws_per_message_deflate=False``. Nothing else is changed.
"""

from __future__ import annotations

import functools
import sys

import uvicorn
import websockets
import websockets.asyncio.client

websockets.connect = functools.partial(websockets.asyncio.client.connect, compression=None)  # type: ignore[assignment]
uvicorn.run = functools.partial(uvicorn.run, ws_per_message_deflate=False)  # type: ignore[assignment]

from litellm import run_server  # noqa: E402  (after the patches, on purpose)

if __name__ == "__main__":
    sys.exit(run_server())
