"""One streamed chat completion, read chunk by chunk into what to show and what to run.

``CompletionReader.feed`` takes each chunk (the SDK's ``ChatCompletionChunk`` or the same shape
as plain mappings) and returns the text the client may see now; ``finish`` gives the
``Completion``: the raw text (for the history), the tool calls by dialect, and what could not be
read. In ``native`` the calls come from ``tool_calls`` deltas (``ToolCallAssembler``); in
``inline`` from markers cut out of the text (``InlineMarkerFilter``); in a ``json`` planning
round the whole text is the plan, and nothing is shown.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from transports.chat.assembler import AssembledCall, ToolCallAssembler
from transports.chat.dialects import Dialect
from transports.chat.inline import InlineCall, InlineMarkerFilter, MarkerProblem

__all__ = ["Completion", "CompletionReader"]

_USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")


@dataclass(slots=True)
class Completion:
    text: str  # everything the model wrote, markers included
    shown: str  # what the client saw
    finish_reason: str | None
    native_calls: list[AssembledCall] = field(default_factory=list)
    inline_calls: list[InlineCall] = field(default_factory=list)
    problems: list[MarkerProblem] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)

    @property
    def has_calls(self) -> bool:
        return bool(self.native_calls or self.inline_calls or self.problems)


def _get(value: Any, name: str) -> Any:
    if isinstance(value, Mapping):
        return value.get(name)
    return getattr(value, name, None)


class CompletionReader:
    def __init__(
        self, dialect: Dialect, *, planning: bool = False, new_id: Callable[[], str] | None = None
    ) -> None:
        self.dialect = dialect
        self.planning = planning  # a json planning round: nothing is shown
        self._assembler = ToolCallAssembler(new_id)
        self._markers = InlineMarkerFilter() if dialect is Dialect.INLINE else None
        self._text: list[str] = []
        self._shown: list[str] = []
        self._found: list[InlineCall | MarkerProblem] = []
        self._finish_reason: str | None = None
        self._usage: dict[str, int] = {}

    def feed(self, chunk: Any) -> str:
        """The text of this chunk the client may see now ("" if none)."""
        usage = _get(chunk, "usage")
        if usage is not None:
            for key in _USAGE_KEYS:
                count = _get(usage, key)
                if isinstance(count, int):
                    self._usage[key] = count
        shown = ""
        for choice in _get(chunk, "choices") or ():
            if (_get(choice, "index") or 0) != 0:
                continue  # we ask for one choice; ignore any other
            reason = _get(choice, "finish_reason")
            if isinstance(reason, str):
                self._finish_reason = reason
            delta = _get(choice, "delta")
            if delta is None:
                continue
            self._assembler.feed(_get(delta, "tool_calls"))
            content = _get(delta, "content")
            if isinstance(content, str) and content:
                shown += self._content(content)
        self._shown.append(shown)
        return shown

    @property
    def shown_so_far(self) -> str:
        return "".join(self._shown)

    def _content(self, content: str) -> str:
        self._text.append(content)
        if self.planning:
            return ""
        if self._markers is None:
            return content
        shown, found = self._markers.feed(content)
        self._found.extend(found)
        return shown

    def finish(self) -> tuple[str, Completion]:
        """The end of the stream: the last text to show, and the whole completion. Calls of a
        stream that hit its length limit are marked ``truncated`` (their arguments may be cut)."""
        tail = ""
        if self._markers is not None:
            tail, found = self._markers.finish()
            self._found.extend(found)
        self._shown.append(tail)
        complete = self._finish_reason != "length"
        completion = Completion(
            text="".join(self._text),
            shown="".join(self._shown),
            finish_reason=self._finish_reason,
            native_calls=self._assembler.finish(complete=complete),
            inline_calls=[f for f in self._found if isinstance(f, InlineCall)],
            problems=[f for f in self._found if isinstance(f, MarkerProblem)],
            usage=dict(self._usage),
        )
        return tail, completion
