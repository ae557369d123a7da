"""A session snapshot as the Redis store writes it, and back: nothing lost, older records read."""

from __future__ import annotations

import orjson
import pytest

from gateway.store import SessionSnapshot
from gateway.store.serial import snapshot_from_json, snapshot_to_json
from transports.base import ConversationItem

PHONE_CALL = SessionSnapshot(
    provider="openai",
    mode="voice",
    input_rate=8000,
    output_rate=8000,
    enabled_tools=("get_current_time",),
    instructions="Be brief.",
    voice="marin",
    audio_encoding="pcmu",
    turn_number=3,
    retrieval_calls=1,
    rounds=2,
    last_user_text="what time is it",
    pending_messages=("remember this",),
    history=(ConversationItem("user", "hello"), ConversationItem("assistant", "hi")),
    usage={"responses": 2, "tokens": {"input_audio": 40}, "audio_in_s": 3.5},
    client_tools=({"name": "lookup_order", "description": "", "parameters": {"type": "object"}},),
)


def test_a_snapshot_reads_back_as_written() -> None:
    assert snapshot_from_json(snapshot_to_json(PHONE_CALL)) == PHONE_CALL


def test_a_record_written_before_audio_encodings_reads_as_pcm16() -> None:
    raw = orjson.loads(snapshot_to_json(PHONE_CALL))
    del raw["audio_encoding"]
    assert snapshot_from_json(orjson.dumps(raw)).audio_encoding == "pcm16"


def test_a_record_written_before_usage_was_kept_reads_with_none() -> None:
    raw = orjson.loads(snapshot_to_json(PHONE_CALL))
    del raw["usage"]
    assert snapshot_from_json(orjson.dumps(raw)).usage == {}


def test_a_record_of_another_format_is_refused_whole() -> None:
    raw = orjson.loads(snapshot_to_json(PHONE_CALL))
    raw["format"] = 99
    with pytest.raises(ValueError, match="snapshot format"):
        snapshot_from_json(orjson.dumps(raw))
