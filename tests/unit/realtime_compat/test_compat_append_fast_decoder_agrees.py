"""The relay's decoder of ``input_audio_buffer.append`` (``append_audio``) takes exactly the
appends with audio that the full decoder takes, with the same audio and the same base64, and
nothing that the full decoder refuses or reads as another event."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.edges.realtime.client_wire import (
    ClientEvent,
    InputAudioAppend,
    append_audio,
    decode_client_event,
)
from gateway.edges.realtime.errors import CompatError

APPEND = "input_audio_buffer.append"


def full(frame: str | bytes) -> ClientEvent | None:
    try:
        return decode_client_event(frame)
    except CompatError:
        return None


def assert_agree(frame: str | bytes) -> None:
    fast = append_audio(frame)
    slow = full(frame)
    if type(slow) is InputAudioAppend and slow.audio:
        assert fast == (slow.audio, slow.encoded)
    else:
        assert fast is None, f"the relay took {frame!r}, which decodes to {slow!r}"


ints = st.integers(min_value=-(2**63), max_value=2**63 - 1)  # what JSON carries here
b64_audio = st.binary(max_size=64).map(lambda b: base64.b64encode(b).decode())
odd_or_broken = st.sampled_from(
    ["AAB=", "AAE=", "AAAA\n", " AAAA", "AAA", "AA==AA==", "A===", "AAAA====", "-_-_", "é", ""]
)
audio_values = st.one_of(
    b64_audio,
    odd_or_broken,
    st.text(max_size=12),
    ints,
    st.none(),
    st.lists(ints, max_size=2),
    st.binary(max_size=4).map(lambda b: {"bytes": b.hex()}),
)
kinds = st.one_of(
    st.sampled_from([APPEND, "input_audio_buffer.commit", "response.create", APPEND.upper()]),
    st.none(),
    ints,
)


@st.composite
def events(draw: st.DrawFn) -> dict[str, Any]:
    event: dict[str, Any] = {}
    if draw(st.booleans()):
        event["type"] = draw(kinds)
    if draw(st.booleans()):
        event["audio"] = draw(audio_values)
    if draw(st.booleans()):
        event["event_id"] = draw(st.one_of(st.text(max_size=4), ints))
    if draw(st.booleans()):
        event["extra"] = draw(ints)
    return event


@settings(max_examples=400)
@given(events())
def test_any_event_object_is_taken_by_the_relay_only_as_the_full_decoder_reads_it(
    event: dict[str, Any],
) -> None:
    assert_agree(orjson.dumps(event).decode())
    assert_agree(orjson.dumps(event))


@settings(max_examples=200)
@given(st.text(max_size=40))
def test_any_text_is_taken_by_the_relay_only_as_the_full_decoder_reads_it(frame: str) -> None:
    assert_agree(frame)


@pytest.mark.parametrize(
    ("audio", "taken"),
    [
        ("AAAAAA==", True),  # four bytes: two samples
        ("AAAA", False),  # three bytes: half a sample over
        ("AAB=", True),  # stray padding bits: strict base64 accepts them, and so does OpenAI
        ("AAA=", True),
        ("AA==", False),  # one byte: half a sample
        ("", False),  # nothing to forward: the full decoder's path (an empty append)
        ("AAAA\n", False),
        ("AA AA", False),
        ("AAAA====", False),
    ],
)
def test_the_relay_decoder_on_the_edges_of_base64(audio: str, taken: bool) -> None:
    frame = orjson.dumps({"type": APPEND, "audio": audio, "event_id": "evt_1"}).decode()
    assert_agree(frame)
    assert (append_audio(frame) is not None) is taken


def test_the_relay_decoder_keeps_the_clients_base64_as_sent() -> None:
    frame = orjson.dumps({"type": APPEND, "audio": "AAB="}).decode()
    assert append_audio(frame) == (b"\x00\x00", "AAB=")
