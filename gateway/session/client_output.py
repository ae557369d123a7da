"""What a session writes to its client through, whatever edge the client came by.

Three edges speak to clients: the native protocol (``/v1/session``), the OpenAI-compatible
endpoint (``/v1/realtime``) and the phone bridge (Twilio Media Streams). Each hands the session
one ``ClientOutput`` (an ``Outbound``, made with the edge's own ``prepare`` and writers), and
takes the session's output from it as **typed** events (``ServerEvent``) and PCM audio, in
order: the native edge encodes each event once, the bridges translate them. Nothing parses the
session's output back (``docs/architecture.md``, *Client edges*).
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from gateway.protocol import ServerEvent

__all__ = ["ClientOutput"]


class ClientOutput(Protocol):
    """The session's side of a client edge (``Outbound`` is the one implementation)."""

    # Set once closed: the edge's reader stops (another socket took the session over).
    released: asyncio.Event

    def event(self, event: ServerEvent, *, after_audio: bool = False) -> None:
        """Queue one event (never blocks); ``after_audio``: behind the audio queued before it."""
        ...

    def audio(self, pcm: bytes, encoded: str | None = None) -> None:
        """One frame of the reply's audio, in the session's output format; ``encoded``: the
        same frame as standard base64, when the upstream sent it so."""
        ...

    def discard_audio(self) -> None:
        """Barge-in: the queued audio of the interrupted reply goes."""
        ...

    def close(self) -> None:
        """Accept nothing more; what was queued is still written."""
        ...
