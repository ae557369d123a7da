"""A voice turn with server VAD becomes the GA event sequence in OpenAI's order (docs/protocol.md
10.15), with consistent ids, ``output_index`` / ``content_index`` and ``previous_item_id``."""

from __future__ import annotations

from typing import Any

from compat_kit import (
    SPEECH_STARTED,
    done,
    pcm,
    sdk_parse_all,
    started,
    transcript_delta,
    transcript_done,
    translator,
    typed,
    types,
    user_transcript_done,
)

from gateway.edges.realtime.server_wire import ServerEvent
from gateway.edges.realtime.translate import Translator

VOICE_TURN = [
    "input_audio_buffer.speech_started",
    "input_audio_buffer.speech_stopped",
    "input_audio_buffer.committed",
    "conversation.item.added",  # the user's audio message
    "conversation.item.done",
    "response.created",
    "response.output_item.added",
    "conversation.item.added",  # the assistant's message, in progress
    "response.content_part.added",
    "response.output_audio_transcript.delta",
    "response.output_audio.delta",
    "response.output_audio.delta",
    "conversation.item.input_audio_transcription.completed",
    "response.output_audio_transcript.delta",
    "response.output_audio.delta",
    "response.output_audio.done",
    "response.output_audio_transcript.done",
    "response.content_part.done",
    "response.output_item.done",
    "conversation.item.done",
    "response.done",
]


def voice_turn(compat: Translator, response_id: str = "r1") -> list[ServerEvent]:
    """What the gateway sends for one spoken question and its spoken answer."""
    compat.input_appended(len(pcm(1000)))  # a second of silence first
    events = compat.on_event(SPEECH_STARTED)
    compat.input_appended(len(pcm(1500)))  # the question, then the VAD's silence
    events += compat.on_event(started(response_id))
    events += compat.on_event(transcript_delta("Hello", response_id))
    events += compat.on_audio(pcm(20))
    events += compat.on_audio(pcm(20))
    events += compat.on_event(user_transcript_done("what time is it"))
    events += compat.on_event(transcript_delta(" there", response_id))
    events += compat.on_audio(pcm(20))
    events += compat.on_event(transcript_done("Hello there", response_id))
    events += compat.on_event(done("completed", "Hello there", response_id))
    return events


def by_type(events: list[ServerEvent], kind: str) -> list[ServerEvent]:
    return [event for event in events if event["type"] == kind]


def test_a_voice_turn_is_the_ga_sequence_in_order() -> None:
    events = voice_turn(translator(transcription={"model": "whisper-1"}))
    assert types(events) == VOICE_TURN
    sdk_parse_all(events)


def test_event_ids_are_unique() -> None:
    events = voice_turn(translator())
    ids = [event["event_id"] for event in events]
    assert len(set(ids)) == len(ids)


def test_the_user_item_is_one_id_from_speech_start_to_transcript() -> None:
    events = voice_turn(translator(transcription={"model": "whisper-1"}))
    (speech,) = by_type(events, "input_audio_buffer.speech_started")
    user_item = speech["item_id"]
    (stopped,) = by_type(events, "input_audio_buffer.speech_stopped")
    (committed,) = by_type(events, "input_audio_buffer.committed")
    (transcribed,) = by_type(events, "conversation.item.input_audio_transcription.completed")
    assert stopped["item_id"] == committed["item_id"] == transcribed["item_id"] == user_item
    assert speech["audio_start_ms"] == 1000 - 300  # the position, less the prefix padding
    assert stopped["audio_end_ms"] == 2500
    assert committed["previous_item_id"] is None
    added, _ = by_type(events, "conversation.item.added")
    assert added["item"] == {
        "id": user_item,
        "object": "realtime.item",
        "type": "message",
        "status": "completed",
        "role": "user",
        "content": [{"type": "input_audio", "transcript": None}],
    }
    assert transcribed["transcript"] == "what time is it"
    assert transcribed["content_index"] == 0
    assert transcribed["usage"] == {"type": "duration", "seconds": 1.8}


def test_the_response_and_its_item_keep_their_ids_and_indexes() -> None:
    events = voice_turn(translator())
    response_id = by_type(events, "response.created")[0]["response"]["id"]
    item_id = by_type(events, "response.output_item.added")[0]["item"]["id"]
    for event in events[events.index(by_type(events, "response.created")[0]) + 1 :]:
        if "response_id" in event:
            assert event["response_id"] == response_id
            assert event["output_index"] == 0
        if "content_index" in event:
            assert event["item_id"] == item_id
            assert event["content_index"] == 0
    assert by_type(events, "response.done")[0]["response"]["id"] == response_id


def test_the_assistant_item_follows_the_user_item() -> None:
    events = voice_turn(translator())
    user_added, assistant_added = by_type(events, "conversation.item.added")
    _, assistant_done = by_type(events, "conversation.item.done")
    assert assistant_added["previous_item_id"] == user_added["item"]["id"]
    assert assistant_done["previous_item_id"] == user_added["item"]["id"]
    assert assistant_added["item"]["status"] == "in_progress"
    assert assistant_added["item"]["content"] == []


def test_the_done_events_carry_the_whole_transcript() -> None:
    events = voice_turn(translator())
    (part_added,) = by_type(events, "response.content_part.added")
    assert part_added["part"] == {"type": "audio", "transcript": ""}
    (transcript,) = by_type(events, "response.output_audio_transcript.done")
    assert transcript["transcript"] == "Hello there"
    (part_done,) = by_type(events, "response.content_part.done")
    assert part_done["part"] == {"type": "audio", "transcript": "Hello there"}
    final_item = {
        "id": part_done["item_id"],
        "object": "realtime.item",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_audio", "transcript": "Hello there"}],
    }
    assert by_type(events, "response.output_item.done")[0]["item"] == final_item
    assert by_type(events, "conversation.item.done")[1]["item"] == final_item
    response = by_type(events, "response.done")[0]["response"]
    assert response["status"] == "completed"
    assert response["status_details"] is None
    assert response["output"] == [final_item]
    assert response["output_modalities"] == ["audio"]
    assert response["conversation_id"] == "conv_1"
    assert response["usage"]["total_tokens"] == 0


def test_response_created_is_in_progress_without_output() -> None:
    (created,) = by_type(voice_turn(translator()), "response.created")
    response: dict[str, Any] = created["response"]
    assert (response["status"], response["output"], response["usage"]) == ("in_progress", [], None)
    assert response["audio"]["output"] == {
        "format": {"type": "audio/pcm", "rate": 24000},
        "voice": "alloy",
    }


def test_the_usage_the_provider_reported_is_kept() -> None:
    compat = translator()
    compat.on_event(started())
    compat.on_event(transcript_delta("Hi"))
    usage = {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
    (*_, response_done) = compat.on_event(done("completed", "Hi", usage=usage))
    assert response_done["response"]["usage"]["input_tokens"] == 12
    assert response_done["response"]["usage"]["output_tokens"] == 3
    assert response_done["response"]["usage"]["total_tokens"] == 15
    sdk_parse_all([response_done])


def test_without_transcription_the_user_item_still_comes_but_no_transcript() -> None:
    events = voice_turn(translator())  # the session's transcription is null
    assert "conversation.item.input_audio_transcription.completed" not in types(events)
    assert "input_audio_buffer.committed" in types(events)


def test_a_second_turn_chains_after_the_first() -> None:
    compat = translator()
    first = voice_turn(compat, "r1")
    second = voice_turn(compat, "r2")
    assert types(second) == [t for t in VOICE_TURN if "transcription" not in t]
    first_assistant = by_type(first, "response.output_item.done")[0]["item"]["id"]
    (committed,) = by_type(second, "input_audio_buffer.committed")
    assert committed["previous_item_id"] == first_assistant
    assert by_type(second, "response.output_item.added")[0]["output_index"] == 0
    first_id = by_type(first, "response.created")[0]["response"]["id"]
    second_id = by_type(second, "response.created")[0]["response"]["id"]
    assert first_id != second_id
    sdk_parse_all(second)


def test_a_response_that_only_ran_the_gateways_tools_has_no_output() -> None:
    compat = translator()
    events = compat.on_event(started())
    events += compat.on_event(
        typed({"type": "tool.started", "call_id": "c1", "name": "x", "arguments": {}})
    )
    events += compat.on_event(done("completed", ""))
    assert types(events) == ["response.created", "response.done"]
    assert events[-1]["response"]["output"] == []


def test_a_reply_that_was_not_streamed_is_said_at_its_end() -> None:
    compat = translator()
    events = compat.on_event(started()) + compat.on_event(done("completed", "All done."))
    assert types(events)[1:4] == [
        "response.output_item.added",
        "conversation.item.added",
        "response.content_part.added",
    ]
    assert by_type(events, "response.output_audio_transcript.done")[0]["transcript"] == "All done."
    sdk_parse_all(events)


def test_a_user_transcript_streamed_while_speaking_does_not_end_the_utterance() -> None:
    compat = translator(transcription={"model": "whisper-1"})
    (speech,) = compat.on_event(SPEECH_STARTED)
    delta = {"type": "transcript.delta", "role": "user", "delta": "what"}
    streamed = compat.on_event(typed(delta))
    assert types(streamed) == ["conversation.item.input_audio_transcription.delta"]
    assert streamed[0]["item_id"] == speech["item_id"]
    compat.input_appended(len(pcm(400)))
    ended = compat.on_event(user_transcript_done("what time"))
    assert types(ended) == [
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
        "conversation.item.added",
        "conversation.item.done",
        "conversation.item.input_audio_transcription.completed",
    ]
    assert {event.get("item_id", event.get("item", {}).get("id")) for event in ended} == {
        speech["item_id"]
    }
    sdk_parse_all(streamed + ended)


def test_a_transcript_without_an_utterance_gets_a_user_item_of_its_own() -> None:
    compat = translator(transcription={"model": "whisper-1"})
    events = compat.on_event(user_transcript_done("typed elsewhere"))
    assert types(events) == [
        "input_audio_buffer.committed",
        "conversation.item.added",
        "conversation.item.done",
        "conversation.item.input_audio_transcription.completed",
    ]
    sdk_parse_all(events)
