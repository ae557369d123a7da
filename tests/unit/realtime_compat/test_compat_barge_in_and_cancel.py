"""A response cut short (the user talks over it, or the client cancels it) still closes its
part and item in order, with the partial transcript, and ends ``cancelled``."""

from __future__ import annotations

import pytest
from compat_kit import (
    SPEECH_STARTED,
    done,
    pcm,
    sdk_parse_all,
    started,
    transcript_delta,
    transcript_done,
    translator,
    types,
)

from gateway.edges.realtime.client_wire import ItemTruncate, ResponseCancel
from gateway.edges.realtime.errors import CompatError
from gateway.edges.realtime.server_wire import ServerEvent
from gateway.edges.realtime.translate import Translator

CLOSED_OUT = [
    "response.output_audio.done",
    "response.output_audio_transcript.done",
    "response.content_part.done",
    "response.output_item.done",
    "conversation.item.done",
    "response.done",
]


def speaking(compat: Translator) -> list[ServerEvent]:
    """A reply that has said "Once upon" (100 ms of audio) so far."""
    events = compat.on_event(started())
    events += compat.on_event(transcript_delta("Once "))
    events += compat.on_audio(pcm(60))
    events += compat.on_event(transcript_delta("upon"))
    events += compat.on_audio(pcm(40))
    return events


def test_barge_in_cancels_the_response_with_the_partial_transcript() -> None:
    compat = translator()
    events = speaking(compat)
    interrupted = compat.on_event(SPEECH_STARTED)
    assert types(interrupted) == ["input_audio_buffer.speech_started"]
    # The upstream's transcript.done may still carry the whole planned sentence.
    interrupted += compat.on_event(transcript_done("Once upon a time there was"))
    interrupted += compat.on_event(done("interrupted", "Once upon"))
    assert types(interrupted) == ["input_audio_buffer.speech_started", *CLOSED_OUT]
    sdk_parse_all(events + interrupted)
    transcript = interrupted[2]
    assert transcript["transcript"] == "Once upon"
    item = interrupted[4]["item"]
    assert item["status"] == "incomplete"
    assert item["content"] == [{"type": "output_audio", "transcript": "Once upon"}]
    response = interrupted[-1]["response"]
    assert response["status"] == "cancelled"
    assert response["status_details"] == {"type": "cancelled", "reason": "turn_detected"}
    assert response["output"] == [item]


def test_the_interrupting_utterance_is_committed_when_the_next_reply_starts() -> None:
    compat = translator()
    speaking(compat)
    (speech,) = compat.on_event(SPEECH_STARTED)
    compat.on_event(done("interrupted", "Once upon"))
    compat.input_appended(len(pcm(800)))
    following = compat.on_event(started("r2"))
    assert types(following) == [
        "input_audio_buffer.speech_stopped",
        "input_audio_buffer.committed",
        "conversation.item.added",
        "conversation.item.done",
        "response.created",
    ]
    assert following[1]["item_id"] == speech["item_id"]
    sdk_parse_all(following)


def test_a_client_cancel_names_the_gateways_response_and_ends_client_cancelled() -> None:
    compat = translator()
    events = speaking(compat)
    response_id = events[0]["response"]["id"]
    assert compat.cancel_target(ResponseCancel()) == "r1"
    assert compat.cancel_target(ResponseCancel(response_id=response_id)) == "r1"
    cancelled = compat.on_event(done("cancelled", "Once upon"))
    assert types(cancelled) == CLOSED_OUT
    assert cancelled[-1]["response"]["status_details"] == {
        "type": "cancelled",
        "reason": "client_cancelled",
    }
    sdk_parse_all(cancelled)


def test_cancelling_with_nothing_active_is_refused_as_openai_does() -> None:
    compat = translator()
    with pytest.raises(CompatError) as caught:
        compat.cancel_target(ResponseCancel(event_id="evt_9"))
    assert caught.value.code == "response_cancel_not_active"
    assert caught.value.message == "Cancellation failed: no active response found"
    assert caught.value.event_id == "evt_9"
    speaking(compat)
    with pytest.raises(CompatError):
        compat.cancel_target(ResponseCancel(response_id="resp_other"))


def test_a_cancel_before_anything_was_said_has_no_output() -> None:
    compat = translator()
    events = compat.on_event(started()) + compat.on_event(done("cancelled", ""))
    assert types(events) == ["response.created", "response.done"]
    assert events[-1]["response"]["status"] == "cancelled"


def test_truncating_the_interrupted_item_tells_the_gateway_what_was_played() -> None:
    compat = translator()
    events = speaking(compat)
    item_id = events[1]["item"]["id"]
    compat.on_event(SPEECH_STARTED)
    truncation = compat.truncate_item(
        ItemTruncate(item_id=item_id, content_index=0, audio_end_ms=70, event_id="e1")
    )
    assert (truncation.response_id, truncation.played_ms) == ("r1", 70)
    assert types(truncation.events) == ["conversation.item.truncated"]
    assert truncation.events[0]["audio_end_ms"] == 70
    sdk_parse_all(truncation.events)
    # The response may already be done when the client's truncate arrives: still valid.
    compat.on_event(done("interrupted", "Once upon"))
    later = compat.truncate_item(ItemTruncate(item_id=item_id, content_index=0, audio_end_ms=100))
    assert later.played_ms == 100


def test_a_truncate_beyond_the_audio_or_of_no_audio_is_refused() -> None:
    compat = translator()
    events = speaking(compat)
    item_id = events[1]["item"]["id"]
    with pytest.raises(CompatError) as too_long:
        compat.truncate_item(ItemTruncate(item_id=item_id, content_index=0, audio_end_ms=101))
    assert too_long.value.message == "Audio content of 100ms is already shorter than 101ms"
    assert too_long.value.param == "audio_end_ms"
    with pytest.raises(CompatError) as unknown:
        compat.truncate_item(ItemTruncate(item_id="item_x", content_index=0, audio_end_ms=1))
    assert unknown.value.param == "item_id"
    compat.on_event(done("completed", "Once upon"))
    user = compat.on_event(SPEECH_STARTED)[0]["item_id"]
    compat.input_appended(len(pcm(500)))
    compat.on_event(started("r2"))
    with pytest.raises(CompatError) as not_audio:
        compat.truncate_item(ItemTruncate(item_id=user, content_index=0, audio_end_ms=1))
    assert not_audio.value.message == "Only model output audio messages can be truncated"
