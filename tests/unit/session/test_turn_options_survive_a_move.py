"""A session's turn detection and tool choice go with its snapshot (a resume or a move to
another node: ``docs/protocol.md`` 10.13) and come back as they were; a record written before
they existed reads as the defaults. Pure."""

from __future__ import annotations

import orjson

from gateway.session.snapshot import Conversation, Profile, snapshot
from gateway.store import SessionSnapshot
from gateway.store.serial import snapshot_from_json, snapshot_to_json
from transports.base import ForcedTool, TurnDetection

SETUP = SessionSnapshot(
    provider="gemini",
    mode="voice",
    input_rate=16000,
    output_rate=24000,
    enabled_tools=None,
    instructions="Be brief.",
    turn_detection={"type": "server_vad", "silence_duration_ms": 800},
    tool_choice={"type": "function", "name": "get_weather"},
)


def test_the_options_go_through_the_store_and_back() -> None:
    profile = Profile.of(snapshot_from_json(snapshot_to_json(SETUP)))
    assert profile.turn_detection == TurnDetection(
        settings={"type": "server_vad", "silence_duration_ms": 800}
    )
    assert profile.tool_choice == ForcedTool("get_weather")
    profile.turn_detection, profile.tool_choice = TurnDetection(manual=True), "none"
    moved = snapshot_from_json(snapshot_to_json(snapshot(profile, Conversation(120.0))))
    again = Profile.of(moved)
    assert (again.turn_detection, again.tool_choice) == (TurnDetection(manual=True), "none")


def test_a_record_from_before_the_options_reads_as_the_defaults() -> None:
    raw = orjson.loads(snapshot_to_json(SETUP))
    del raw["turn_detection"], raw["tool_choice"]
    profile = Profile.of(snapshot_from_json(orjson.dumps(raw)))
    assert (profile.turn_detection, profile.tool_choice) == (TurnDetection(), "auto")
