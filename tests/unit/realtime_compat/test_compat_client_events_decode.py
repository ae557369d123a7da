"""Every GA client event an OpenAI Realtime client sends decodes to its typed event.

The samples are the SDK's own frames (captured from it, byte for byte), shapes the SDK's param
types accept (checked with ``RealtimeClientEventParam``), and what the Agents SDK sends.
"""

from __future__ import annotations

from typing import Any

import pytest
from compat_kit import CLIENT_PARAMS, b64, frame, pcm

from gateway.edges.realtime.client_wire import (
    FunctionCallOutput,
    InputAudio,
    InputAudioAppend,
    InputAudioClear,
    InputAudioCommit,
    InputText,
    ItemCreate,
    ItemDelete,
    ItemRetrieve,
    ItemTruncate,
    ResponseCancel,
    ResponseCreate,
    SessionUpdate,
    SystemMessage,
    UnknownEvent,
    UserMessage,
    decode_client_event,
)
from gateway.edges.realtime.session_config import KEEP, ForcedFunction, FunctionTool

# The official SDK's first frames, exactly as it serialises them (a capture); the append
# carries 4 bytes here (the capture's "AAAA" is 3 bytes, half a sample: refused, see the
# refusal tests).
SDK_FRAMES = [
    '{"type": "session.update", "session": {"type": "realtime", "instructions": "Be brief.", '
    '"output_modalities": ["audio"], "audio": {"input": {"format": {"type": "audio/pcm", "rate": '
    '24000}, "turn_detection": {"type": "server_vad", "silence_duration_ms": 500}}, "output": '
    '{"format": {"type": "audio/pcm", "rate": 24000}, "voice": "marin"}}, "tools": [{"type": '
    '"function", "name": "get_weather", "description": "Get current weather for a city", '
    '"parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": '
    '["city"]}}], "tool_choice": "auto"}}',
    '{"type": "response.create"}',
    '{"type": "conversation.item.create", "item": {"type": "function_call_output", "call_id": '
    '"call_000005", "output": "{\\"temp_c\\": 21, \\"sky\\": \\"clear\\"}"}}',
    '{"type": "input_audio_buffer.append", "audio": "AAAAAA==", "event_id": "evt_client_1"}',
    '{"type": "input_audio_buffer.commit"}',
    '{"type": "conversation.item.truncate", "audio_end_ms": 1234, "content_index": 0, '
    '"item_id": "item_1"}',
    '{"type": "response.cancel", "response_id": "resp_1"}',
]


def test_the_sdk_frames_decode_to_their_events() -> None:
    update, create, output, append, commit, truncate, cancel = (
        decode_client_event(text) for text in SDK_FRAMES
    )
    assert isinstance(update, SessionUpdate)
    patch = update.session
    assert patch.instructions == "Be brief."
    assert patch.modality == "audio"
    assert patch.voice == "marin"
    assert patch.turn_detection == {"type": "server_vad", "silence_duration_ms": 500}
    assert patch.transcription is KEEP
    assert patch.tool_choice == "auto"
    assert patch.tools == (
        FunctionTool(
            name="get_weather",
            description="Get current weather for a city",
            parameters={
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        ),
    )
    assert patch.ignored == ()
    assert create == ResponseCreate()
    assert isinstance(output, ItemCreate)
    assert output.item == FunctionCallOutput(
        id=None, call_id="call_000005", output='{"temp_c": 21, "sky": "clear"}'
    )
    assert append == InputAudioAppend(
        audio=b"\x00\x00\x00\x00", encoded="AAAAAA==", event_id="evt_client_1"
    )
    assert commit == InputAudioCommit()
    assert truncate == ItemTruncate(item_id="item_1", content_index=0, audio_end_ms=1234)
    assert cancel == ResponseCancel(response_id="resp_1")


# Shapes the SDK's own param types accept (TypedDicts, validated with pydantic).
SDK_PARAM_SAMPLES: list[dict[str, Any]] = [
    {"type": "input_audio_buffer.append", "audio": b64(pcm(20)), "event_id": "e1"},
    {"type": "input_audio_buffer.clear", "event_id": "e2"},
    {"type": "conversation.item.delete", "item_id": "item_9", "event_id": "e3"},
    {"type": "conversation.item.retrieve", "item_id": "item_9"},
    {
        "type": "conversation.item.create",
        "previous_item_id": "root",
        "item": {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "hi"},
                {"type": "input_audio", "audio": b64(pcm(10)), "transcript": "hello"},
            ],
        },
    },
    {
        "type": "conversation.item.create",
        "item": {
            "id": "item_sys",
            "type": "message",
            "role": "system",
            "content": [{"type": "input_text", "text": "Be terse."}],
        },
    },
    {
        "type": "response.create",
        "response": {
            "instructions": "Say hi.",
            "output_modalities": ["text"],
            "conversation": "none",
            "metadata": {"topic": "greeting"},
            "max_output_tokens": 200,
        },
    },
    {"type": "response.cancel"},
]


@pytest.mark.parametrize("sample", SDK_PARAM_SAMPLES, ids=lambda s: str(s["type"]))
def test_sdk_shaped_samples_are_valid_for_the_sdk(sample: dict[str, Any]) -> None:
    CLIENT_PARAMS.validate_python(sample)


def test_append_decodes_base64_into_pcm_bytes() -> None:
    event = decode_client_event(frame(SDK_PARAM_SAMPLES[0]))
    assert isinstance(event, InputAudioAppend)
    assert (event.audio, event.event_id) == (pcm(20), "e1")
    assert event.encoded == SDK_PARAM_SAMPLES[0]["audio"]  # as sent, for the upstream


def test_clear_delete_and_retrieve_decode() -> None:
    assert decode_client_event(frame(SDK_PARAM_SAMPLES[1])) == InputAudioClear(event_id="e2")
    assert decode_client_event(frame(SDK_PARAM_SAMPLES[2])) == ItemDelete(
        item_id="item_9", event_id="e3"
    )
    assert decode_client_event(frame(SDK_PARAM_SAMPLES[3])) == ItemRetrieve(item_id="item_9")


def test_user_and_system_messages_decode_with_their_parts() -> None:
    user = decode_client_event(frame(SDK_PARAM_SAMPLES[4]))
    assert isinstance(user, ItemCreate)
    assert user.previous_item_id == "root"
    assert user.item == UserMessage(
        id=None, content=(InputText("hi"), InputAudio(pcm(10), "hello"))
    )
    assert user.item.text == "hi"
    assert user.item.to_wire("item_1")["content"] == [
        {"type": "input_text", "text": "hi"},
        {"type": "input_audio", "transcript": "hello"},  # audio bytes are never echoed
    ]
    system = decode_client_event(frame(SDK_PARAM_SAMPLES[5]))
    assert isinstance(system, ItemCreate)
    assert system.item == SystemMessage(id="item_sys", content=(InputText("Be terse."),))


def test_response_create_keeps_what_applies_and_lists_what_is_ignored() -> None:
    event = decode_client_event(frame(SDK_PARAM_SAMPLES[6]))
    assert isinstance(event, ResponseCreate)
    params = event.response
    assert params.instructions == "Say hi."
    assert params.modality == "text"
    assert params.out_of_band is True
    assert params.metadata == {"topic": "greeting"}
    assert params.ignored == ("response.max_output_tokens",)


def test_cancel_without_an_id_cancels_the_current_response() -> None:
    assert decode_client_event(frame(SDK_PARAM_SAMPLES[7])) == ResponseCancel()


def test_the_agents_sdk_session_update_decodes() -> None:
    # What openai-agents sends on connect (its defaults), then its tracing update.
    update = {
        "type": "session.update",
        "session": {
            "type": "realtime",
            "model": "gpt-realtime",
            "output_modalities": ["audio"],
            "instructions": "You are helpful.",
            "audio": {
                "input": {
                    "format": {"type": "audio/pcm", "rate": 24000},
                    "transcription": {"model": "gpt-4o-mini-transcribe"},
                    "turn_detection": {"type": "semantic_vad", "interrupt_response": True},
                    "noise_reduction": {"type": "near_field"},
                },
                "output": {"format": {"type": "audio/pcm"}, "voice": "ash", "speed": 1.0},
            },
            "tools": [],
            "tool_choice": {"type": "function", "name": "lookup"},
        },
    }
    CLIENT_PARAMS.validate_python(update)
    event = decode_client_event(frame(update))
    assert isinstance(event, SessionUpdate)
    patch = event.session
    assert patch.turn_detection == {"type": "semantic_vad", "interrupt_response": True}
    assert patch.transcription == {"model": "gpt-4o-mini-transcribe"}
    assert patch.voice == "ash"
    assert patch.tools == ()
    assert patch.tool_choice == ForcedFunction("lookup")
    assert patch.ignored == (
        "session.model",
        "session.audio.input.noise_reduction",
        "session.audio.output.speed",
    )
    tracing = {"type": "session.update", "session": {"type": "realtime", "tracing": "auto"}}
    traced = decode_client_event(frame(tracing))
    assert isinstance(traced, SessionUpdate)
    assert traced.session.ignored == ("session.tracing",)


def test_null_turn_detection_and_transcription_mean_clear() -> None:
    update = {
        "type": "session.update",
        "session": {
            "type": "realtime",
            "audio": {"input": {"turn_detection": None, "transcription": None}},
        },
    }
    event = decode_client_event(frame(update))
    assert isinstance(event, SessionUpdate)
    assert event.session.turn_detection is None
    assert event.session.transcription is None


def test_an_unknown_type_decodes_to_unknown_event() -> None:
    event = decode_client_event(b'{"type": "session.teleport", "event_id": "e7", "to": "mars"}')
    assert isinstance(event, UnknownEvent)
    assert event.type == "session.teleport"
    assert event.event_id == "e7"
    assert event.raw["to"] == "mars"


def test_unknown_top_level_keys_are_ignored() -> None:
    assert decode_client_event(b'{"type": "input_audio_buffer.commit", "x": 1}') == (
        InputAudioCommit()
    )
