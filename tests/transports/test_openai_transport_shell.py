"""OpenAIRealtimeTransport's shell against a scripted stand-in for the SDK (``FakeSDK``).

The stand-in is injected through the constructor (``client=``), so the timing of a reconnect is
exact instead of racing a real socket: the test decides when each frame arrives.
"""

from __future__ import annotations

import asyncio
import base64
from types import SimpleNamespace
from typing import Any

import orjson
import pytest
from realtime_kit import config, updated
from transport_kit import Running
from websockets.exceptions import ConnectionClosedError
from websockets.frames import Close

from transports import events as ev
from transports.base import TransportError
from transports.openai_realtime.transport import OpenAIRealtimeTransport, RealtimeOptions


class FakeConn:
    """One SDK connection: frames to receive are queued by the test; sent frames are kept."""

    def __init__(self, sdk: FakeSDK) -> None:
        self.sdk = sdk
        self.inbox: asyncio.Queue[bytes | BaseException] = asyncio.Queue()
        self.frames: list[dict[str, Any]] = []
        self.closed = False
        self.sent = asyncio.Event()  # set on every frame the transport sends
        # The shell writes through the SDK's websocket (``conn._connection.send``).
        self._connection = SimpleNamespace(send=self.send_raw)

    def push(self, event: dict[str, Any] | bytes) -> None:
        self.inbox.put_nowait(event if isinstance(event, bytes) else orjson.dumps(event))

    def drop(self, code: int = 1011) -> None:
        self.inbox.put_nowait(ConnectionClosedError(Close(code, "fault"), None))

    def types(self) -> list[str]:
        return [f["type"] for f in self.frames]

    async def recv_bytes(self) -> bytes:
        item = await self.inbox.get()
        if isinstance(item, BaseException):
            raise item
        return item

    async def send_raw(self, data: str | bytes) -> None:
        if self.closed:
            raise ConnectionClosedError(None, None)
        event = orjson.loads(data)
        self.frames.append(event)
        self.sent.set()
        if event["type"] == "session.update" and not self.sdk.hold_updated:
            self.push(updated())

    async def close(self) -> None:
        self.closed = True


class FakeSDK:
    """Stands in for ``AsyncOpenAI``: each ``realtime.connect(...).enter()`` opens a FakeConn
    that greets with ``session.created`` (after ``preface`` frames, if any)."""

    def __init__(self) -> None:
        self.conns: list[FakeConn] = []
        self.opened = asyncio.Condition()
        self.hold_updated = False  # True: the test sends session.updated itself
        self.preface: list[bytes] = []
        self.block_enter: asyncio.Event | None = None
        self.entering = asyncio.Event()
        self.refuse_enters = 0  # this many connects fail as an unreachable host

    @property
    def realtime(self) -> FakeSDK:
        return self

    def connect(self, *, model: str) -> FakeSDK:
        return self

    async def enter(self) -> FakeConn:
        self.entering.set()
        if self.block_enter is not None:
            await self.block_enter.wait()
        if self.refuse_enters:
            self.refuse_enters -= 1
            raise ConnectionRefusedError("connection refused")
        conn = FakeConn(self)
        for frame in self.preface:
            conn.push(frame)
        self.preface = []
        conn.push({"type": "session.created", "session": {"id": f"sess_{len(self.conns) + 1}"}})
        async with self.opened:
            self.conns.append(conn)
            self.opened.notify_all()
        return conn

    async def connection(self, number: int) -> FakeConn:
        """The number-th connection (1-based) once it has sent its first frame."""
        async with asyncio.timeout(3), self.opened:
            await self.opened.wait_for(lambda: len(self.conns) >= number)
        conn = self.conns[number - 1]
        async with asyncio.timeout(3):
            await conn.sent.wait()
        return conn


async def start(mode: str = "text", *, backoff_s: float = 0.001) -> Running:
    sdk = FakeSDK()
    transport = OpenAIRealtimeTransport(
        RealtimeOptions(api_key="sk-test", reconnect_initial_s=backoff_s, connect_timeout_s=2.0),
        client=sdk,  # type: ignore[arg-type]
    )
    await transport.connect(config(mode))
    return Running(sdk, transport)


async def test_a_mode_switch_during_the_reconnect_handshake_reaches_the_new_session() -> None:
    run = await start("text")
    try:
        run.sdk.hold_updated = True
        run.sdk.conns[0].drop(1011)
        second = await run.sdk.connection(2)
        assert second.types() == ["session.update"]
        run.sdk.hold_updated = False
        # session.update (text) is on its way; the client switches to voice meanwhile.
        await run.transport.update(mode="voice")
        second.push(updated(interrupt=False))
        await run.until_any(ev.UpstreamRecovered)
        updates = [f["session"] for f in second.frames if f["type"] == "session.update"]
        assert updates[-1]["output_modalities"] == ["audio"]
    finally:
        await run.close()


async def test_an_unreadable_frame_during_a_reconnect_does_not_end_the_session() -> None:
    run = await start("text")
    try:
        run.sdk.preface = [b"<html>502 Bad Gateway</html>"]
        run.sdk.conns[0].drop(1011)
        await run.until_any(ev.UpstreamRecovered, ev.UpstreamFailed)
        assert not run.saw(ev.UpstreamFailed)
    finally:
        await run.close()


async def test_a_bad_websocket_url_is_a_transport_error() -> None:
    transport = OpenAIRealtimeTransport(
        RealtimeOptions(api_key="sk-test", ws_url="ftp://127.0.0.1:9/v1", connect_timeout_s=1.0)
    )
    try:
        with pytest.raises(TransportError):
            await transport.connect(config("text"))
    finally:
        await transport.close()


async def test_close_while_a_reconnect_waits_for_session_updated_closes_the_new_socket() -> None:
    run = await start("text")
    run.sdk.hold_updated = True
    run.sdk.conns[0].drop(1011)
    second = await run.sdk.connection(2)
    await run.close()
    assert second.closed
    assert not run.saw(ev.UpstreamFailed)
    assert not run.saw(ev.UpstreamRecovered)


async def test_close_while_the_new_socket_is_still_opening_ends_the_events() -> None:
    run = await start("text")
    run.sdk.block_enter = asyncio.Event()  # the new socket never opens
    run.sdk.entering.clear()
    run.sdk.conns[0].drop(1011)
    async with asyncio.timeout(3):
        await run.sdk.entering.wait()
    await run.close()
    assert len(run.sdk.conns) == 1
    assert not run.saw(ev.UpstreamFailed)


async def test_close_during_the_reconnect_backoff_returns_at_once() -> None:
    run = await start("text", backoff_s=30.0)
    run.sdk.refuse_enters = 1  # attempt 1 (immediate) fails; attempt 2 waits >= 22 s
    run.sdk.entering.clear()
    run.sdk.conns[0].drop(1011)
    async with asyncio.timeout(3):
        await run.sdk.entering.wait()
    async with asyncio.timeout(1):
        await run.close()
    assert len(run.sdk.conns) == 1
    assert not run.saw(ev.UpstreamFailed)


async def test_frames_queued_by_several_writers_after_a_reconnect_keep_their_order() -> None:
    run = await start("text")
    try:
        run.sdk.hold_updated = True
        run.sdk.conns[0].drop(1011)
        second = await run.sdk.connection(2)
        # While offline: text, then a pending message; both kept for the replay.
        await asyncio.gather(
            run.transport.send_text("typed while offline"),
            run.transport.add_context("a pending message"),
        )
        second.push(updated())
        await run.until_any(ev.UpstreamRecovered)
        await run.transport.send_text("typed after")
        items = [
            f["item"]["content"][0]["text"]
            for f in second.frames
            if f["type"] == "conversation.item.create"
        ]
        assert items == ["typed while offline", "a pending message", "typed after"]
        assert second.types()[0] == "session.update"
    finally:
        await run.close()


async def test_a_malformed_server_event_is_skipped() -> None:
    run = await start("voice")
    try:
        conn = run.sdk.conns[0]
        conn.push({"type": "response.created", "response": {"id": "resp_1"}})
        conn.push({"type": "response.output_audio.delta", "response_id": "resp_1", "delta": "%%"})
        conn.push({"type": "response.done", "response": {"id": "resp_1", "status": "completed"}})
        await run.until_any(ev.ResponseDone)
        assert not run.saw(ev.UpstreamFailed)
        assert not run.saw(ev.AudioDelta)
    finally:
        await run.close()


def audio_delta(response_id: str, pcm: bytes) -> dict[str, Any]:
    return {
        "type": "response.output_audio.delta",
        "response_id": response_id,
        "item_id": "item_1",
        "delta": base64.b64encode(pcm).decode(),
    }


async def test_audio_goes_to_the_sink_at_once_unless_an_event_is_queued_before_it() -> None:
    run = await start("voice")
    taken: list[bytes] = []
    took = asyncio.Event()
    accepting = True

    def sink(delta: ev.AudioDelta) -> bool:
        if accepting:
            taken.append(delta.pcm)
            took.set()
        return accepting

    run.transport.set_audio_sink(sink)
    try:
        conn = run.sdk.conns[0]
        conn.push({"type": "response.created", "response": {"id": "resp_1"}})
        # In the same read burst: response.started is still queued, so this delta queues too.
        conn.push(audio_delta("resp_1", b"\x01\x00"))
        await run.until(lambda: run.count(ev.AudioDelta) == 1)
        assert taken == []
        conn.push(audio_delta("resp_1", b"\x02\x00"))  # nothing queued: straight to the sink
        await asyncio.wait_for(took.wait(), 3)
        assert taken == [b"\x02\x00"]
        accepting = False  # the session is busy with an earlier event: queued after all
        conn.push(audio_delta("resp_1", b"\x03\x00"))
        await run.until(lambda: run.count(ev.AudioDelta) == 2)
        kinds = [type(e) for e in run.events]
        assert kinds == [ev.ResponseStarted, ev.AudioDelta, ev.AudioDelta]
    finally:
        await run.close()
