"""The soak's model aliases (``GATEWAY_MODELS``, docs/routing.md) and the failover deadlines its
nodes run with. Pure.

Sessions that talk to OpenAI name an alias, so that a fault of the OpenAI fake moves them to
another provider instead of ending them: browser voice on ``soak-voice`` (OpenAI, then Gemini
Live), ``text_openai`` on ``soak-text-openai`` (OpenAI, then chat completions), and node a's phone
calls on ``soak-voice`` too (``GATEWAY_TWILIO_MODEL``): the OpenAI faults are server-wide, and a
call on OpenAI alone would die of one meant for the others. The other kinds keep the provider
they name alone: the default alias is OpenAI alone, and a session that names a provider and no
model, outside the default alias, is served by that provider only.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = [
    "ALIASES",
    "DEFAULT_ALIAS",
    "FAULTED_PROVIDERS",
    "FIRST_OUTPUT_TEXT_S",
    "FIRST_OUTPUT_VOICE_S",
    "OUTPUT_GAP_S",
    "PHONE_ALIASES",
    "SLACK_S",
    "alias_document",
    "alias_of",
    "alias_text",
    "fallbacks",
    "first_provider",
    "stall_deadline",
    "targets_of",
]

DEFAULT_ALIAS = "soak-openai"
ALIASES: dict[str, tuple[str, ...]] = {
    DEFAULT_ALIAS: ("openai",),
    "soak-voice": ("openai", "gemini"),
    "soak-text-openai": ("openai", "chat"),
}
_KIND_ALIAS = {"voice_openai": "soak-voice", "text_openai": "soak-text-openai"}
# The alias of each node's phone calls (GATEWAY_TWILIO_MODEL): node a's start on OpenAI
# (GATEWAY_TWILIO_PROVIDER); node b's stay on Gemini alone, as they always were.
PHONE_ALIASES = {"a": "soak-voice"}
# The providers the soak makes fail server-wide (``openai_refuse``, ``…_429``, ``…_stall_*``):
# every other target of an alias is healthy all along.
FAULTED_PROVIDERS = frozenset({"openai"})

# The nodes' deadlines (GATEWAY_FIRST_OUTPUT_VOICE_S, _TEXT_S, GATEWAY_OUTPUT_GAP_S, their
# defaults), and how late past one a failover may come (the judgment's slack).
FIRST_OUTPUT_VOICE_S = 2.5
FIRST_OUTPUT_TEXT_S = 5.0
OUTPUT_GAP_S = 3.0
SLACK_S = 1.0


def alias_of(kind: str) -> str | None:
    """The alias a session of ``kind`` names as its ``model`` (None: it names its provider)."""
    return _KIND_ALIAS.get(kind)


def targets_of(alias: str | None) -> tuple[str, ...]:
    return ALIASES.get(alias or "", ())


def first_provider(alias: str | None) -> str | None:
    targets = targets_of(alias)
    return targets[0] if targets else None


def fallbacks(alias: str | None) -> tuple[str, ...]:
    """The alias's targets the soak never makes fail: healthy all along."""
    return tuple(t for t in targets_of(alias) if t not in FAULTED_PROVIDERS)


def stall_deadline(fault: str, voice: bool) -> float:
    """How long after a stall fault met a response its session must have failed over: the
    deadline that applies, plus ``SLACK_S``. ``stall_first``: the first output's. ``stall_mid``:
    the gap's, or the first output's when the response had sent nothing the gateway counts
    as output yet (a tool call's arguments only): the longer."""
    first = FIRST_OUTPUT_VOICE_S if voice else FIRST_OUTPUT_TEXT_S
    if fault == "stall_first":
        return first + SLACK_S
    return max(first, OUTPUT_GAP_S) + SLACK_S


def alias_document() -> dict[str, Any]:
    """The alias file's document (JSON: docs/routing.md section 1)."""
    return {
        "default": DEFAULT_ALIAS,
        "models": {
            name: {
                "description": "the soak's",
                "targets": [{"provider": provider} for provider in targets],
            }
            for name, targets in ALIASES.items()
        },
    }


def alias_text() -> str:
    return json.dumps(alias_document(), indent=1) + "\n"
