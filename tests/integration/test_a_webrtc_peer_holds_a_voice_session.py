"""A WebRTC peer (aiortc, over loopback) ↔ the gateway's ``/v1/webrtc/offer`` ↔ the local model:
the data channel carries the native protocol, the microphone track a spoken turn, the
gateway's track the reply's audio; a lost peer connection parks the session and a new one
resumes it; what the track sent is what a barge-in truncates at."""

from __future__ import annotations

import asyncio

from harness import GatewayFactory, pcm_silence, pcm_tone, token
from webrtc_kit import LOUD, Peer, connect

OFFER = "/v1/webrtc/offer"


async def test_a_spoken_turn_over_webrtc_is_answered_with_audio_and_resumed_after_a_drop(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory(resume_window_s=30.0)
    first = Peer()
    try:
        await connect(gateway.http, gateway.url + OFFER, token("alice"), first)
        # The tracks are 48 kHz whatever the client asked: so is the session's audio.
        first.send({"type": "session.start", "mode": "voice", "audio": {"input_rate": 16000}})
        started = await first.until_event("session.started")
        assert (started["audio"]["input_rate"], started["audio"]["output_rate"]) == (48000, 48000)
        # The microphone is decoded as it arrives (aiortc's own buffer would hold 80 ms).
        call = gateway.server.webrtc.call_for(started["session_id"])
        assert call.link.received is not None
        first.microphone.push(pcm_tone(500, rate=48000) + pcm_silence(900, rate=48000))
        await first.until_event("response.done")
        await first.until(lambda: first.loud_frames() >= 10)
        (session,) = gateway.manager.sessions.values()
    finally:
        await first.close()
    # The peer connection is gone: the session waits for its client, as after a dropped socket.
    await asyncio.sleep(0)  # let the closed state reach the gateway's side
    second = Peer()
    try:
        await connect(gateway.http, gateway.url + OFFER, token("alice"), second)
        resume = {"session_id": started["session_id"], "resume_token": started["resume_token"]}
        second.send({"type": "session.start", "mode": "voice", "resume": resume})
        resumed = await second.until_event("session.started")
        assert resumed["resumed"] is True
        assert resumed["session_id"] == session.session_id
        assert not session.ended.is_set()
        second.microphone.push(pcm_tone(500, rate=48000) + pcm_silence(900, rate=48000))
        await second.until_event("response.done")
        await second.until(lambda: second.loud_frames() >= 10)
        second.send({"type": "session.end"})
        ended = await second.until_event("session.ended")
        assert ended["reason"] == "client"
    finally:
        await second.close()
    await asyncio.wait_for(session.ended.wait(), 10)


async def test_events_before_the_start_get_the_sockets_answers(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory()
    peer = Peer(audio=False)
    try:
        await connect(gateway.http, gateway.url + OFFER, token("alice"), peer)
        peer.send({"type": "text.send", "text": "hi"})
        assert (await peer.until_event("error"))["code"] == "not_started"
        peer.send({"type": "ping", "id": "p1"})
        assert (await peer.until_event("pong"))["id"] == "p1"
        peer.channel.send("{not json")
        await peer.until(lambda: any(e.get("code") == "invalid_json" for e in peer.events))
        peer.send({"type": "session.start", "mode": "text"})
        await peer.until_event("session.started")
        peer.send({"type": "text.send", "text": "hello"})
        done = await peer.until_event("response.done")
        assert done["status"] == "completed"
        assert gateway.manager.sessions  # a text session needs no audio track
    finally:
        await peer.close()


async def test_the_channels_events_are_taken_in_order(gateway_factory: GatewayFactory) -> None:
    """A text right behind its session.start waits for the session (not ``not_started``)."""
    gateway = await gateway_factory()
    peer = Peer(audio=False)
    try:
        await connect(gateway.http, gateway.url + OFFER, token("alice"), peer)
        peer.send({"type": "session.start", "mode": "text"})
        words = ("first", "second", "third")
        for word in words:
            peer.send({"type": "text.send", "text": word})
        await peer.until(lambda: peer.kinds().count("response.done") == 3)
        assert "error" not in peer.kinds()
        texts = [e["text"] for e in peer.events if e["type"] == "response.done"]
        assert texts == [f"You said: {word}" for word in words]
    finally:
        await peer.close()


async def test_a_bad_offer_is_refused_with_a_reason_and_opens_nothing(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory()
    bearer = {"Authorization": f"Bearer {token('alice')}"}
    cases = [
        (b"not json", "JSON"),
        (b'{"type": "offer"}', "sdp"),
        (b'{"sdp": "hello", "type": "offer"}', "v=0"),
        (b'{"sdp": "v=0\\r\\n", "type": "answer"}', "offer"),
        (b'{"sdp": "v=0\\r\\no=- 1 1 IN IP4 0.0.0.0\\r\\n", "type": "offer"}', "not usable"),
        (b'{"sdp": "v=0\\r\\nm=audio abc UDP 1\\r\\n", "type": "offer"}', "cannot be read"),
    ]
    for body, says in cases:
        async with gateway.http.post(gateway.url + OFFER, data=body, headers=bearer) as response:
            assert response.status == 400, body
            assert says in (await response.json())["error"]["message"], body
    async with gateway.http.post(gateway.url + OFFER, json={"sdp": "v=0"}) as response:
        assert response.status == 401
    assert not gateway.manager.sessions


async def test_a_barge_in_stops_the_reply_track_and_truncates_at_what_it_sent(
    gateway_factory: GatewayFactory,
) -> None:
    # The local model hands over the reply's audio at once (pace 0): its response is done
    # before it is heard, seconds of it wait in the reply track, and only what the track has
    # sent may count as heard.
    gateway = await gateway_factory()
    peer = Peer()
    try:
        await connect(gateway.http, gateway.url + OFFER, token("alice"), peer)
        peer.send({"type": "session.start", "mode": "voice"})
        started = await peer.until_event("session.started")
        peer.send({"type": "text.send", "text": "/say " + " ".join(["word"] * 80)})
        done = await peer.until_event("response.done")
        await peer.until(lambda: peer.loud_frames() >= 40)  # 800 ms of the reply heard
        peer.microphone.push(pcm_tone(600, rate=48000) + pcm_silence(900, rate=48000))
        await peer.until_event("speech.started")
        heard_ms = peer.loud_frames() * 20
        at = len(peer.levels)
        # The track stopped at once: the frames in flight, then silence, not the 7 s left (the
        # answer to the interruption comes once its 600 ms have ended, later than this).
        await peer.until(lambda: len(peer.levels) >= at + 35)
        assert max(peer.levels[at + 10 : at + 35]) <= LOUD
    finally:
        await peer.close()
    session = gateway.manager.sessions[started["session_id"]]
    ((rid, truncated_ms),) = session.transport.truncations  # type: ignore[attr-defined]
    assert rid == done["response_id"]
    assert heard_ms - 200 <= truncated_ms <= heard_ms + 300, (truncated_ms, heard_ms)


async def test_a_resume_from_a_new_peer_connection_takes_over_a_live_one(
    gateway_factory: GatewayFactory,
) -> None:
    """A browser that switched networks: its old peer connection still looks alive to the
    gateway when the new one resumes. The new one gets the session; the old one is closed."""
    gateway = await gateway_factory()
    old, new = Peer(audio=False), Peer(audio=False)
    try:
        await connect(gateway.http, gateway.url + OFFER, token("alice"), old)
        old.send({"type": "session.start", "mode": "text"})
        started = await old.until_event("session.started")
        await connect(gateway.http, gateway.url + OFFER, token("alice"), new)
        resume = {"session_id": started["session_id"], "resume_token": started["resume_token"]}
        new.send({"type": "session.start", "mode": "text", "resume": resume})
        assert (await new.until_event("session.started"))["resumed"] is True
        closed = asyncio.Event()
        old.pc.on("connectionstatechange", lambda: closed.set())
        if old.pc.connectionState != "closed":
            await asyncio.wait_for(closed.wait(), 10)
        assert old.pc.connectionState == "closed"
        new.send({"type": "text.send", "text": "hello again"})
        assert (await new.until_event("response.done"))["status"] == "completed"
        assert "response.done" not in old.kinds()
    finally:
        await old.close()
        await new.close()


async def test_the_input_rate_stays_the_tracks(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory()
    peer = Peer()
    try:
        await connect(gateway.http, gateway.url + OFFER, token("alice"), peer)
        peer.send({"type": "session.start", "mode": "voice"})
        started = await peer.until_event("session.started")
        peer.send({"type": "session.update", "audio": {"input_rate": 16000}, "event_id": "e1"})
        error = await peer.until_event("error")
        assert (error["code"], error["event_id"]) == ("invalid_event", "e1")
        assert "audio.input_rate" in error["message"]
        assert gateway.manager.sessions[started["session_id"]].profile.input_rate == 48000
    finally:
        await peer.close()
