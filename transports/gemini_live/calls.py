"""The tool calls of a Gemini Live conversation: which the model waits for, which it does not,
which were orphaned by a lost connection, and which ids were seen. Pure.

- A ``toolCall``'s calls are deduplicated by id (the server may deliver one twice); a call
  without an id gets one, once.
- Blocking calls (``pending``) are answered by id in a ``toolResponse``; the model waits for
  them. ``toolCallCancellation`` ends them unanswered.
- Non-blocking calls (tools declared ``NON_BLOCKING``: background tools) are not waited for: the
  model goes on talking, and the result is sent whenever it is ready, with a ``scheduling``
  (``INTERRUPT``: at once, cutting what it says; ``WHEN_IDLE``: once it has finished;
  ``SILENT``: into its context only). The acknowledgement other providers get is not sent.
- A connection that is lost orphans its calls: the next one does not know their ids, so their
  results go to the model as text.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from transports import events as ev
from transports.base import Delivery, ToolDeclaration

__all__ = ["SCHEDULING", "CallBook"]

SCHEDULING: dict[Delivery, Literal["INTERRUPT", "WHEN_IDLE", "SILENT"]] = {
    "interrupt": "INTERRUPT",
    "when_idle": "WHEN_IDLE",
    "silent": "SILENT",
}
_SEEN_IDS = 4096


class CallBook:
    def __init__(self, tools: Iterable[ToolDeclaration]) -> None:
        self.nonblocking_names = frozenset(
            str(t.provider_schemas["gemini"]["name"]) for t in tools if t.background
        )
        self.pending: dict[str, str] = {}  # call id → name: the model waits for these
        self.orphans: dict[str, str] = {}  # issued on a connection that is gone
        self._running: dict[str, str] = {}  # non-blocking, on this connection
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._generated = 0

    def requested(self, message: Mapping[str, Any], notes: list[Any]) -> list[ev.RequestedCall]:
        """The new calls of a ``toolCall`` message (duplicates noted and left out)."""
        calls: list[ev.RequestedCall] = []
        for raw in message.get("functionCalls") or ():
            if not isinstance(raw, Mapping):
                continue
            if not raw.get("id"):
                self._generated += 1
            call_id = str(raw.get("id") or f"gemini_call_{self._generated}")
            if call_id in self._seen:
                notes.append(("tool_call_duplicate", {"call_id": call_id}))
                continue
            self._seen[call_id] = None
            while len(self._seen) > _SEEN_IDS:
                self._seen.popitem(last=False)
            name = str(raw.get("name", ""))
            args = raw.get("args")
            calls.append(ev.RequestedCall(call_id, name, args if isinstance(args, dict) else {}))
            if name in self.nonblocking_names:
                self._running[call_id] = name
            else:
                self.pending[call_id] = name
        return calls

    def cancelled(self, message: Mapping[str, Any]) -> list[str]:
        ids = [str(i) for i in message.get("ids") or () if str(i) in self.pending]
        for call_id in ids:
            del self.pending[call_id]
        return ids

    def nonblocking_answerable(self, call_id: str) -> str | None:
        """Its name when this connection still waits for its result (taken out), else None."""
        return self._running.pop(call_id, None)

    def orphan_pending(self) -> list[str]:
        """The blocking calls can no longer be answered by id (a new turn, or a lost
        connection): their ids."""
        ids = list(self.pending)
        self.orphans.update(self.pending)
        self.pending.clear()
        return ids

    def connection_lost(self) -> None:
        self._running.clear()
