"""The ``inline`` tool dialect: ``[TOOL_CALL:{…}]`` markers cut out of streamed text.

Models without native function calling are asked to write a call as
``[TOOL_CALL:{"id": "…", "tool": "…", "parameters": {…}, "confidence": 0.9}]`` in their answer.
``InlineMarkerFilter`` takes the streamed text chunk by chunk and returns what may be shown to the
client now, and the markers it completed. A marker is never shown, even when it is split across
chunks: text that could be the start of one is held back until it is known not to be. The JSON of
a marker is delimited by matching braces (strings and escapes respected), so ``]`` or ``}`` inside
a string does not end it early.

Pure: no I/O.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

__all__ = ["MARKER", "InlineCall", "InlineMarkerFilter", "MarkerProblem", "result_marker"]

MARKER = "[TOOL_CALL:"


@dataclass(frozen=True, slots=True)
class InlineCall:
    call_id: str
    tool: str
    parameters: dict[str, Any]
    confidence: float | None


@dataclass(frozen=True, slots=True)
class MarkerProblem:
    """A marker that could not be read; the model is told, the client sees nothing of it."""

    text: str
    problem: str


def result_marker(call_id: str, ok: bool, message: str) -> str:
    """How a result goes back to the model in this dialect."""
    return f"[TOOL_RESULT:{call_id}:{'success' if ok else 'error'}] {message}"


def _json_end(text: str, start: int) -> int | None:
    """Index just past the JSON object starting at ``start`` (a ``{``), or None if incomplete."""
    depth = 0
    in_string = False
    escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def _parse(body: str) -> InlineCall | str:
    try:
        value = json.loads(body)
    except ValueError as exc:
        return f"the marker's JSON is invalid: {exc}"
    if not isinstance(value, dict):
        return "the marker must hold a JSON object"
    tool = value.get("tool")
    if not isinstance(tool, str) or not tool:
        return 'the marker has no "tool"'
    parameters = value.get("parameters", {})
    if not isinstance(parameters, dict):
        return '"parameters" must be an object'
    confidence = value.get("confidence")
    if confidence is not None and (
        isinstance(confidence, bool)
        or not isinstance(confidence, int | float)
        or not math.isfinite(confidence)
    ):
        return '"confidence" must be a number'
    call_id = value.get("id")
    return InlineCall(
        call_id=str(call_id) if call_id else "",
        tool=tool,
        parameters=parameters,
        confidence=None if confidence is None else float(confidence),
    )


class InlineMarkerFilter:
    def __init__(self) -> None:
        self._held = ""

    def feed(self, chunk: str) -> tuple[str, list[InlineCall | MarkerProblem]]:
        """The text that can be shown now, and the markers completed by this chunk."""
        text = self._held + chunk
        shown: list[str] = []
        found: list[InlineCall | MarkerProblem] = []
        while True:
            start = text.find(MARKER)
            if start < 0:
                keep = _partial_marker_suffix(text)
                shown.append(text[: len(text) - keep])
                self._held = text[len(text) - keep :]
                break
            shown.append(text[:start])
            body_start = start + len(MARKER)
            stripped = len(text) - len(text[body_start:].lstrip())
            if stripped >= len(text):
                self._held = text[start:]  # the JSON has not begun yet
                break
            if text[stripped] != "{":
                skip = _skip_rest(text, stripped)
                if skip is None:
                    self._held = text[start:]  # wait for the end of the bad marker
                    break
                found.append(MarkerProblem(text[start:skip], "a marker must hold {…}"))
                text = text[skip:]
                continue
            end = _json_end(text, stripped)
            if end is None:
                self._held = text[start:]  # wait for the rest of the marker
                break
            close = end
            while close < len(text) and text[close].isspace():
                close += 1
            if close >= len(text):
                self._held = text[start:]  # the closing "]" has not come yet
                break
            if text[close] == "]":
                after = close + 1
            else:
                # Not closed where it should be: the rest of the marker is not shown either.
                skip = _skip_rest(text, close)
                if skip is None:
                    self._held = text[start:]
                    break
                after = skip
            marker = text[start:after]
            parsed = _parse(text[stripped:end])
            if isinstance(parsed, str):
                found.append(MarkerProblem(marker, parsed))
            elif text[close] != "]":
                found.append(MarkerProblem(marker, 'the marker must end with "]"'))
            else:
                found.append(parsed)
            text = text[after:]
        return "".join(shown), found

    def finish(self) -> tuple[str, list[InlineCall | MarkerProblem]]:
        """The end of the stream: held text that never became a marker is shown; a marker cut
        short is reported, never shown."""
        held, self._held = self._held, ""
        if held.startswith(MARKER):
            return "", [MarkerProblem(held, "the stream ended inside a marker")]
        return held, []


def _skip_rest(text: str, position: int) -> int | None:
    """Where text resumes after a malformed marker's remains: just past the next "]" on the
    same line, or at the line's end (a model's prose is not swallowed past it). None: neither
    has come yet."""
    for index in range(position, len(text)):
        if text[index] == "]":
            return index + 1
        if text[index] == "\n":
            return index
    return None


def _partial_marker_suffix(text: str) -> int:
    """The length of the longest end of ``text`` that is a start of the marker."""
    for size in range(min(len(MARKER) - 1, len(text)), 0, -1):
        if MARKER.startswith(text[-size:]):
            return size
    return 0
