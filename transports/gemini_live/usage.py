"""Gemini Live's ``usageMetadata`` reports, added up until a response's end carries them. Pure.

A report may ride on any server message (``usageMetadata``, https://ai.google.dev/api/live), and
each covers one generation of the model: the generation that ends in a ``toolCall`` and the one that
answers the tool results are billed apart. So reports are summed, not replaced, and the sum goes
with the next ``ResponseDone`` the codec emits (the tool-call response's included); a report that
comes when no response is open (a turn the client cancelled, a ``turnComplete`` after the calls) is
kept for the next one, not lost.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["add_usage"]

_DETAILS = (
    "promptTokensDetails",
    "responseTokensDetails",
    "candidatesTokensDetails",
    "cacheTokensDetails",
    "toolUsePromptTokensDetails",
)


def add_usage(total: Mapping[str, Any] | None, report: Mapping[str, Any]) -> dict[str, Any]:
    """``total`` plus ``report``: counts added field by field, the per-modality details added
    by modality; anything else is taken from the latest report."""
    summed: dict[str, Any] = dict(total or {})
    for key, value in report.items():
        before = summed.get(key)
        if key in _DETAILS and isinstance(value, list):
            summed[key] = _add_details(before if isinstance(before, list) else [], value)
        elif type(value) is int and type(before) is int:
            summed[key] = before + value
        else:
            summed[key] = value
    return summed


def _add_details(before: list[Any], report: list[Any]) -> list[dict[str, Any]]:
    by_modality: dict[str, int] = {}
    for entry in [*before, *report]:
        if isinstance(entry, Mapping) and type(entry.get("tokenCount")) is int:
            modality = str(entry.get("modality", "TEXT"))
            by_modality[modality] = by_modality.get(modality, 0) + entry["tokenCount"]
    return [{"modality": m, "tokenCount": n} for m, n in by_modality.items()]
