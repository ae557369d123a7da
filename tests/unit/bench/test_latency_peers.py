"""What each kind of latency-bench lane sends and which messages it takes for reply audio."""

from __future__ import annotations

import base64

import orjson

from bench.latency.peers import (
    GatewayBrowser,
    GeminiDirect,
    OpenAIDirect,
    TwilioPhone,
    gemini_direct_setup,
    openai_session_update,
    stream_token_from_twiml,
)
from gateway.edges.twilio.signature import connect_twiml


def test_openai_direct_appends_base64_and_hears_audio_deltas_only() -> None:
    peer = OpenAIDirect("ws://fake/v1/realtime?model=m", "pcm16")
    sent = orjson.loads(peer.encode(b"\x01\x02"))
    assert sent == {"type": "input_audio_buffer.append", "audio": "AQI="}
    delta = {"type": "response.output_audio.delta", "delta": base64.b64encode(b"ab").decode()}
    assert peer.hear(orjson.dumps(delta).decode()).audio
    assert not peer.hear('{"type":"response.output_audio_transcript.delta","delta":"You"}').audio
    assert not peer.hear('{"type":"error","error":{"code":"bad"}}').audio
    assert peer.events["error:bad"] == 1


def test_the_direct_openai_session_is_the_gateways_in_the_lanes_format() -> None:
    update = openai_session_update("pcmu")["session"]["audio"]
    assert update["input"]["format"] == {"type": "audio/pcmu"}
    assert update["output"]["format"] == {"type": "audio/pcmu"}
    assert update["input"]["turn_detection"]["type"] == "server_vad"
    assert openai_session_update("pcm16")["session"]["audio"]["input"]["format"] == {
        "type": "audio/pcm",
        "rate": 24000,
    }


def test_gemini_direct_sends_realtime_input_at_16_khz_and_hears_model_audio() -> None:
    peer = GeminiDirect("wss://fake/ws")
    sent = orjson.loads(peer.encode(b"\x00\x00"))
    assert sent["realtimeInput"]["audio"]["mimeType"] == "audio/pcm;rate=16000"
    part = {"inlineData": {"mimeType": "audio/pcm;rate=24000", "data": "AAAA"}}
    message = orjson.dumps({"serverContent": {"modelTurn": {"parts": [part]}}})
    assert peer.hear(message).audio
    assert not peer.hear(b'{"serverContent":{"outputTranscription":{"text":"You"}}}').audio
    setup = orjson.loads(gemini_direct_setup("m"))["setup"]
    assert setup["model"] == "models/m"
    assert setup["generationConfig"] == {"responseModalities": ["AUDIO"]}


def test_a_browser_lane_sends_binary_and_takes_binary_frames_for_audio() -> None:
    peer = GatewayBrowser("ws://gw/v1/session", 16000)
    assert peer.encode(b"\x01\x02") == b"\x01\x02"
    assert peer.hear(b"\x00\x00").audio
    assert not peer.hear('{"type":"response.started","response_id":"r"}').audio
    peer.hear('{"type":"error","code":"invalid_audio"}')
    peer.hear('{"type":"session.ended","reason":"error"}')
    assert peer.events == {"error:invalid_audio": 1, "session.ended:error": 1}
    assert peer.goodbye() == ['{"type":"session.end"}']


def test_a_phone_lane_numbers_its_media_and_echoes_marks() -> None:
    peer = TwilioPhone("http://gw", stream_sid="MZ1", call_sid="CA1")
    assert peer.url == "ws://gw/twilio/media"
    first, second = (orjson.loads(peer.encode(b"\xff" * 160)) for _ in range(2))
    assert first["media"]["chunk"] == "1"
    assert second["media"]["chunk"] == "2"
    assert second["sequenceNumber"] == "3"  # "start" was 1
    assert base64.b64decode(first["media"]["payload"]) == b"\xff" * 160
    media = {"event": "media", "streamSid": "MZ1", "media": {"payload": "//8="}}
    assert peer.hear(orjson.dumps(media).decode()).audio
    heard = peer.hear('{"event":"mark","streamSid":"MZ1","mark":{"name":"m1"}}')
    assert not heard.audio
    assert [orjson.loads(reply) for reply in heard.replies] == [
        {"event": "mark", "streamSid": "MZ1", "mark": {"name": "m1"}}
    ]
    peer.hear('{"event":"clear","streamSid":"MZ1"}')
    assert peer.events == {"twilio:clear": 1}
    assert orjson.loads(peer.goodbye()[0])["event"] == "stop"


def test_the_stream_token_comes_from_the_webhooks_twiml() -> None:
    assert stream_token_from_twiml(connect_twiml("wss://gw/twilio/media", {"token": "t"})) == "t"
    assert stream_token_from_twiml(connect_twiml("wss://gw/twilio/media", {"token": ""})) == ""
