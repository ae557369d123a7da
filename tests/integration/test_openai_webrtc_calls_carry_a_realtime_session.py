"""OpenAI's WebRTC interface on the gateway, end to end over real sockets and a real peer
connection (aiortc, loopback), on the embedded local model and on the OpenAI Realtime fake: a
client secret minted with the gateway's credential; the SDP offer posted with it (as
``application/sdp``, and as OpenAI's multipart "unified interface" through the ``openai`` SDK
itself); 201 with the answer and the call's ``Location``; on the ``oai-events`` data channel the
GA events, ``session.created`` first; a spoken turn answered with audio on the track (never as
``response.output_audio.delta``) and ``output_audio_buffer.started`` / ``.stopped``; a registry
tool run by the gateway; barge-in (the track cleared at once, ``output_audio_buffer.cleared``,
the model's memory cut at what the track sent); the client's ``output_audio_buffer.clear``; a
hangup; a ``session.update`` that still reshapes the session until the user first speaks (the
microphone's silence does not use it); a gateway with auth off, as ``scripts/serve`` runs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from harness import Gateway, GatewayFactory, pcm_silence, pcm_tone, token
from openai import AsyncOpenAI
from realtime_call_kit import CALLS, RATE, call, mint, say, transcript
from webrtc_kit import Peer

from fakes.openai_realtime.server import FakeOptions, FakeRealtimeServer

MODELS = {"local": "local", "openai": "gpt-realtime"}
LONG = " ".join(f"w{n}" for n in range(40))  # 4 s of speech


@pytest.fixture(params=list(MODELS))
async def upstream(
    request: pytest.FixtureRequest, gateway_factory: GatewayFactory
) -> AsyncIterator[tuple[Gateway, str, FakeRealtimeServer | None]]:
    if request.param == "local":
        yield await gateway_factory(), "local", None
        return
    async with FakeRealtimeServer(FakeOptions()) as fake:
        gateway = await gateway_factory(
            openai_ws_url=fake.ws_url,
            openai_api_key="sk-test",
            upstream_reconnect_attempts=1,
            upstream_reconnect_backoff_s=0.01,
        )
        yield gateway, MODELS["openai"], fake


async def ephemeral(gateway: Gateway, model: str, **session: Any) -> str:
    minted = await mint(
        gateway, token("alice"), {"session": {"type": "realtime", "model": model, **session}}
    )
    assert minted.status == 200, minted.text
    value: str = minted.json()["value"]
    return value


def speak(peer: Peer, ms: int) -> None:
    peer.microphone.push(pcm_tone(ms, rate=RATE) + pcm_silence(900, rate=RATE))


async def test_a_spoken_turn_is_answered_on_the_track_with_the_ga_events(
    upstream: tuple[Gateway, str, FakeRealtimeServer | None],
) -> None:
    gateway, model, _ = upstream
    key = await ephemeral(gateway, model, instructions="Be brief.")
    peer = Peer("oai-events")
    try:
        answer = await call(gateway, key, peer)
        assert answer.headers["Content-Type"].startswith("application/sdp")
        location = answer.headers["Location"]
        assert location.startswith(CALLS + "/rtc_")
        created = await peer.until_event("session.created")
        assert peer.events[0] is created  # first on the channel
        assert created["session"]["instructions"] == "Be brief."
        assert created["session"]["audio"]["input"]["turn_detection"]["type"] == "server_vad"
        speak(peer, 500)
        await peer.until_event("output_audio_buffer.stopped", within=15)
        await peer.until(lambda: peer.loud_frames() >= 10)
    finally:
        await peer.close()
    kinds = peer.kinds()
    order = [
        "session.created",
        "input_audio_buffer.speech_started",
        "response.created",
        "response.output_audio_transcript.delta",
        "output_audio_buffer.started",
        "response.done",
        "output_audio_buffer.stopped",
    ]
    positions = [kinds.index(kind) for kind in order]
    assert positions == sorted(positions), kinds
    assert "response.output_audio.delta" not in kinds  # the audio is the track's
    assert transcript(peer).startswith("You said: audio:")
    done = peer.first("response.done")
    started = peer.first("output_audio_buffer.started")
    assert started["response_id"] == done["response"]["id"]
    assert peer.first("output_audio_buffer.stopped")["response_id"] == done["response"]["id"]


async def test_a_registry_tool_runs_in_the_gateway_on_a_call(
    upstream: tuple[Gateway, str, FakeRealtimeServer | None],
) -> None:
    gateway, model, _ = upstream
    peer = Peer("oai-events")
    try:
        await call(gateway, await ephemeral(gateway, model), peer)
        await peer.until_event("session.created")
        say(peer, "/tool get_current_time {}")
        await peer.until(lambda: "Tool results: get_current_time=" in transcript(peer), 15)
    finally:
        await peer.close()
    assert ("get_current_time", "executed") in gateway.decisions("get_current_time")
    # The gateway's tools are its own: the client is asked to run nothing.
    assert not [e for e in peer.events if e["type"].startswith("response.function_call")]


async def test_the_user_s_speech_clears_the_track_and_cuts_the_reply_where_it_was_sent(
    gateway_factory: GatewayFactory,
) -> None:
    async with FakeRealtimeServer(FakeOptions()) as fake:
        gateway = await gateway_factory(
            openai_ws_url=fake.ws_url,
            openai_api_key="sk-test",
            upstream_reconnect_attempts=1,
            upstream_reconnect_backoff_s=0.01,
        )
        peer = Peer("oai-events")
        try:
            await call(gateway, await ephemeral(gateway, "gpt-realtime"), peer)
            await peer.until_event("session.created")
            say(peer, f"/say {LONG}")
            await peer.until_event("output_audio_buffer.started")
            await peer.until(lambda: peer.loud_frames() >= 40)  # 0.8 s of it heard
            speak(peer, 400)
            cleared = await peer.until_event("output_audio_buffer.cleared", within=15)
            heard = peer.loud_frames()
            conn = fake.connections[-1]
            truncate = await conn.wait_for("conversation.item.truncate", direction="in")
            done = await peer.until_event("response.done")
        finally:
            await peer.close()
    # The model had said it all (the fake is faster than real time): the reply was still
    # playing, and what the track had not sent is dropped.
    assert cleared["response_id"] == done["response"]["id"]
    # Cut at what the track had sent (reported every 60 ms; the peer's jitter buffer aside),
    # not at the 4 s the model had produced. The peer heard about a second of it.
    assert abs(truncate["audio_end_ms"] - heard * 20) <= 200, (heard, truncate)
    assert "output_audio_buffer.stopped" not in [
        e["type"] for e in peer.events if e.get("response_id") == done["response"]["id"]
    ]


async def test_the_client_clears_the_track_and_hangs_up(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory(local_pace=1.0)
    peer = Peer("oai-events")
    try:
        answer = await call(gateway, await ephemeral(gateway, "local"), peer)
        await peer.until_event("session.created")
        say(peer, f"/say {LONG}")
        await peer.until_event("output_audio_buffer.started")
        peer.send({"type": "response.cancel"})
        peer.send({"type": "output_audio_buffer.clear"})
        cleared = await peer.until_event("output_audio_buffer.cleared")
        await peer.until_event("response.done")
        assert "error" not in peer.kinds()
        (session,) = gateway.manager.sessions.values()
        async with gateway.http.post(
            gateway.url + answer.headers["Location"] + "/hangup",
            headers={"Authorization": f"Bearer {token('alice')}"},
        ) as hung_up:
            assert hung_up.status == 200
        await asyncio.wait_for(session.ended.wait(), 10)
    finally:
        await peer.close()
    assert cleared["response_id"] == peer.first("response.created")["response"]["id"]
    assert gateway.manager.sessions == {}


async def test_the_openai_sdk_mints_a_secret_and_opens_a_call_with_a_session_part(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory()
    server = AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=token("alice"))
    secret = await server.realtime.client_secrets.create(
        session={"type": "realtime", "model": "local", "instructions": "From the key."},
        expires_after={"anchor": "created_at", "seconds": 120},
    )
    assert secret.value.startswith("ek_")
    assert secret.session.type == "realtime"
    browser = AsyncOpenAI(base_url=f"{gateway.url}/v1", api_key=secret.value)
    peer = Peer("oai-events")
    try:
        raw = await browser.realtime.calls.with_raw_response.create(
            sdp=await peer.offer(),
            session={"type": "realtime", "output_modalities": ["text"]},
        )
        assert raw.status_code == 201
        assert raw.headers["location"].startswith(CALLS + "/rtc_")
        await peer.answered({"sdp": raw.content.decode(), "type": "answer"})
        created = await peer.until_event("session.created")
        # The key's config, then the call's own session part over it.
        assert created["session"]["instructions"] == "From the key."
        assert created["session"]["output_modalities"] == ["text"]
        say(peer, "hello there")
        done = await peer.until_event("response.done")
        assert done["response"]["output"][0]["content"][0]["text"] == "You said: hello there"
        call_id = raw.headers["location"].rsplit("/", 1)[1]
        await browser.realtime.calls.hangup(call_id)
        await peer.until(
            lambda: gateway.manager.sessions == {} or peer.pc.connectionState == "closed"
        )
    finally:
        await peer.close()
        await server.close()
        await browser.close()


async def test_a_session_update_reshapes_the_call_until_the_user_first_speaks(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory()
    peer = Peer("oai-events")
    weather = {
        "type": "function",
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
    try:
        await call(gateway, await ephemeral(gateway, "local"), peer)
        await peer.until_event("session.created")
        await peer.until(lambda: len(peer.levels) > 10)  # the tracks flow both ways
        # The microphone's silence did not put the session in use: voice and tools change.
        peer.send(
            {
                "type": "session.update",
                "session": {
                    "type": "realtime",
                    "audio": {"output": {"voice": "marin"}},
                    "tools": [weather],
                },
            }
        )
        updated = await peer.until_event("session.updated")
        assert updated["session"]["audio"]["output"]["voice"] == "marin"
        assert [t["name"] for t in updated["session"]["tools"]] == ["get_weather"]
        speak(peer, 500)
        await peer.until_event("response.done", within=15)
        # Once the user has spoken, the voice is the session's for good (as on /v1/realtime).
        peer.send(
            {
                "type": "session.update",
                "session": {"type": "realtime", "audio": {"output": {"voice": "cedar"}}},
            }
        )
        refused = await peer.until_event("error")
    finally:
        await peer.close()
    assert (refused["error"]["code"], refused["error"]["param"]) == ("unsupported", "voice")
    assert "error" not in peer.kinds()[: peer.kinds().index("response.done")]


async def test_with_auth_off_a_page_of_this_machine_mints_and_calls(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory(auth="none", auth_secret=None)
    page = "http://localhost:3000"
    minted = await mint(gateway, "anything", Origin=page)
    assert minted.status == 200, minted.text
    assert minted.headers["Access-Control-Allow-Origin"] == page
    peer = Peer("oai-events")
    try:
        await call(gateway, minted.json()["value"], peer)
        await peer.until_event("session.created")
        (session,) = gateway.manager.sessions.values()
        assert session.user.user_id == "local"  # the anonymous user, as on every socket
    finally:
        await peer.close()
