"""The conversation as the GA client sees it: ordered items (no audio), for ``previous_item_id``,
``conversation.item.delete`` / ``retrieve`` / ``truncate`` and the duplicate-id check.

Pure. Items are kept in their wire form (dicts); callers get copies, so an event already
built never changes afterwards. Audio is never kept: ``conversation.item.retrieved`` carries the
item without its audio bytes (OpenAI's includes them).
"""

from __future__ import annotations

import copy
from typing import Any

from .errors import CompatError

__all__ = ["ROOT", "ItemLog", "not_found"]

ROOT = "root"  # ``previous_item_id`` that puts an item first


class ItemLog:
    def __init__(self) -> None:
        self._order: list[str] = []
        self._items: dict[str, dict[str, Any]] = {}

    def __contains__(self, item_id: object) -> bool:
        return item_id in self._items

    def __len__(self) -> int:
        return len(self._order)

    def snapshot(self, item_id: str) -> dict[str, Any] | None:
        item = self._items.get(item_id)
        return None if item is None else copy.deepcopy(item)

    def check_new(self, item_id: str, previous_item_id: str | None) -> None:
        """Raise what ``add`` would (an id in use, an unknown ``previous_item_id``)."""
        if item_id in self._items:
            raise CompatError(
                "invalid_value", f"Item with item_id '{item_id}' already exists.", param="item.id"
            )
        if previous_item_id not in (None, ROOT) and previous_item_id not in self._items:
            raise CompatError(
                "invalid_value",
                f"Previous item with item_id '{previous_item_id}' not found in the conversation.",
                param="previous_item_id",
            )

    def add(self, item: dict[str, Any], previous_item_id: str | None = None) -> str | None:
        """Insert a copy after ``previous_item_id`` (None: at the end; ``ROOT``: first).

        Returns the id of the item now before it: the events' ``previous_item_id``."""
        item_id: str = item["id"]
        self.check_new(item_id, previous_item_id)
        if previous_item_id is None:
            index = len(self._order)
        elif previous_item_id == ROOT:
            index = 0
        else:
            index = self._order.index(previous_item_id) + 1
        self._order.insert(index, item_id)
        self._items[item_id] = copy.deepcopy(item)
        return self._order[index - 1] if index > 0 else None

    def replace(self, item: dict[str, Any]) -> None:
        """The final form of an item already added (a finished assistant message)."""
        if item["id"] in self._items:
            self._items[item["id"]] = copy.deepcopy(item)

    def previous_of(self, item_id: str) -> str | None:
        """The id before ``item_id`` (None when it is first, or no longer there)."""
        if item_id not in self._items:
            return None
        index = self._order.index(item_id)
        return self._order[index - 1] if index > 0 else None

    def remove(self, item_id: str) -> None:
        if item_id not in self._items:
            raise not_found(item_id)
        self._order.remove(item_id)
        del self._items[item_id]

    def set_transcript(self, item_id: str, transcript: str) -> None:
        """The transcription of a user audio item, once known."""
        item = self._items.get(item_id)
        if item is None:
            return
        for part in item.get("content", ()):
            if part.get("type") == "input_audio":
                part["transcript"] = transcript
                return


def not_found(item_id: str) -> CompatError:
    return CompatError(
        "invalid_value",
        f"Item with item_id '{item_id}' not found in the conversation.",
        param="item_id",
    )
