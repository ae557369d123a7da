"""The protocols of ``scripts/bench relay``: frames per provider, each codec on stamped frames."""

from __future__ import annotations

import base64
from collections import Counter

import orjson
import pytest

from bench.relay.bench import output_name
from bench.relay.report import title
from bench.relay.stats import StampedFrame, parse_frame, stamp_frame
from bench.relay.targets import (
    GEMINI_PATH,
    PROVIDERS,
    GatewayCodec,
    GeminiDirectCodec,
    OpenAIDirectCodec,
    Provider,
    Target,
    direct_url,
    gemini_setup,
    is_setup_complete,
    make_codec,
)

GEMINI = PROVIDERS["gemini"]
OPENAI = PROVIDERS["openai"]


def _model_turn(*datas: str, mime: str = "audio/pcm;rate=24000") -> bytes:
    parts = [{"inlineData": {"mimeType": mime, "data": data}} for data in datas]
    return orjson.dumps({"serverContent": {"modelTurn": {"role": "model", "parts": parts}}})


# --- providers ---------------------------------------------------------------------------------


def test_frames_are_20_ms_at_the_providers_input_rate() -> None:
    assert (OPENAI.input_rate, OPENAI.output_rate, OPENAI.frame_bytes) == (24000, 24000, 960)
    assert (GEMINI.input_rate, GEMINI.output_rate, GEMINI.frame_bytes) == (16000, 24000, 640)


def test_the_gateway_session_starts_at_the_providers_own_rates() -> None:
    start = orjson.loads(GEMINI.gateway_start())
    assert start == {
        "type": "session.start",
        "mode": "voice",
        "audio": {"input_rate": 16000, "output_rate": 24000},
    }
    assert orjson.loads(OPENAI.gateway_start())["audio"] == {
        "input_rate": 24000,
        "output_rate": 24000,
    }


def test_direct_urls_follow_each_fake() -> None:
    assert (
        direct_url("openai", "ws://127.0.0.1:5000/v1/")
        == "ws://127.0.0.1:5000/v1/realtime?model=gpt-realtime"
    )
    assert direct_url("gemini", "https://127.0.0.1:5001") == f"wss://127.0.0.1:5001{GEMINI_PATH}"
    assert GEMINI_PATH.endswith("v1beta.GenerativeService.BidiGenerateContent")


def test_each_provider_has_its_own_results_file_and_title() -> None:
    assert output_name("openai") == "relay.json"
    assert output_name("gemini") == "relay_gemini.json"
    assert "provider gemini" in title(GEMINI)
    assert "640-byte frames" in title(GEMINI)
    assert "16 kHz in, 24 kHz out" in title(GEMINI)


# --- Gemini direct -----------------------------------------------------------------------------


def test_the_gemini_setup_asks_for_audio_from_the_model() -> None:
    assert orjson.loads(gemini_setup("m-1")) == {
        "setup": {"model": "models/m-1", "generationConfig": {"responseModalities": ["AUDIO"]}}
    }
    assert is_setup_complete(b'{"setupComplete":{}}')
    assert is_setup_complete('{"setupComplete": {}, "usageMetadata": {}}')
    assert not is_setup_complete(b'{"sessionResumptionUpdate":{}}')
    assert not is_setup_complete(b"not json")
    assert not is_setup_complete(b"[1]")


def test_a_gemini_frame_goes_up_as_16_khz_realtime_input() -> None:
    frame = stamp_frame(7, 42, GEMINI.frame_bytes)
    message = orjson.loads(GeminiDirectCodec(Counter()).encode(frame))
    audio = message["realtimeInput"]["audio"]
    assert audio["mimeType"] == "audio/pcm;rate=16000"
    assert base64.b64decode(audio["data"]) == frame
    assert list(message) == ["realtimeInput"]


def test_the_echoed_model_turn_gives_the_same_stamped_frame_back() -> None:
    codec = GeminiDirectCodec(Counter())
    frame = stamp_frame(7, 42, GEMINI.frame_bytes)
    sent = orjson.loads(codec.encode(frame))["realtimeInput"]["audio"]["data"]
    (back,) = codec.decode(_model_turn(sent))  # JSON in a binary frame
    assert back == frame
    assert parse_frame(back, GEMINI.frame_bytes) == StampedFrame(7, 42, intact=True)
    assert codec.decode(_model_turn(sent).decode()) == [frame]  # or in a text frame


def test_url_safe_and_unpadded_base64_decode_alike() -> None:
    frame = stamp_frame(1, 2, GEMINI.frame_bytes)
    url_safe = base64.urlsafe_b64encode(frame).decode().rstrip("=")
    assert GeminiDirectCodec(Counter()).decode(_model_turn(url_safe)) == [frame]


def test_several_audio_parts_give_several_frames_in_order() -> None:
    frames = [stamp_frame(0, n, GEMINI.frame_bytes) for n in range(3)]
    datas = [base64.b64encode(f).decode() for f in frames]
    assert GeminiDirectCodec(Counter()).decode(_model_turn(*datas)) == frames


def test_other_gemini_messages_give_no_frame_and_the_notable_ones_are_counted() -> None:
    events: Counter[str] = Counter()
    codec = GeminiDirectCodec(events)
    ignored = [
        b'{"sessionResumptionUpdate":{"newHandle":"h","resumable":true}}',
        b'{"usageMetadata":{"totalTokenCount":3}}',
        b'{"serverContent":{"generationComplete":true}}',
        b'{"serverContent":{"turnComplete":true}}',
        b'{"serverContent":{"modelTurn":{"parts":[{"text":"hi"}]}}}',
        b'{"goAway":{"timeLeft":"5s"}}',
        _model_turn("AAAA", mime="image/jpeg"),
        _model_turn("%%%%"),
    ]
    assert [codec.decode(message) for message in ignored] == [[]] * len(ignored)
    assert events == Counter(
        {
            "gemini:turnComplete": 1,
            "gemini:goAway": 1,
            "gemini:not_audio": 1,
            "gemini:bad_base64": 1,
        }
    )


# --- OpenAI direct and the gateway -------------------------------------------------------------


def test_an_openai_frame_round_trips_through_append_and_delta() -> None:
    codec = OpenAIDirectCodec(Counter())
    frame = stamp_frame(3, 4)
    append = orjson.loads(codec.encode(frame))
    assert append["type"] == "input_audio_buffer.append"
    delta = orjson.dumps({"type": "response.output_audio.delta", "delta": append["audio"]})
    assert codec.decode(delta) == [frame]


def test_the_gateway_codec_sends_raw_frames_and_cuts_them_at_the_providers_size() -> None:
    events: Counter[str] = Counter()
    codec = make_codec("gateway", GEMINI, events)
    assert isinstance(codec, GatewayCodec)
    frames = [stamp_frame(2, n, GEMINI.frame_bytes) for n in range(2)]
    assert codec.encode(frames[0]) == frames[0]
    assert codec.decode(frames[0] + frames[1]) == frames
    assert codec.decode('{"type":"session.ended","reason":"upstream_lost"}') == []
    assert events == Counter({"session.ended:upstream_lost": 1})


@pytest.mark.parametrize(
    ("target", "provider", "kind"),
    [
        ("direct", "openai", OpenAIDirectCodec),
        ("direct", "gemini", GeminiDirectCodec),
        ("gateway", "openai", GatewayCodec),
        ("gateway", "gemini", GatewayCodec),
    ],
)
def test_each_target_and_provider_has_its_codec(
    target: Target, provider: Provider, kind: type[object]
) -> None:
    assert isinstance(make_codec(target, PROVIDERS[provider], Counter()), kind)
