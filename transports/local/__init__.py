"""The embedded local model: deterministic, scriptable, no network and no key.

``LocalBrain`` (pure) decides replies; ``LocalTransport`` (async) implements the neutral
``Transport`` interface around it. See ``README.md`` in this folder for the rules and the
scenario format.
"""

from __future__ import annotations

from pathlib import Path

from transports.local.brain import (
    BAD_JSON_ARGUMENTS,
    FAIL_MESSAGE,
    CallTools,
    Fail,
    LocalBrain,
    PendingConfirmation,
    Reply,
    Say,
    ToolCall,
    ToolResultTuple,
    compact_json,
    merge_confirmation_id,
    utterance_transcript,
)
from transports.local.scenario import Scenario, ScenarioError
from transports.local.speech import CHUNK_MS, WORD_GAP_MS, WORD_MS, WORD_TONE_MS, word_audio_bytes
from transports.local.transport import LocalTransport
from transports.local.vad import EnergyVad

__all__ = [
    "BAD_JSON_ARGUMENTS",
    "CHUNK_MS",
    "EXAMPLE_SCENARIOS",
    "FAIL_MESSAGE",
    "WORD_GAP_MS",
    "WORD_MS",
    "WORD_TONE_MS",
    "CallTools",
    "EnergyVad",
    "Fail",
    "LocalBrain",
    "LocalTransport",
    "PendingConfirmation",
    "Reply",
    "Say",
    "Scenario",
    "ScenarioError",
    "ToolCall",
    "ToolResultTuple",
    "compact_json",
    "merge_confirmation_id",
    "utterance_transcript",
    "word_audio_bytes",
]

EXAMPLE_SCENARIOS = Path(__file__).resolve().parent / "scenarios"
"""Folder of the scenarios shipped as examples (``booking.json``)."""
