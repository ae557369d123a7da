"""Tool activity as conversation history: what a model is told of the calls made before it took
over (a failover, a resume on another node), as short notes in the history's ``tool`` items.
Each transport replays them in its provider's shape for earlier activity. Pure.

A result note carries what the client was shown (``tool.finished``: the data projected through
the tool's allowlist), never more: the history is stored in the session's snapshots."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.protocol import ToolFinished

__all__ = ["NOTE_CHARS", "call_note", "result_note"]

NOTE_CHARS = 1000  # a note longer than this is cut: history is for context, not data


def call_note(name: str, arguments: str | Mapping[str, Any] | None) -> str:
    shown = arguments if isinstance(arguments, str) else _json(arguments or {})
    return _cut(f"called {name} with {shown}")


def result_note(finished: ToolFinished) -> str:
    if finished.ok:
        return _cut(f"{finished.name} returned {_json(finished.data)}")
    error = finished.error
    detail = "" if error is None else f"{error.type}: {error.message}"
    return _cut(f"{finished.name} failed: {detail}")


def _json(value: object) -> str:
    return orjson.dumps(value, default=str).decode()


def _cut(note: str) -> str:
    return note if len(note) <= NOTE_CHARS else note[: NOTE_CHARS - 1] + "…"
