"""``LocalTransport`` driven directly: event sequences of text, voice and tool turns.

No sleeps: every test awaits the events it expects, under ``asyncio.timeout`` so a bug fails fast.
An input that must produce nothing is followed by a marker message: the next event must then be
the marker's ``ResponseStarted``, as events are queued in order.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import Protocol

import pytest

from transports.base import Mode, ToolResult, UpstreamConfig
from transports.events import (
    AudioDelta,
    RequestedCall,
    ResponseDone,
    ResponseStarted,
    SpeechStarted,
    SpeechStopped,
    TextDelta,
    ToolCallsRequested,
    TranscriptDelta,
    TranscriptDone,
    UpstreamEvent,
    UpstreamFailed,
    UserInputTranscribed,
)
from transports.local import EXAMPLE_SCENARIOS, LocalBrain, LocalTransport, word_audio_bytes
from transports.local.tones import silence, tone

TIMEOUT_S = 5
INPUT_RATE = 16000


class Harness:
    """One connected transport and the single reader of its events."""

    def __init__(self, transport: LocalTransport) -> None:
        self.transport = transport
        self._events = transport.events()

    async def next(self) -> UpstreamEvent:
        async with asyncio.timeout(TIMEOUT_S):
            return await anext(self._events)

    async def until(self, done: Callable[[UpstreamEvent], bool]) -> list[UpstreamEvent]:
        """Events up to and including the first one for which ``done`` is true."""
        seen: list[UpstreamEvent] = []
        async with asyncio.timeout(TIMEOUT_S):
            async for event in self._events:
                seen.append(event)
                if done(event):
                    return seen
        raise AssertionError(f"events ended before the expected one: {seen}")

    async def response(self, response_id: str) -> list[UpstreamEvent]:
        return await self.until(
            lambda e: isinstance(e, ResponseDone) and e.response_id == response_id
        )

    async def rest(self) -> list[UpstreamEvent]:
        """Every event left, once the transport has ended its events."""
        async with asyncio.timeout(TIMEOUT_S):
            return [event async for event in self._events]

    async def close(self) -> None:
        await self.transport.close()
        await self.rest()


class OpenTransport(Protocol):
    async def __call__(
        self,
        mode: Mode = "text",
        *,
        pace: float = 0.0,
        brain: LocalBrain | None = None,
        output_rate: int = 24000,
    ) -> Harness: ...


@pytest.fixture
async def open_transport() -> AsyncIterator[OpenTransport]:
    harnesses: list[Harness] = []

    async def connect(
        mode: Mode = "text",
        *,
        pace: float = 0.0,
        brain: LocalBrain | None = None,
        output_rate: int = 24000,
    ) -> Harness:
        transport = LocalTransport(brain or LocalBrain(), pace=pace)
        config = UpstreamConfig(
            mode=mode,
            instructions="be brief",
            tools=(),
            client_input_rate=INPUT_RATE,
            client_output_rate=output_rate,
        )
        await transport.connect(config)
        harnesses.append(Harness(transport))
        return harnesses[-1]

    yield connect
    for harness in harnesses:
        await harness.close()


def text_of(events: list[UpstreamEvent]) -> str:
    return "".join(e.delta for e in events if isinstance(e, TextDelta | TranscriptDelta))


def audio_of(events: list[UpstreamEvent]) -> bytes:
    return b"".join(e.pcm for e in events if isinstance(e, AudioDelta))


async def test_connect_speaks_at_the_client_rates(open_transport: OpenTransport) -> None:
    harness = await open_transport("voice", output_rate=48000)
    capabilities = harness.transport.capabilities
    assert (capabilities.input_rate, capabilities.output_rate) == (INPUT_RATE, 48000)
    assert capabilities.server_vad
    assert capabilities.truncation
    assert capabilities.resumable


async def test_text_turn_event_sequence(open_transport: OpenTransport) -> None:
    harness = await open_transport("text")
    await harness.transport.send_text("hello there")
    assert await harness.response("resp_1") == [
        ResponseStarted("resp_1"),
        TextDelta("resp_1", "You"),
        TextDelta("resp_1", " said:"),
        TextDelta("resp_1", " hello"),
        TextDelta("resp_1", " there"),
        ResponseDone("resp_1", "completed"),
    ]
    assert harness.transport.history == [
        ("user", "hello there"),
        ("assistant", "You said: hello there"),
    ]


@pytest.mark.parametrize("output_rate", [8000, 24000, 48000])
async def test_voice_reply_words_and_audio(open_transport: OpenTransport, output_rate: int) -> None:
    harness = await open_transport("voice", output_rate=output_rate)
    await harness.transport.send_text("/say one two three")
    events = await harness.response("resp_1")
    assert events[0] == ResponseStarted("resp_1")
    assert events[-2:] == [
        TranscriptDone("assistant", "one two three", "resp_1"),
        ResponseDone("resp_1", "completed"),
    ]
    # Per word: its transcript delta, then five 20 ms chunks (80 ms tone + 20 ms silence).
    kinds = [type(e).__name__ for e in events[1:-2]]
    assert kinds == (["TranscriptDelta"] + ["AudioDelta"] * 5) * 3
    assert [e.role for e in events if isinstance(e, TranscriptDelta)] == ["assistant"] * 3
    assert text_of(events) == "one two three"
    audio = audio_of(events)
    assert len(audio) == 3 * word_audio_bytes(output_rate)
    assert all(len(e.pcm) % 2 == 0 for e in events if isinstance(e, AudioDelta))


async def test_voice_audio_is_deterministic(open_transport: OpenTransport) -> None:
    first = await open_transport("voice")
    second = await open_transport("voice")
    await first.transport.send_text("/say same words")
    await second.transport.send_text("/say same words")
    assert audio_of(await first.response("resp_1")) == audio_of(await second.response("resp_1"))


async def test_silence_is_a_response_without_words(open_transport: OpenTransport) -> None:
    harness = await open_transport("voice")
    await harness.transport.send_text("/silence")
    assert await harness.response("resp_1") == [
        ResponseStarted("resp_1"),
        TranscriptDone("assistant", "", "resp_1"),
        ResponseDone("resp_1", "completed"),
    ]


async def test_tool_batch_round_trip(open_transport: OpenTransport) -> None:
    harness = await open_transport("text")
    transport = harness.transport
    await transport.send_text('/tools get_current_time ;; kb_search {"query": "tea"}')
    calls = (
        RequestedCall("call_1", "get_current_time", "{}"),
        RequestedCall("call_2", "kb_search", '{"query": "tea"}'),
    )
    assert await harness.response("resp_1") == [
        ResponseStarted("resp_1"),
        ToolCallsRequested("resp_1", calls),
        ResponseDone("resp_1", "completed"),
    ]
    search = ToolResult("call_2", "kb_search", {"ok": True, "data": {"hits": []}})
    clock = ToolResult("call_1", "get_current_time", {"ok": True, "data": {"now": "noon"}})
    await transport.send_tool_results([search, ToolResult("call_99", "x", {"ok": True})])
    await transport.send_tool_results([clock])
    events = await harness.response("resp_2")
    assert events[0] == ResponseStarted("resp_2")  # nothing was answered before the last result
    assert text_of(events) == (
        'Tool results: get_current_time={"data":{"now":"noon"},"ok":true}; '
        'kb_search={"data":{"hits":[]},"ok":true}'
    )
    # Results of an answered batch are ignored.
    await transport.send_tool_results([clock])
    await transport.send_text("marker")
    assert await harness.next() == ResponseStarted("resp_3")


async def test_yes_after_confirmation_required_recalls_the_tool(
    open_transport: OpenTransport,
) -> None:
    harness = await open_transport("text")
    transport = harness.transport
    await transport.send_text('/tool calendar_create_event {"title": "Dentist"}')
    await harness.response("resp_1")
    envelope = {"ok": False, "error": {"type": "CONFIRMATION_REQUIRED", "confirmationId": "cf_7"}}
    await transport.send_tool_results([ToolResult("call_1", "calendar_create_event", envelope)])
    await harness.response("resp_2")
    await transport.send_text("Yes.")
    events = await harness.response("resp_3")
    assert events[1] == ToolCallsRequested(
        "resp_3",
        (
            RequestedCall(
                "call_2", "calendar_create_event", '{"title":"Dentist","confirmation_id":"cf_7"}'
            ),
        ),
    )


async def test_late_result_starts_a_response(open_transport: OpenTransport) -> None:
    harness = await open_transport("text")
    transport = harness.transport
    await transport.send_text("/tool calendar_create_event {}")
    await harness.response("resp_1")
    envelope = {"ok": False, "error": {"type": "CONFIRMATION_REQUIRED", "confirmationId": "cf_7"}}
    await transport.send_tool_results([ToolResult("call_1", "calendar_create_event", envelope)])
    await harness.response("resp_2")
    approved = ToolResult("call_1", "calendar_create_event", {"ok": True, "data": {"id": 1}})
    await transport.send_late_result(approved)
    events = await harness.response("resp_3")
    assert text_of(events) == 'Tool results: calendar_create_event={"data":{"id":1},"ok":true}'
    assert transport.history[-2] == (
        "tool",
        'result call_1 calendar_create_event {"data":{"id":1},"ok":true}',
    )


def speech_then_silence(speech_ms: int, silence_ms: int) -> bytes:
    return tone(440, speech_ms, INPUT_RATE) + silence(silence_ms, INPUT_RATE)


async def send_in_frames(transport: LocalTransport, pcm: bytes, frame_ms: int = 20) -> None:
    frame_bytes = 2 * INPUT_RATE * frame_ms // 1000
    for offset in range(0, len(pcm), frame_bytes):
        await transport.send_audio(pcm[offset : offset + frame_bytes])


@pytest.mark.parametrize("speech_ms", [250, 500, 1230])
async def test_vad_turns_speech_into_an_utterance(
    open_transport: OpenTransport, speech_ms: int
) -> None:
    harness = await open_transport("voice")
    await send_in_frames(harness.transport, speech_then_silence(speech_ms, 400))
    assert await harness.next() == SpeechStarted()
    assert await harness.next() == SpeechStopped()
    transcript = await harness.next()
    assert isinstance(transcript, TranscriptDone)
    assert transcript.role == "user"
    heard_ms = int(transcript.text.removeprefix("audio:").removesuffix("ms"))
    assert abs(heard_ms - speech_ms) <= 20
    assert await harness.next() == UserInputTranscribed(transcript.text)
    reply = await harness.response("resp_1")
    assert text_of(reply) == f"You said: {transcript.text}"
    assert len(audio_of(reply)) == 3 * word_audio_bytes(24000)


async def test_commit_ends_the_utterance_at_once(open_transport: OpenTransport) -> None:
    harness = await open_transport("voice")
    transport = harness.transport
    await transport.send_audio(tone(440, 200, INPUT_RATE))
    assert await harness.next() == SpeechStarted()
    await transport.commit_audio()
    assert await harness.until(lambda e: isinstance(e, ResponseStarted)) == [
        SpeechStopped(),
        TranscriptDone("user", "audio:200ms"),
        UserInputTranscribed("audio:200ms"),
        ResponseStarted("resp_1"),
    ]
    await harness.response("resp_1")


async def test_commit_without_speech_counts_the_whole_buffer(open_transport: OpenTransport) -> None:
    harness = await open_transport("voice")
    await harness.transport.send_audio(silence(300, INPUT_RATE))
    await harness.transport.commit_audio()
    assert await harness.until(lambda e: isinstance(e, ResponseStarted)) == [
        TranscriptDone("user", "audio:300ms"),
        UserInputTranscribed("audio:300ms"),
        ResponseStarted("resp_1"),
    ]


async def test_commit_or_clear_without_audio_does_nothing(open_transport: OpenTransport) -> None:
    harness = await open_transport("voice")
    transport = harness.transport
    await transport.commit_audio()
    await transport.send_audio(tone(440, 40, INPUT_RATE))
    await transport.clear_audio()
    await transport.commit_audio()
    await transport.send_text("marker")
    assert await harness.next() == ResponseStarted("resp_1")


async def test_barge_in_interrupts_a_paced_reply(open_transport: OpenTransport) -> None:
    harness = await open_transport("voice", pace=1.0)
    transport = harness.transport
    await transport.send_text("/say " + " ".join(f"word{i}" for i in range(30)))  # 3 s of speech
    await harness.until(lambda e: isinstance(e, AudioDelta))
    await transport.send_audio(tone(440, 100, INPUT_RATE))
    events = await harness.response("resp_1")
    assert events[-1] == ResponseDone("resp_1", "interrupted")
    after_speech = events[events.index(SpeechStarted()) :]
    assert after_speech == [SpeechStarted(), ResponseDone("resp_1", "interrupted")]
    # The user's utterance then ends and gets its own answer; nothing more of resp_1.
    await transport.send_audio(silence(400, INPUT_RATE))
    following = await harness.until(lambda e: isinstance(e, ResponseStarted))
    assert following[0] == SpeechStopped()
    assert following[-1] == ResponseStarted("resp_2")
    await transport.cancel_response()
    assert await harness.next() == ResponseDone("resp_2", "cancelled")
    # The history keeps only what was delivered, then what the client says it played.
    assert transport.history[1][0] == "assistant"
    assert transport.history[1][1].startswith("word0")
    await transport.truncate("resp_1", 50)
    assert transport.history[1] == ("assistant", "")
    assert transport.truncations == [("resp_1", 50)]


async def test_truncate_cuts_the_history_to_the_words_heard(open_transport: OpenTransport) -> None:
    harness = await open_transport("voice")
    await harness.transport.send_text("/say alpha beta gamma delta")
    await harness.response("resp_1")
    await harness.transport.truncate("resp_1", 250)
    assert harness.transport.history[-1] == ("assistant", "alpha beta")
    assert harness.transport.truncations == [("resp_1", 250)]


async def test_slow_reply_can_be_cancelled_while_thinking(open_transport: OpenTransport) -> None:
    harness = await open_transport("text")
    await harness.transport.send_text("/slow 10000 too late")
    assert await harness.next() == ResponseStarted("resp_1")
    await harness.transport.cancel_response()
    assert await harness.next() == ResponseDone("resp_1", "cancelled")


async def test_slow_reply_arrives_after_its_delay(open_transport: OpenTransport) -> None:
    harness = await open_transport("text")
    loop = asyncio.get_running_loop()
    started = loop.time()
    await harness.transport.send_text("/slow 50 finally")
    events = await harness.response("resp_1")
    assert loop.time() - started >= 0.045
    assert text_of(events) == "finally"


async def test_new_text_cancels_the_active_response(open_transport: OpenTransport) -> None:
    harness = await open_transport("text")
    await harness.transport.send_text("/slow 10000 never")
    await harness.transport.send_text("hi")
    events = await harness.response("resp_2")
    assert events[:3] == [
        ResponseStarted("resp_1"),
        ResponseDone("resp_1", "cancelled"),
        ResponseStarted("resp_2"),
    ]
    assert text_of(events) == "You said: hi"


async def test_pace_scales_real_time(open_transport: OpenTransport) -> None:
    harness = await open_transport("voice", pace=0.1)
    loop = asyncio.get_running_loop()
    started = loop.time()
    await harness.transport.send_text("/say " + " ".join(["tick"] * 5))  # 500 ms of audio
    await harness.response("resp_1")
    assert loop.time() - started >= 0.045


async def test_fail_ends_the_events(open_transport: OpenTransport) -> None:
    harness = await open_transport("text")
    await harness.transport.send_text("/fail")
    assert await harness.next() == UpstreamFailed("local model asked to fail")
    await harness.transport.send_text("ignored")  # closed: no error, no event
    assert await harness.rest() == []


async def test_add_context_never_replies(open_transport: OpenTransport) -> None:
    harness = await open_transport("text")
    transport = harness.transport
    await transport.add_context("The user prefers tea.")
    await transport.send_text("hi")
    events = await harness.response("resp_1")
    assert events[0] == ResponseStarted("resp_1")
    assert text_of(events) == "You said: hi"
    assert transport.context_notes == ["The user prefers tea."]
    assert transport.history[0] == ("user", "The user prefers tea.")


async def test_update_switches_the_mode_of_following_responses(
    open_transport: OpenTransport,
) -> None:
    harness = await open_transport("text")
    await harness.transport.update(mode="voice", instructions="talk")
    await harness.transport.send_text("/say hi")
    events = await harness.response("resp_1")
    assert len(audio_of(events)) == word_audio_bytes(24000)
    assert harness.transport.instructions == "talk"


async def test_booking_scenario_through_the_transport(open_transport: OpenTransport) -> None:
    brain = LocalBrain.from_scenario(EXAMPLE_SCENARIOS / "booking.json")
    harness = await open_transport("text", brain=brain)
    transport = harness.transport
    await transport.send_text("Book the dentist")
    requested = (await harness.response("resp_1"))[1]
    assert isinstance(requested, ToolCallsRequested)
    (call,) = requested.calls
    envelope = {"ok": False, "error": {"type": "CONFIRMATION_REQUIRED", "confirmationId": "cf_1"}}
    await transport.send_tool_results([ToolResult(call.call_id, call.name, envelope)])
    assert text_of(await harness.response("resp_2")).startswith("Shall I book Dentist")
    await transport.send_text("yes")
    again = (await harness.response("resp_3"))[1]
    assert isinstance(again, ToolCallsRequested)
    assert isinstance(again.calls[0].arguments, str)
    assert '"confirmation_id":"cf_1"' in again.calls[0].arguments
    ok = ToolResult(again.calls[0].call_id, call.name, {"ok": True, "data": {}})
    await transport.send_tool_results([ok])
    assert text_of(await harness.response("resp_4")).startswith("Done")
    assert brain.scenario_mismatches == 0
