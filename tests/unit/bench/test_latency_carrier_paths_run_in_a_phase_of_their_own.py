"""The latency bench measures the four other carriers' phones in a phase of their own per
upstream (eight lanes, each gateway lane beside its own direct lane, as in the first phase),
against the baseline of their format, and reports them as rows, table lines and bars."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.latency.bench import PHASES, LatencyPlan, lane_specs
from bench.latency.carrier_peers import ExotelPhone, PlivoPhone, TelnyxPhone, VonagePhone
from bench.latency.fleet import Phase
from bench.latency.peers import GeminiDirect, OpenAIDirect, TwilioPhone
from bench.latency.plot import added_bars, plotted_paths
from bench.latency.stats import CARRIER_PATHS, PATHS, render, summarize


def phase(upstream: str) -> Phase:
    fake_url = "ws://127.0.0.1:9/v1" if upstream == "openai" else "https://127.0.0.1:9"
    ca_file = None if upstream == "openai" else Path("cert.pem")
    placement: dict[str, Any] = {}
    return Phase(upstream, None, fake_url, ca_file, None, "http://127.0.0.1:8", placement)  # type: ignore[arg-type]


def test_every_phase_runs_by_default_the_first_as_before() -> None:
    plan = LatencyPlan()
    assert plan.phases == ("main", "carriers")
    assert PHASES["main"] == ("browser_24k", "browser_16k", "browser_48k", "phone")
    assert PHASES["carriers"] == CARRIER_PATHS
    assert plan.paths == PATHS
    both, first = plan.estimate_s(), LatencyPlan(phases=("main",)).estimate_s()
    assert both == pytest.approx(2 * first)
    assert first == pytest.approx(203 * 1.3 + 10 + 203 * 1.1 + 10)
    assert LatencyPlan.quick(phases=("carriers",)).turns == 20


def test_a_plan_refuses_unknown_phases_and_turns_off_exotels_chunk_grid() -> None:
    with pytest.raises(ValueError, match="phases must be"):
        LatencyPlan(phases=("phones",))
    with pytest.raises(ValueError, match="multiples of 100"):
        LatencyPlan(speech_ms=320)
    LatencyPlan(speech_ms=320, phases=("main",))  # without Exotel's lanes, 20 ms is the grid


def test_on_openai_ulaw_phones_are_measured_against_pcmu_and_pcm16_ones_against_24_khz() -> None:
    specs = lane_specs(phase("openai"), 300, PHASES["carriers"])
    assert [(s.path, s.target) for s in specs] == [
        (path, target) for path in CARRIER_PATHS for target in ("direct", "gateway")
    ]
    lines = {(s.path, s.target): (s.audio.wire, s.audio.rate) for s in specs}
    assert lines == {
        ("phone_telnyx", "direct"): ("pcmu", 8000),
        ("phone_telnyx", "gateway"): ("pcmu", 8000),
        ("phone_plivo", "direct"): ("pcmu", 8000),
        ("phone_plivo", "gateway"): ("pcmu", 8000),
        ("phone_vonage", "direct"): ("pcm16", 24000),
        ("phone_vonage", "gateway"): ("pcm16", 16000),
        ("phone_exotel", "direct"): ("pcm16", 24000),
        ("phone_exotel", "gateway"): ("pcm16", 8000),
    }
    peers = [spec.make_peer() for spec in specs]
    directs = peers[0::2]
    assert all(isinstance(peer, OpenAIDirect) for peer in directs)
    assert [peer.wire for peer in directs] == ["pcmu", "pcmu", "pcm16", "pcm16"]  # type: ignore[attr-defined]
    gateways = peers[1::2]
    assert [type(peer) for peer in gateways] == [TelnyxPhone, PlivoPhone, VonagePhone, ExotelPhone]
    assert {peer.url for peer in gateways} == {"ws://127.0.0.1:8/phone/media"}


def test_on_gemini_every_carrier_is_measured_against_the_16_khz_baseline() -> None:
    specs = lane_specs(phase("gemini"), 300, PHASES["carriers"])
    directs = [spec for spec in specs if spec.target == "direct"]
    assert len(directs) == 4
    assert all(isinstance(spec.make_peer(), GeminiDirect) for spec in directs)
    assert {(spec.audio.wire, spec.audio.rate, spec.ca_file) for spec in directs} == {
        ("pcm16", 16000, Path("cert.pem"))
    }


def test_the_first_phase_keeps_twilio_on_its_own_route() -> None:
    specs = lane_specs(phase("openai"), 300)
    assert [s.path for s in specs[::2]] == ["browser_24k", "browser_16k", "browser_48k", "phone"]
    twilio = specs[-1].make_peer()
    assert isinstance(twilio, TwilioPhone)
    assert twilio.url == "ws://127.0.0.1:8/twilio/media"


def lane(upstream: str, path: str, target: str, values: list[float | None]) -> dict[str, Any]:
    measured = sum(v is not None for v in values)
    return {
        "upstream": upstream,
        "path": path,
        "target": target,
        "latencies_ms": values,
        "counts": {"turns": len(values), "measured": measured},
    }


def carrier_lanes() -> list[dict[str, Any]]:
    return [
        lane("gemini", "phone_exotel", "gateway", [330.0]),
        lane("gemini", "phone_exotel", "direct", [300.0]),
        lane("openai", "phone_vonage", "gateway", [504.0]),
        lane("openai", "phone_vonage", "direct", [500.0]),
        lane("openai", "phone", "gateway", [501.0]),
        lane("openai", "phone", "direct", [500.0]),
        lane("openai", "phone_telnyx", "gateway", [502.0]),
        lane("openai", "phone_telnyx", "direct", [500.0]),
    ]


def test_carrier_rows_follow_twilios_with_their_titles() -> None:
    rows = summarize(carrier_lanes())
    assert [(r["upstream"], r["path"], r["added_p50_ms"]) for r in rows] == [
        ("openai", "phone", 1.0),
        ("openai", "phone_telnyx", 2.0),
        ("openai", "phone_vonage", 4.0),
        ("gemini", "phone_exotel", 30.0),
    ]
    text = render(rows, {"turns": 1, "warmup": 0})
    assert "| OpenAI Realtime fake | phone (Telnyx, µ-law 8 kHz) | 1 / 1 |" in text
    assert "| OpenAI Realtime fake | phone (Vonage, PCM16 16 kHz) |" in text
    assert "| Gemini Live fake | phone (Exotel, PCM16 8 kHz) |" in text
    assert "**30.0** / 30.0 | 30.0 | **not met** |" in text


def test_the_plot_has_a_group_of_bars_per_path_measured() -> None:
    rows = summarize(carrier_lanes())
    paths = plotted_paths(rows)
    assert paths == ("phone", "phone_telnyx", "phone_vonage", "phone_exotel")
    assert added_bars(rows, paths) == {
        "openai": [(0, 1.0, 1.0), (1, 2.0, 2.0), (2, 4.0, 4.0)],
        "gemini": [(3, 30.0, 30.0)],
    }
    assert added_bars(rows)["gemini"] == [(PATHS.index("phone_exotel"), 30.0, 30.0)]
