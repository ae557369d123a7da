"""What the codec remembers of one model response: its audio items, texts, calls and fate."""

from __future__ import annotations

from dataclasses import dataclass, field

from transports import events as ev
from transports.openai_realtime import wire
from transports.openai_realtime.replay import Entry

__all__ = ["AudioItem", "ResponseState", "heard_words"]


@dataclass(slots=True)
class AudioItem:
    item_id: str
    forwarded: int = 0  # bytes passed on to the session
    received: int = 0  # bytes the server produced (more than forwarded after a barge-in)
    done: bool = False
    heard_ms: int | None = None  # set by a truncate: what the user heard of it
    bytes_per_ms: int = wire.AUDIO_BYTES_PER_MS  # of the session's output format

    @property
    def forwarded_ms(self) -> int:
        return self.forwarded // self.bytes_per_ms

    @property
    def received_ms(self) -> int:
        return self.received // self.bytes_per_ms


@dataclass(slots=True)
class ResponseState:
    response_id: str
    audio: list[AudioItem] = field(default_factory=list)
    texts: dict[str, list[str]] = field(default_factory=dict)  # message item id → text parts
    calls: dict[str, ev.RequestedCall] = field(default_factory=dict)
    # Replay entries of its message items, made when each item first appeared, so that the
    # replayed conversation keeps the server's order; filled in when the response ends.
    entries: dict[str, Entry] = field(default_factory=dict)
    interrupted: bool = False  # barge-in: the user is talking over it
    cancel_sent: bool = False
    cancelled_by_client: bool = False  # response.cancel or a newer message: status cancelled
    ended: bool = False  # a ResponseDone went to the session already
    # An out-of-band response (a holding line): nothing of it enters the replayed conversation.
    aside: bool = False
    bytes_per_ms: int = wire.AUDIO_BYTES_PER_MS  # of the session's output format

    def audio_item(self, item_id: str) -> AudioItem:
        for item in reversed(self.audio):
            if item.item_id == item_id:
                return item
        item = AudioItem(item_id, bytes_per_ms=self.bytes_per_ms)
        self.audio.append(item)
        return item

    def heard_text(self, item_id: str) -> str:
        """The item's text as the user got it: cut to the words heard if it was truncated."""
        text = "".join(self.texts.get(item_id, ())).strip()
        for item in self.audio:
            if item.item_id == item_id and item.heard_ms is not None and item.received_ms > 0:
                return heard_words(text, item.heard_ms / item.received_ms)
        return text


def heard_words(text: str, fraction: float) -> str:
    words = text.split()
    return " ".join(words[: round(len(words) * min(1.0, fraction))])
