"""The tool calls of a Gemini Live conversation: which the model waits for, which it does not,
which were orphaned by a lost connection, and which ids were seen. Pure.

- A ``toolCall``'s calls are deduplicated by id (the server may deliver one twice); a call
  without an id gets one, once.
- Ids are unique within one Gemini session only (the server numbers calls per session, and
  generated ids are numbered per transport), but the gateway keys calls by id for the whole
  of its session: its runner and, across nodes, its ledger. So a new Gemini session (not a
  resumed one) that may repeat earlier ids (a mode switch, a connection lost before any
  handle, or the first session of a session restored on another node, whose earlier ids this
  transport never saw) gives its calls ids of their own (``<id>~<6 hex>``); the server is
  answered with its own. One exception: the question in flight is asked again on the new
  session, told not to call its tools again; a call it makes anyway with the id and the tool
  of one it made for that question is that call again, and is left out like a duplicate (its
  result reaches the model as text).
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

import secrets
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
        self._seen: OrderedDict[str, None] = OrderedDict()  # the server's ids, this session
        self._server_ids: OrderedDict[str, str] = OrderedDict()  # our id → the server's
        self._suffix = ""  # what makes this session's ids ours (none for a first session)
        # The calls of the question in flight (server id → tool), and those of the question a
        # new session was asked again.
        self._in_flight: dict[str, str] = {}
        self._asked_again: dict[str, str] = {}
        self._generated = 0

    def new_session(self, *, ids_may_repeat: bool) -> None:
        """A new Gemini session begins (not a resumed one): its ids start over."""
        self._seen.clear()
        self._suffix = f"~{secrets.token_hex(3)}" if ids_may_repeat else ""
        self._asked_again, self._in_flight = self._in_flight, {}

    def question_answered(self) -> None:
        """A turn completed: its calls can no longer be asked for again."""
        self._in_flight.clear()
        self._asked_again.clear()

    def server_id(self, call_id: str) -> str:
        """The server's id of one of our calls."""
        return self._server_ids.get(call_id, call_id)

    def requested(self, message: Mapping[str, Any], notes: list[Any]) -> list[ev.RequestedCall]:
        """The new calls of a ``toolCall`` message (duplicates noted and left out)."""
        calls: list[ev.RequestedCall] = []
        for raw in message.get("functionCalls") or ():
            if not isinstance(raw, Mapping):
                continue
            if not raw.get("id"):
                self._generated += 1
            server_id = str(raw.get("id") or f"gemini_call_{self._generated}")
            name = str(raw.get("name", ""))
            args = raw.get("args")
            arguments = args if isinstance(args, dict) else {}
            if server_id in self._seen or self._asked_again.get(server_id) == name:
                notes.append(("tool_call_duplicate", {"call_id": server_id}))
                continue
            self._seen[server_id] = None
            self._in_flight[server_id] = name
            call_id = server_id + self._suffix
            if self._suffix:
                self._server_ids[call_id] = server_id
            for book in (self._seen, self._server_ids):
                while len(book) > _SEEN_IDS:
                    book.popitem(last=False)
            calls.append(ev.RequestedCall(call_id, name, arguments))
            if name in self.nonblocking_names:
                self._running[call_id] = name
            else:
                self.pending[call_id] = name
        return calls

    def cancelled(self, message: Mapping[str, Any]) -> list[str]:
        ours = (str(i) + self._suffix for i in message.get("ids") or ())
        ids = [call_id for call_id in ours if call_id in self.pending]
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
