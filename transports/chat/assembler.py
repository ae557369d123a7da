"""Streamed ``tool_calls`` deltas of one chat completion, assembled into whole calls.

Providers stream a call in pieces keyed by ``index``: the id and the name usually come once in the
first piece, the arguments as many string fragments. Real streams are less tidy: some repeat the
id or the name in every piece, some split them too, some send empty pieces, parallel calls
interleave by index, and a stream can end in the middle of a call. ``ToolCallAssembler`` accepts
all of that and gives each call once the stream is over, in index order, with its arguments as
the raw text (the tool runner parses it exactly once). A call without an id gets a UUID-based
one, made here once, so the id stays the same from the call to its result.

Pure: no I/O, no clock. One assembler per completion; ``finish`` resets it.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["AssembledCall", "ToolCallAssembler"]


@dataclass(frozen=True, slots=True)
class AssembledCall:
    index: int
    call_id: str
    name: str
    arguments: str  # the JSON text as streamed; may be invalid (the runner says so)
    # The stream ended before the provider said the calls were complete (no finish_reason
    # "tool_calls"): the arguments may be cut short.
    truncated: bool = False


@dataclass(slots=True)
class _Pieces:
    call_id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


def _field(delta: Any, name: str) -> Any:
    if isinstance(delta, Mapping):
        return delta.get(name)
    return getattr(delta, name, None)


def _joined(current: str, piece: str) -> str:
    """Ids and names: a repeated piece is the same value again; a different one continues it."""
    if not piece or piece == current:
        return current
    return current + piece


class ToolCallAssembler:
    def __init__(self, new_id: Callable[[], str] | None = None) -> None:
        self._new_id = new_id or (lambda: f"call_{uuid.uuid4().hex}")
        self._calls: dict[int, _Pieces] = {}
        self._last_index = 0

    def __bool__(self) -> bool:
        return bool(self._calls)

    def feed(self, tool_calls: Iterable[Any] | None) -> None:
        """One chunk's ``choices[0].delta.tool_calls`` (SDK objects or plain mappings)."""
        for delta in tool_calls or ():
            index = _field(delta, "index")
            if not isinstance(index, int):
                index = self._last_index  # some providers send the index only once
            self._last_index = index
            pieces = self._calls.setdefault(index, _Pieces())
            call_id = _field(delta, "id")
            if isinstance(call_id, str):
                pieces.call_id = _joined(pieces.call_id, call_id)
            function = _field(delta, "function")
            if function is None:
                continue
            name = _field(function, "name")
            if isinstance(name, str):
                pieces.name = _joined(pieces.name, name)
            arguments = _field(function, "arguments")
            if isinstance(arguments, str) and arguments:
                pieces.arguments.append(arguments)

    def finish(self, *, complete: bool = True) -> list[AssembledCall]:
        """The calls of the finished stream, in index order; the assembler starts afresh.
        ``complete``: the provider ended the stream with ``finish_reason`` ``tool_calls`` (or
        ``stop``), rather than the stream breaking off."""
        calls = [
            AssembledCall(
                index=index,
                call_id=pieces.call_id or self._new_id(),
                name=pieces.name,
                arguments="".join(pieces.arguments),
                truncated=not complete,
            )
            for index, pieces in sorted(self._calls.items())
            if pieces.name or pieces.arguments or pieces.call_id
        ]
        self._calls.clear()
        self._last_index = 0
        return calls
