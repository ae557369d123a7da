"""The transport contract: what every upstream ``Transport`` shows against its fake.

Each test runs once per transport (``transports_under_test.TRANSPORTS``; the test id is the
provider's name), over real sockets against a fake started for that test. The assertions are the
neutral interface's (``transports/base.py``, ``transports/events.py``), never a provider's: a
behaviour that does not apply to a transport is skipped with the reason its entry gives. Every
transport's events are also checked well formed after each test (``check_well_formed``: a
response starts once, before anything of it, and nothing of it follows its end; a call id is
requested once). ``@contract(behaviour)`` names the behaviour a test checks and bounds it in time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from contract_kit import (
    CONNECT_TIMEOUT_S,
    LONG_SAY,
    OpenSubject,
    Subject,
    TransportUnderTest,
    arguments_of,
    config,
    contract,
    pcm_silence,
    pcm_tone,
    unreachable_endpoints,
)
from transport_kit import Running, done_of, is_output, response_id_of, said
from transports_under_test import TRANSPORTS

from transports import events as ev
from transports.base import Mode, ToolResult, Transport, TransportError

VOICE_AND_TEXT = frozenset({"voice", "text"})
CLOSE_S = 3.0  # close() and the end of events() take at most this long
FRAME_MS = 20


def modes_of(build: Callable[[], Transport]) -> list[Mode]:
    """The modes the transport declares before it is connected (as the gateway reads them)."""
    modes = build().capabilities.modes
    return [mode for mode in ("text", "voice") if mode in modes]


def primary_mode(build: Callable[[], Transport]) -> Mode:
    return modes_of(build)[0]


# 1. connect --------------------------------------------------------------------------------------


@contract("connect")
async def test_connect_with_tools_declared_gives_coherent_capabilities(
    under_test: TransportUnderTest, build: Callable[[], Transport], open_subject: OpenSubject
) -> None:
    modes = modes_of(build)
    assert modes, "a transport offers at least one mode"
    for mode in modes:
        subject = await open_subject(mode)
        capabilities = subject.transport.capabilities
        assert capabilities.input_rate > 0
        assert capabilities.output_rate > 0
        assert capabilities.modes
        assert capabilities.modes <= VOICE_AND_TEXT
        assert mode in capabilities.modes
        assert not subject.failures()


@contract("unreachable")
async def test_an_unreachable_upstream_is_a_transport_error_within_the_connect_timeout(
    under_test: TransportUnderTest, build: Callable[[], Transport]
) -> None:
    assert under_test.build_unreachable is not None
    loop = asyncio.get_running_loop()
    async with unreachable_endpoints() as endpoints:
        for endpoint in endpoints:
            transport = under_test.build_unreachable(endpoint, CONNECT_TIMEOUT_S)
            started = loop.time()
            try:
                if under_test.connect_opens_upstream:
                    with pytest.raises(TransportError) as raised:
                        await asyncio.wait_for(
                            transport.connect(config(primary_mode(build))), CONNECT_TIMEOUT_S + 2
                        )
                    assert raised.value.retryable, (endpoint.kind, raised.value)  # may come back
                else:
                    await first_turn_fails(transport, primary_mode(build))
                elapsed = loop.time() - started
                assert elapsed < CONNECT_TIMEOUT_S + 1, (endpoint.kind, elapsed)
            finally:
                await asyncio.wait_for(transport.close(), CLOSE_S)


async def first_turn_fails(transport: Transport, mode: Mode) -> None:
    """A stateless upstream: connect opens nothing; the first message fails, retryably, and the
    transport lives on."""
    await transport.connect(config(mode))
    run = Running(None, transport, timeout_s=CONNECT_TIMEOUT_S + 2)
    await transport.send_text("hello")
    await run.until(lambda: any(isinstance(e, ev.ResponseDone) for e in run.events))
    done = next(e for e in run.events if isinstance(e, ev.ResponseDone))
    assert done.status == "failed"
    notices = [e for e in run.events if isinstance(e, ev.UpstreamNotice)]
    assert notices
    assert all(notice.retryable for notice in notices)
    assert not run.ended


# 2. a text turn ----------------------------------------------------------------------------------


@contract("text_turn")
async def test_a_text_turn_is_started_deltas_and_done_under_one_response_id(
    under_test: TransportUnderTest, build: Callable[[], Transport], open_subject: OpenSubject
) -> None:
    for mode in modes_of(build):
        subject = await open_subject(mode)
        mark = subject.mark()
        reply = await subject.say("hello")
        events = subject.response_events(reply.response_id, mark)
        assert isinstance(events[0], ev.ResponseStarted), (mode, events)
        assert events[-1] == done_of(events, reply.response_id), (mode, events)
        deltas = [e for e in events if isinstance(e, ev.TextDelta | ev.TranscriptDelta)]
        assert deltas, (mode, events)
        assert reply.status == "completed", (mode, events)
        assert "hello" in reply.text, (mode, reply.text)
        # Nothing else was going on: the turn's events are this response's (and user-side ones).
        others = {response_id_of(e) for e in subject.since(mark)} - {None, reply.response_id}
        assert not others, (mode, subject.since(mark))


# 3. an audio turn --------------------------------------------------------------------------------


@contract("audio_turn")
async def test_an_audio_turn_is_heard_and_answered_with_audio(
    under_test: TransportUnderTest, build: Callable[[], Transport], open_subject: OpenSubject
) -> None:
    if "voice" not in modes_of(build):
        # The contract of a text-only transport: it says so, and the session refuses voice.
        assert "voice" not in build().capabilities.modes
        return
    subject = await open_subject("voice")
    capabilities = subject.transport.capabilities
    rate = capabilities.input_rate
    mark = subject.mark()
    pcm = pcm_tone(500, rate) + pcm_silence(800, rate)
    frame = rate * FRAME_MS // 1000 * 2
    for start in range(0, len(pcm), frame):
        await subject.transport.send_audio(pcm[start : start + frame])
    if not capabilities.server_vad:
        await subject.transport.commit_audio()
    reply = await subject.reply(mark)
    assert reply.status == "completed", reply.events
    assert reply.audio, reply.events
    assert all(chunk and len(chunk) % 2 == 0 for chunk in reply.audio)
    heard = [
        e
        for e in subject.since(mark)
        if isinstance(e, ev.UserInputTranscribed)
        or (isinstance(e, ev.TranscriptDone) and e.role == "user")
    ]
    assert heard, subject.since(mark)


# 4. a tool call answered -------------------------------------------------------------------------


@contract("tool_call")
async def test_a_tool_call_is_requested_and_its_result_continues_the_model(
    under_test: TransportUnderTest, build: Callable[[], Transport], open_subject: OpenSubject
) -> None:
    subject = await open_subject(primary_mode(build))
    await tool_round_trip(subject)


async def tool_round_trip(subject: Subject) -> None:
    """The model calls the declared tool (the fakes' and the local model's ``/tool`` directive);
    its result makes the model go on, and what it says next mentions the result."""
    mark = subject.mark()
    await subject.transport.send_text('/tool get_weather {"city": "Paris"}')
    await subject.run.until(
        lambda: any(isinstance(e, ev.ToolCallsRequested) for e in subject.since(mark))
    )
    requested = next(e for e in subject.since(mark) if isinstance(e, ev.ToolCallsRequested))
    asked = subject.events.index(requested)
    (call,) = requested.calls
    assert call.name == "get_weather"
    assert isinstance(call.call_id, str)
    assert call.call_id
    assert arguments_of(call) == {"city": "Paris"}
    result = ToolResult(call.call_id, call.name, {"ok": True, "data": {"temp_c": 21}})
    await subject.transport.send_tool_results([result])

    def continued() -> ev.ResponseDone | None:
        after = subject.events[asked + 1 :]
        for event in after:
            if (
                isinstance(event, ev.ResponseDone)
                and event.status == "completed"
                and '"temp_c":21' in said(after, event.response_id)
            ):
                return event
        return None

    await subject.run.until(lambda: continued() is not None)
    done = continued()
    assert done is not None
    assert "get_weather" in said(subject.events[asked + 1 :], done.response_id)


# 5. cancellation ---------------------------------------------------------------------------------


async def start_long_reply(subject: Subject) -> str:
    """Ask for a long reply; its response id once its first words (or audio) have come."""
    mark = subject.mark()
    await subject.transport.send_text(LONG_SAY)
    await subject.run.until(lambda: subject.first_output(mark) is not None)
    first = subject.first_output(mark)
    response_id = response_id_of(first) if first is not None else None
    assert response_id is not None
    return response_id


def long_reply_mode(build: Callable[[], Transport]) -> Mode:
    """Speech where the transport has it (paced in real time), else text."""
    return "voice" if "voice" in modes_of(build) else "text"


@contract("cancel")
async def test_a_cancelled_response_ends_cancelled_and_says_nothing_more(
    under_test: TransportUnderTest, build: Callable[[], Transport], open_subject: OpenSubject
) -> None:
    subject = await open_subject(long_reply_mode(build))
    response_id = await start_long_reply(subject)
    await subject.transport.cancel_response()
    await subject.run.until(lambda: done_of(subject.events, response_id) is not None)
    done = done_of(subject.events, response_id)
    assert done is not None
    assert done.status == "cancelled"
    ended = subject.events.index(done)
    await subject.transport.cancel_response()  # nothing active: nothing happens
    # The next turn is answered in full; nothing of the cancelled response came meanwhile.
    marker = await subject.say("hello")
    assert marker.status == "completed"
    assert marker.response_id != response_id
    assert not [e for e in subject.events[ended + 1 :] if response_id_of(e) == response_id]
    responses = {e.response_id for e in subject.events if isinstance(e, ev.ResponseStarted)}
    assert responses == {response_id, marker.response_id}
    assert not subject.failures()


# 6. close ----------------------------------------------------------------------------------------


async def close_and_check(subject: Subject, in_flight: str | None = None) -> None:
    """``close()`` ends ``events()`` in bounded time; what was already on its way may still be
    read, the output of the response in flight, but close invents no outcome (no
    ``ResponseDone``, no notice); a second close and later inputs are harmless."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    closing = subject.mark()
    await asyncio.wait_for(subject.transport.close(), CLOSE_S)
    await subject.run.wait_ended(CLOSE_S)
    assert loop.time() - started < CLOSE_S
    for event in subject.since(closing):
        assert is_output(event), subject.since(closing)
        assert response_id_of(event) == in_flight, subject.since(closing)
    await asyncio.wait_for(subject.transport.close(), CLOSE_S)  # a second close is harmless
    seen = len(subject.events)
    await subject.transport.send_text("after close")  # ignored: no error, no event
    await subject.transport.cancel_response()
    assert len(subject.events) == seen


@contract("close")
async def test_close_ends_the_events_and_a_second_close_is_harmless(
    under_test: TransportUnderTest, build: Callable[[], Transport], open_subject: OpenSubject
) -> None:
    idle = await open_subject(primary_mode(build))
    await idle.say("hello")
    await close_and_check(idle)
    busy = await open_subject(long_reply_mode(build))
    in_flight = await start_long_reply(busy)
    await close_and_check(busy, in_flight)
    assert done_of(busy.events, in_flight) is None


# 7. reconnect after a drop -----------------------------------------------------------------------


@contract("reconnect")
async def test_after_the_upstream_drops_the_transport_recovers_and_the_next_turn_works(
    under_test: TransportUnderTest, build: Callable[[], Transport], open_subject: OpenSubject
) -> None:
    assert under_test.inject_drop is not None
    subject = await open_subject(primary_mode(build))
    await tool_round_trip(subject)  # a conversation with a tool call in it
    mark = subject.mark()
    await under_test.inject_drop(subject)
    if under_test.drop_recovery == "reconnects":
        await subject.run.until(
            lambda: any(
                isinstance(e, ev.UpstreamRecovered | ev.UpstreamFailed) for e in subject.since(mark)
            )
        )
        assert not subject.failures(), subject.since(mark)
    else:
        failed = await subject.reply(mark)
        assert failed.status == "failed", failed.events
        notices = [e for e in subject.since(mark) if isinstance(e, ev.UpstreamNotice)]
        assert notices, subject.since(mark)
        assert all(notice.retryable for notice in notices)
    reply = await subject.say("after the drop")
    assert reply.status == "completed", reply.events
    assert "after the drop" in reply.text
    await tool_round_trip(subject)  # tools too: no call of before the drop is taken for it
    assert not subject.failures()


# 8. an unknown upstream event is ignored ---------------------------------------------------------


@contract("unknown_event")
async def test_an_unknown_upstream_event_is_ignored_and_the_session_goes_on(
    under_test: TransportUnderTest, build: Callable[[], Transport], open_subject: OpenSubject
) -> None:
    assert under_test.inject_unknown is not None
    subject = await open_subject(primary_mode(build))
    mark = subject.mark()
    await under_test.inject_unknown(subject, "still here")
    reply = await subject.reply(mark)
    assert reply.status == "completed", reply.events
    assert "still here" in reply.text
    following = await subject.say("hello again")
    assert following.status == "completed"
    assert "hello again" in following.text
    assert not subject.failures()
    assert not [e for e in subject.events if isinstance(e, ev.UpstreamNotice)]


def test_what_does_not_apply_says_why() -> None:
    """The behaviours a transport is excused from, each with its reason; only those."""
    excused = {
        (entry.name, behaviour): reason
        for entry in TRANSPORTS
        for behaviour, reason in entry.not_applicable.items()
    }
    assert set(excused) == {
        ("local", "unreachable"),
        ("local", "reconnect"),
        ("local", "unknown_event"),
    }
    assert all(len(reason) > 20 for reason in excused.values())
