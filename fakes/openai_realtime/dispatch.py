"""The fake's dispatch mode: tool calls on demand, timed on the fake's own clock.

A benchmark of tool dispatch needs the model to call a tool at a moment the bench chooses, and a
clock that does not include the client. In dispatch mode (``FakeOptions.dispatch``, echo mode
only) an ``input_audio_buffer.append`` whose audio starts with ``DISPATCH_MARKER`` is answered,
instead of with its echo, by a complete function-call response for the no-op tool (the GA event
sequence of any tool call: ``response.created``, the call item's events, ``response.done``,
``rate_limits.updated``). Appends without the marker are echoed as usual, so echo sessions next
to a dispatching one are untouched. A ``response.create`` is answered by an empty completed
response at once, so the model says nothing after a tool result and the dispatches stay apart.

``DispatchLog`` keeps the two stamps of each call (``time.perf_counter_ns()``):

- ``emitted``: when the writer has put the response's last frame on the socket (the session
  returns a ``Stamp`` action after the response's sends; the writer reaches it after them);
- ``received``: when the ``conversation.item.create`` carrying that call's
  ``function_call_output`` arrives, taken before the frame is parsed or handled.

Each answered call is kept in ``records`` and, with a path, appended to a JSON-lines file
(``{"call_id", "emitted_ns", "received_ns"}``, flushed per line) that a benchmark reads while
the fake runs.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

__all__ = [
    "DISPATCH_MARKER",
    "DISPATCH_MARKER_B64",
    "DispatchLog",
    "DispatchTiming",
    "is_dispatch_audio",
    "marker_frame",
]

# 12 bytes (a multiple of 3), so the base64 of any audio starting with it starts with the
# marker's own base64: the fake recognises it without decoding the audio.
DISPATCH_MARKER = b"FAKEDISPATCH"
DISPATCH_MARKER_B64 = base64.b64encode(DISPATCH_MARKER).decode("ascii")


def is_dispatch_audio(audio_b64: str) -> bool:
    """The append's base64 audio starts with the marker."""
    return audio_b64.startswith(DISPATCH_MARKER_B64)


def marker_frame(frame_bytes: int) -> bytes:
    """A PCM16 frame of ``frame_bytes`` that asks the fake for a tool call: the marker, then
    silence."""
    if frame_bytes < len(DISPATCH_MARKER) or frame_bytes % 2:
        raise ValueError(f"a marker frame needs an even size ≥ {len(DISPATCH_MARKER)} bytes")
    return DISPATCH_MARKER + bytes(frame_bytes - len(DISPATCH_MARKER))


@dataclass(frozen=True, slots=True)
class DispatchTiming:
    call_id: str
    emitted_ns: int
    received_ns: int

    @property
    def duration_ns(self) -> int:
        return self.received_ns - self.emitted_ns


class DispatchLog:
    """The stamps of every dispatched call, shared by the server's connections."""

    def __init__(self, path: Path | None = None) -> None:
        self.records: list[DispatchTiming] = []
        self._emitted: dict[str, int] = {}
        self._file: IO[bytes] | None = None if path is None else path.open("ab")

    @property
    def unanswered(self) -> int:
        """Calls emitted and not (yet) answered."""
        return len(self._emitted)

    def emitted(self, call_id: str, at_ns: int) -> None:
        self._emitted[call_id] = at_ns

    def received(self, event: Any, at_ns: int) -> None:
        """A client event that arrived at ``at_ns``: a dispatched call's output is recorded."""
        if not isinstance(event, dict) or event.get("type") != "conversation.item.create":
            return
        item = event.get("item")
        if not isinstance(item, dict) or item.get("type") != "function_call_output":
            return
        emitted = self._emitted.pop(str(item.get("call_id")), None)
        if emitted is None:  # not a dispatched call, or answered already
            return
        timing = DispatchTiming(str(item["call_id"]), emitted, at_ns)
        self.records.append(timing)
        if self._file is not None:
            line = {"call_id": timing.call_id, "emitted_ns": emitted, "received_ns": at_ns}
            self._file.write(orjson.dumps(line) + b"\n")
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
