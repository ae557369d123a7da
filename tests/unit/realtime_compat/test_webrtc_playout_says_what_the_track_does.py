"""``TrackPlayout``, without an event loop or a peer: the session's 24 kHz audio reaches the
track at 48 kHz, per response; ``output_audio_buffer.started`` comes with its first audio,
``.stopped`` once the track has sent its last frame after ``response.done``, ``.cleared`` on
the user's speech, an interrupted reply or the client's ``output_audio_buffer.clear`` (the
track emptied, the rest of that reply dropped); what the track sent is handed on; every event
is one the official SDK parses."""

from __future__ import annotations

from typing import Any

from compat_kit import done, pcm, sdk_parse_all, started, typed

from gateway.edges.realtime.server_wire import CountingIds, ServerEvent
from gateway.edges.realtime.track_playout import FRAME_BYTES, FRAME_MS, TrackPlayout
from gateway.protocol import SpeechStarted


class FakeTrack:
    """What PcmOutTrack does with the calls, kept in plain lists."""

    def __init__(self) -> None:
        self.frames: list[tuple[str | None, bytes]] = []
        self._held = bytearray()
        self.response: str | None = None
        self.calls: list[str] = []
        self.sent: dict[str, int] = {}  # frames sent, per response

    def begin(self, response_id: str | None) -> None:
        self.flush()
        self.response = response_id
        self.calls.append(f"begin:{response_id}")

    def push(self, pcm: bytes) -> None:
        self._held += pcm
        while len(self._held) >= FRAME_BYTES:
            self.frames.append((self.response, bytes(self._held[:FRAME_BYTES])))
            del self._held[:FRAME_BYTES]

    def flush(self) -> None:
        if self._held:
            self.frames.append((self.response, bytes(self._held).ljust(FRAME_BYTES, b"\0")))
            self._held.clear()

    def clear(self) -> None:
        self.frames.clear()
        self._held.clear()
        self.calls.append("clear")


class Rig:
    def __init__(self, *, audio: bool = True) -> None:
        self.track = FakeTrack()
        self.emitted: list[ServerEvent] = []
        self.played: list[tuple[str, int]] = []
        self.playout = TrackPlayout(
            self.track if audio else None,
            ids=CountingIds(),
            emit=self.emitted.extend,
            played=lambda response, ms: self.played.append((response, ms)),
        )

    def event(self, event: Any, ga_id: str = "resp_ga1") -> list[ServerEvent]:
        translated: list[ServerEvent] = []
        if event.TYPE == "response.started":
            translated = [{"type": "response.created", "response": {"id": ga_id}}]
        return self.playout.after_event(typed(event), translated)

    def send_all(self, response: str) -> None:
        """The track sends every frame queued (its report at the last one: what it has sent
        of the response so far)."""
        sent = self.track.sent.get(response, 0) + len(self.track.frames)
        self.track.sent[response] = sent
        self.track.frames.clear()
        self.playout.on_played(response, sent * FRAME_MS)


def test_a_reply_plays_then_stops_once_the_track_has_sent_it_all() -> None:
    rig = Rig()
    assert rig.event(started("r1")) == []
    first = rig.playout.audio(pcm(100))
    assert [e["type"] for e in first] == ["output_audio_buffer.started"]
    assert first[0]["response_id"] == "resp_ga1"
    rig.playout.audio(pcm(100))
    queued = len(rig.track.frames)
    assert 8 <= queued <= 10  # 200 ms at 48 kHz, the resampler's delay aside
    assert {response for response, _ in rig.track.frames} == {"r1"}
    assert rig.event(done(response_id="r1")) == []  # still playing: not stopped yet
    assert rig.track.calls[-1] == "begin:None"
    rig.send_all("r1")
    assert [e["type"] for e in rig.emitted] == ["output_audio_buffer.stopped"]
    assert rig.emitted[0]["response_id"] == "resp_ga1"
    assert rig.played[-1][0] == "r1"
    assert rig.played[-1][1] >= 200  # what the track sent, handed on
    sdk_parse_all([*first, *rig.emitted])


def test_a_reply_sent_before_its_end_stops_at_its_end_or_at_its_last_frame() -> None:
    rig = Rig()
    rig.event(started("r1"))
    rig.playout.audio(pcm(200))
    rig.send_all("r1")  # the track caught up with the model before the reply ended
    assert rig.emitted == []
    stopped = rig.event(done(response_id="r1"))
    assert [e["type"] for e in stopped] == ["output_audio_buffer.stopped"]
    # A reply whose last frame is partial: that frame, padded, goes at its end.
    rig.event(started("r2"), ga_id="resp_ga2")
    rig.playout.audio(pcm(210))
    rig.send_all("r2")
    assert rig.event(done(response_id="r2")) == []
    assert len(rig.track.frames) == 1
    rig.send_all("r2")
    rig.playout.on_played("r2", 10_000)  # a late report says nothing more
    assert [e["response_id"] for e in rig.emitted] == ["resp_ga2"]


def test_speech_clears_the_track_at_once_and_drops_the_rest_of_the_reply() -> None:
    rig = Rig()
    rig.event(started("r1"))
    rig.playout.audio(pcm(400))
    assert rig.track.frames
    cleared = rig.event(SpeechStarted())
    assert [e["type"] for e in cleared] == ["output_audio_buffer.cleared"]
    assert cleared[0]["response_id"] == "resp_ga1"
    assert rig.track.frames == []
    assert "clear" in rig.track.calls
    assert rig.playout.audio(pcm(100)) == []  # the cut reply's late audio is not played
    assert rig.track.frames == []
    assert rig.event(done("interrupted", response_id="r1")) == []  # said once
    rig.send_all("r1")
    assert rig.emitted == []  # no stopped after cleared
    # The next reply plays again.
    rig.event(started("r2"), ga_id="resp_ga2")
    assert [e["response_id"] for e in rig.playout.audio(pcm(100))] == ["resp_ga2"]
    sdk_parse_all(cleared)


def test_the_client_s_clear_empties_the_track_and_nothing_playing_says_nothing() -> None:
    rig = Rig()
    assert rig.playout.clear() == []
    rig.event(started("r1"))
    rig.playout.audio(pcm(300))
    cleared = rig.playout.clear()
    assert [e["type"] for e in cleared] == ["output_audio_buffer.cleared"]
    assert rig.track.frames == []
    assert rig.playout.clear() == []  # cleared once


def test_a_reply_without_audio_says_nothing_and_a_peer_without_audio_gets_none() -> None:
    rig = Rig()
    rig.event(started("r1"))
    assert rig.event(done(response_id="r1")) == []
    assert rig.emitted == []
    silent = Rig(audio=False)
    silent.event(started("r1"))
    assert silent.playout.audio(pcm(100)) == []
    assert silent.event(done(response_id="r1")) == []
