"""The conversation as the transport can replay it into a brand-new upstream session.

An OpenAI Realtime session cannot be resumed: after the 60-minute cap or a dropped socket the
transport opens a new session and re-creates the conversation with ``conversation.item.create``
(docs/protocol.md 10.6, recovery). Audio cannot be replayed, so user speech is kept as its
transcript and assistant speech as the words the user heard. The newest items are replayed as they
were; older ones are folded into one system message that summarises them, so a long call replays
quickly.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Literal

from transports.openai_realtime import wire

__all__ = ["Entry", "ReplayLog"]

Kind = Literal["user", "assistant", "system", "call", "output"]

# Items replayed verbatim; older ones go into the summary.
RECENT_ITEMS = 24
# Entries kept at all (the summary only needs the last few hundred).
MAX_ENTRIES = 400
SUMMARY_LINE_CHARS = 200
MAX_ENTRY_CHARS = 16_000
SUMMARY_CHARS = 4000


@dataclass(slots=True)
class Entry:
    kind: Kind
    text: str = ""
    call_id: str = ""
    name: str = ""
    # The upstream item id, for entries filled in later (a user transcript that arrives after).
    item_id: str = ""

    def item(self) -> wire.Item:
        if self.kind == "user":
            return wire.user_text_item(self.text)
        if self.kind == "assistant":
            return wire.assistant_text_item(self.text)
        if self.kind == "system":
            return wire.system_text_item(self.text)
        if self.kind == "call":
            return wire.function_call_item(self.call_id, self.name, self.text)
        return wire.function_call_output_item(self.call_id, self.text)

    def summary_line(self) -> str:
        if self.kind == "call":
            line = f"called {self.name}({self.text})"
        elif self.kind == "output":
            line = f"tool result {self.call_id}: {self.text}"
        else:
            line = f"{self.kind}: {self.text}"
        line = " ".join(line.split())
        return line if len(line) <= SUMMARY_LINE_CHARS else line[: SUMMARY_LINE_CHARS - 1] + "…"


class ReplayLog:
    def __init__(self, recent_items: int = RECENT_ITEMS) -> None:
        self.recent_items = recent_items
        self._entries: deque[Entry] = deque(maxlen=MAX_ENTRIES)

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, entry: Entry) -> Entry:
        if len(entry.text) > MAX_ENTRY_CHARS:  # a huge tool result is not kept whole
            entry.text = entry.text[:MAX_ENTRY_CHARS] + " …[cut]"
        self._entries.append(entry)
        return entry

    def find(self, item_id: str) -> Entry | None:
        for entry in reversed(self._entries):
            if entry.item_id == item_id:
                return entry
        return None

    def has_call(self, call_id: str) -> bool:
        return any(e.kind == "call" and e.call_id == call_id for e in self._entries)

    def items(self) -> list[wire.Item]:
        """What to create in a new session: a summary of the old part, then the recent items."""
        entries = [e for e in self._entries if e.text or e.kind in ("call", "output")]
        cut = max(0, len(entries) - self.recent_items)
        # A tool output is replayed only together with its call (the server refuses an output
        # for a call it does not know): the verbatim part reaches back to the calls of its
        # outputs, and an output whose call is gone entirely is only summarised.
        calls = {e.call_id: n for n, e in enumerate(entries) if e.kind == "call"}
        for entry in entries[cut:]:
            if entry.kind == "output" and entry.call_id in calls:
                cut = min(cut, calls[entry.call_id])
        recent = [e for e in entries[cut:] if e.kind != "output" or e.call_id in calls]
        orphans = [e for e in entries[cut:] if e.kind == "output" and e.call_id not in calls]
        items: list[wire.Item] = []
        summary = _summary(entries[:cut] + orphans)
        if summary:
            items.append(wire.system_text_item(summary))
        items.extend(e.item() for e in recent)
        return items


def _summary(entries: list[Entry]) -> str:
    if not entries:
        return ""
    lines: list[str] = []
    size = 0
    for entry in reversed(entries):  # the newest lines matter most; the oldest are cut first
        line = "- " + entry.summary_line()
        if size + len(line) > SUMMARY_CHARS:
            lines.append("- (earlier turns omitted)")
            break
        lines.append(line)
        size += len(line) + 1
    lines.reverse()
    return "Summary of the conversation so far (it continues after a reconnect):\n" + "\n".join(
        lines
    )
