"""The per-client writer: control first, audio dropped first, a non-reading client cut off."""

from __future__ import annotations

import asyncio

from gateway.protocol import ServerEvent, TextDelta
from gateway.session import Outbound


def ev(label: str) -> ServerEvent:
    """An event the writer below shows as ``label`` (its wire form does not matter here)."""
    return TextDelta(response_id="r", delta=label)


def labelled(event: ServerEvent) -> tuple[str, int]:
    """The edge's ``prepare`` in these tests: the label, counted in UTF-8 bytes as the native
    edge counts its JSON."""
    assert isinstance(event, TextDelta)
    return event.delta, len(event.delta.encode())


class Wire:
    """A client socket whose writes block until ``open`` is set (a slow or stalled client)."""

    def __init__(self, *, open_: bool = True) -> None:
        self.frames: list[str | bytes] = []
        self.open = asyncio.Event()
        if open_:
            self.open.set()

    async def text(self, data: str) -> None:
        await self.open.wait()
        self.frames.append(data)

    async def binary(self, data: bytes) -> None:
        await self.open.wait()
        self.frames.append(data)


async def test_control_events_overtake_queued_audio() -> None:
    wire = Wire(open_=False)
    out = Outbound(wire.text, wire.binary, prepare=labelled, max_audio_frames=10)
    writer = asyncio.create_task(out.run())
    out.audio(b"a1")
    out.audio(b"a2")
    out.event(ev('{"type":"x"}'))
    out.close()
    wire.open.set()
    await asyncio.wait_for(writer, 1)
    # a1 may already be in flight when the event arrives; the event still beats a2.
    assert wire.frames.index('{"type":"x"}') < wire.frames.index(b"a2")
    assert out.sent_events == 1
    assert out.sent_audio == 2


async def test_a_full_audio_queue_drops_the_oldest_frames_and_counts_them() -> None:
    dropped: list[int] = []
    wire = Wire(open_=False)
    out = Outbound(
        wire.text,
        wire.binary,
        prepare=labelled,
        max_audio_frames=3,
        on_audio_dropped=lambda: dropped.append(1),
    )
    for i in range(6):
        out.audio(bytes([i]))
    out.close()
    wire.open.set()
    await asyncio.wait_for(out.run(), 1)
    assert wire.frames == [bytes([3]), bytes([4]), bytes([5])]
    assert out.dropped_audio == len(dropped) == 3


async def test_discard_audio_keeps_control_events() -> None:
    wire = Wire()
    out = Outbound(wire.text, wire.binary, prepare=labelled, max_audio_frames=10)
    out.audio(b"speech")
    out.event(ev('{"type":"speech.started"}'))
    out.discard_audio()
    out.close()
    await asyncio.wait_for(out.run(), 1)
    assert wire.frames == ['{"type":"speech.started"}']


async def test_close_flushes_what_was_queued_and_refuses_more() -> None:
    wire = Wire()
    out = Outbound(wire.text, wire.binary, prepare=labelled, max_audio_frames=10)
    out.event(ev('{"type":"session.ended"}'))
    out.close()
    out.event(ev('{"type":"late"}'))
    out.audio(b"late")
    await asyncio.wait_for(out.run(), 1)
    assert wire.frames == ['{"type":"session.ended"}']


async def test_a_client_that_never_reads_is_cut_off_once() -> None:
    cut: list[int] = []
    wire = Wire(open_=False)
    out = Outbound(
        wire.text,
        wire.binary,
        prepare=labelled,
        max_audio_frames=10,
        max_control_bytes=100,
        on_overflow=lambda: cut.append(1),
    )
    writer = asyncio.create_task(out.run())
    for _ in range(20):
        out.event(ev('{"type":"transcript.delta","delta":"word"}'))
    assert out.overflowed
    assert cut == [1]
    writer.cancel()


async def test_bytes_are_counted_not_characters() -> None:
    cut: list[int] = []
    wire = Wire(open_=False)
    out = Outbound(
        wire.text,
        wire.binary,
        prepare=labelled,
        max_audio_frames=1,
        max_control_bytes=10,
        on_overflow=lambda: cut.append(1),
    )
    out.event(ev("ééééé"))  # 10 bytes, 5 characters: at the limit, not over
    assert not out.overflowed
    out.event(ev("x"))
    assert out.overflowed


async def test_sent_events_free_their_share_of_the_limit() -> None:
    wire = Wire()
    out = Outbound(
        wire.text, wire.binary, prepare=labelled, max_audio_frames=1, max_control_bytes=50
    )
    writer = asyncio.create_task(out.run())
    for _ in range(20):
        out.event(ev('{"type":"pong","id":1}'))  # 22 bytes each, 440 in all
        await asyncio.sleep(0)  # let the writer send it
    out.close()
    await asyncio.wait_for(writer, 1)
    assert not out.overflowed
    assert out.sent_events == 20


async def test_response_done_and_session_ended_wait_for_the_audio_before_them() -> None:
    wire = Wire(open_=False)
    out = Outbound(wire.text, wire.binary, prepare=labelled, max_audio_frames=10)
    out.audio(b"a1")
    out.audio(b"a2")
    out.event(ev("done"), after_audio=True)
    out.event(ev("delta"))  # an ordinary event still goes first
    out.event(ev("ended"), after_audio=True)
    out.close()
    wire.open.set()
    await asyncio.wait_for(out.run(), 1)
    assert wire.frames == ["delta", b"a1", b"a2", "done", "ended"]


async def test_ordered_events_are_never_dropped_with_audio() -> None:
    wire = Wire(open_=False)
    out = Outbound(wire.text, wire.binary, prepare=labelled, max_audio_frames=2)
    out.audio(b"a1")
    out.event(ev("done"), after_audio=True)
    out.audio(b"a2")
    out.audio(b"a3")  # full: a1 goes, the event stays
    out.discard_audio()  # barge-in: audio goes, the event stays
    out.audio(b"a4")
    out.close()
    wire.open.set()
    await asyncio.wait_for(out.run(), 1)
    assert wire.frames == ["done", b"a4"]
    assert out.dropped_audio == 1


async def test_an_ordered_event_keeps_its_place_behind_an_earlier_one() -> None:
    wire = Wire(open_=False)
    out = Outbound(wire.text, wire.binary, prepare=labelled, max_audio_frames=1)
    out.audio(b"a1")
    out.event(ev("done"), after_audio=True)
    out.discard_audio()  # the lane now holds only "done"
    out.event(ev("ended"), after_audio=True)
    out.close()
    wire.open.set()
    await asyncio.wait_for(out.run(), 1)
    assert wire.frames == ["done", "ended"]


class DirectWire(Wire):
    """A socket that also takes audio synchronously while ``accepting`` (nothing unsent)."""

    def __init__(self, *, open_: bool = True) -> None:
        super().__init__(open_=open_)
        self.accepting = True
        self.direct: list[bytes] = []
        self.encoded: list[str | None] = []

    def write_now(self, pcm: bytes, encoded: str | None) -> bool:
        if not self.accepting:
            return False
        self.frames.append(pcm)
        self.direct.append(pcm)
        self.encoded.append(encoded)
        return True


async def test_audio_is_written_at_once_when_nothing_waits_and_the_writer_is_idle() -> None:
    wire = DirectWire()
    out = Outbound(
        wire.text,
        wire.binary,
        prepare=labelled,
        max_audio_frames=10,
        write_audio_now=wire.write_now,
    )
    writer = asyncio.create_task(out.run())
    await asyncio.sleep(0)  # the writer is now waiting for work
    out.audio(b"a1")
    out.audio(b"a2", "YTI=")
    assert wire.direct == [b"a1", b"a2"]  # no task switch in between
    assert wire.encoded == [None, "YTI="]  # the upstream's base64 too, when given
    out.close()
    await asyncio.wait_for(writer, 1)
    assert out.sent_audio == 2


async def test_audio_waits_its_turn_behind_anything_queued() -> None:
    wire = DirectWire(open_=False)
    out = Outbound(
        wire.text,
        wire.binary,
        prepare=labelled,
        max_audio_frames=10,
        write_audio_now=wire.write_now,
    )
    writer = asyncio.create_task(out.run())
    await asyncio.sleep(0)
    out.event(ev('{"type":"x"}'))  # the writer takes it and blocks on the stalled socket
    await asyncio.sleep(0)
    out.audio(b"a1")  # the writer is busy: queued, not written ahead of the event
    out.event(ev('{"type":"done"}'), after_audio=True)
    await asyncio.sleep(0)
    assert wire.direct == []
    wire.open.set()
    out.close()
    await asyncio.wait_for(writer, 1)
    assert wire.frames == ['{"type":"x"}', b"a1", '{"type":"done"}']


async def test_a_socket_with_unsent_data_gets_audio_through_the_queue() -> None:
    wire = DirectWire()
    wire.accepting = False
    dropped: list[int] = []
    out = Outbound(
        wire.text,
        wire.binary,
        prepare=labelled,
        max_audio_frames=1,
        on_audio_dropped=lambda: dropped.append(1),
        write_audio_now=wire.write_now,
    )
    writer = asyncio.create_task(out.run())
    await asyncio.sleep(0)
    out.audio(b"a1")
    out.audio(b"a2")  # the queue holds one frame: the oldest goes, as without the fast path
    out.close()
    await asyncio.wait_for(writer, 1)
    assert wire.direct == []
    assert wire.frames == [b"a2"]
    assert dropped == [1]
