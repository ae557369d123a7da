"""The phone bridge alone (no sockets) on lines other than Twilio's: a speaker's own frame length
(Exotel's 200 ms chunks of PCM16), the played position kept on the bridge's clock for a carrier
that echoes no markers, and a call whose carrier sends another law than it plays."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gateway.audio import g711
from gateway.edges.phone.bridge import PhoneBridge
from gateway.edges.phone.wire import Audio, LineFormat, Outgoing
from gateway.protocol import ResponseDone, ResponseStarted, ResponseStatus, ServerEvent
from gateway.protocol.client_events import AudioPlayback, BinaryAudio, SessionStart
from gateway.session.client_output import ClientOutput


@dataclass
class Line:
    """A speaker that writes down what it would send (``kind``, payload)."""

    line: LineFormat
    frame_ms: int = 20
    echoes_markers: bool = True
    sent: list[tuple[str, Any]] = field(default_factory=list)
    news: asyncio.Event = field(default_factory=asyncio.Event)

    def media(self, audio: bytes) -> Outgoing:
        self.sent.append(("media", audio))
        self.news.set()
        return "media"

    def marker(self, name: str) -> Outgoing:
        self.sent.append(("marker", name))
        self.news.set()
        return "marker"

    async def until(self, done: Callable[[], bool]) -> None:
        async with asyncio.timeout(5):
            while not done():
                self.news.clear()
                await self.news.wait()

    def clear(self) -> Outgoing:
        self.sent.append(("clear", None))
        return "clear"


class Session:
    def __init__(self) -> None:
        self.events: list[Any] = []
        self.ended = asyncio.Event()
        self.changed = asyncio.Condition()
        self.start: SessionStart | None = None

    async def on_client_event(self, event: Any) -> None:
        self.events.append(event)
        async with self.changed:
            self.changed.notify_all()

    async def until(self, done: Callable[[], bool]) -> None:
        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(done), 5)


async def sent_nothing(message: Outgoing) -> None:
    return None


async def opened(speaker: Line, inbound: LineFormat) -> tuple[PhoneBridge, Session]:
    session = Session()

    async def start_session(start: SessionStart, outbound: ClientOutput) -> Any:
        session.start = start
        return session

    bridge = PhoneBridge(
        sent_nothing, speaker, inbound=inbound, greeting=None, max_audio_frames=500
    )
    await bridge.open(start_session, None)
    return bridge, session


def say(bridge: PhoneBridge, response_id: str, audio: bytes) -> None:
    events: list[ServerEvent] = [ResponseStarted(response_id=response_id)]
    bridge.outbound.event(events[0])
    bridge.outbound.audio(audio)
    done = ResponseDone(response_id=response_id, status=ResponseStatus.COMPLETED, text="")
    bridge.outbound.event(done, after_audio=True)


async def test_exotel_sized_chunks_leave_whole_and_padded_with_silence() -> None:
    line = LineFormat("pcm16", 8000)
    speaker = Line(line, frame_ms=200)
    bridge, session = await opened(speaker, line)
    try:
        assert session.start is not None
        assert session.start.audio.to_dict() == {"input_rate": 8000, "output_rate": 8000}
        say(bridge, "r1", b"\x01\x02" * 4000)  # 500 ms of PCM16 at 8 kHz
        frames = lambda: [p for kind, p in speaker.sent if kind == "media"]  # noqa: E731
        await speaker.until(lambda: len(frames()) == 3 and len(speaker.sent) == 6)
        assert [len(f) for f in frames()] == [3200, 3200, 3200]
        assert frames()[2] == b"\x01\x02" * 800 + bytes(1600)  # the last 100 ms, then silence
        # A marker after each 200 ms frame (each is over 100 ms of reply).
        kinds = [kind for kind, _ in speaker.sent]
        assert kinds == ["media", "marker", "media", "marker", "media", "marker"]
    finally:
        await bridge.close()


async def test_without_marker_echoes_the_played_position_comes_from_the_clock() -> None:
    line = LineFormat("pcm16", 16000)
    speaker = Line(line, echoes_markers=False)
    bridge, session = await opened(speaker, line)
    try:
        say(bridge, "r1", bytes(640 * 10))  # 200 ms
        await session.until(lambda: any(isinstance(e, AudioPlayback) for e in session.events))
        first = next(e for e in session.events if isinstance(e, AudioPlayback))
        assert (first.response_id, first.played_ms) == ("r1", 100)
        assert not [kind for kind, _ in speaker.sent if kind == "marker"]  # none was sent
        await session.until(
            lambda: (
                [e.played_ms for e in session.events if isinstance(e, AudioPlayback)] == [100, 200]
            )
        )
    finally:
        await bridge.close()


async def test_a_call_sent_in_a_law_but_played_in_mu_law_reaches_the_session_in_mu_law() -> None:
    speaker = Line(LineFormat("pcmu", 8000))
    bridge, session = await opened(speaker, LineFormat("pcma", 8000))
    try:
        assert session.start is not None
        assert session.start.audio.encoding == "pcmu"
        pcm = b"".join(int(n * 100).to_bytes(2, "little", signed=True) for n in range(160))
        await bridge.on_carrier(Audio(g711.alaw_encode(pcm)))
        (heard,) = [e for e in session.events if isinstance(e, BinaryAudio)]
        assert heard.pcm == g711.ulaw_encode(g711.alaw_decode(g711.alaw_encode(pcm)))
    finally:
        await bridge.close()
