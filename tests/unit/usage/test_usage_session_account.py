"""A session's account (gateway.usage.account) and its reporter (gateway.usage.report): sums
per response, the summary, what survives a snapshot, and what reaches the counters once."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from gateway.usage import PriceTable, SessionUsage, TokenCounts, UsageReporter


@dataclass
class Profile:
    provider: str = "openai"
    mode: str = "voice"
    model: str | None = None


@dataclass
class Counters:
    usage: list[tuple[tuple[str, str], TokenCounts]] = field(default_factory=list)
    audio: dict[tuple[str, str], float] = field(default_factory=dict)

    def model_of(self, provider: str, mode: str, model: str | None) -> str:
        return model or f"default-{mode}"

    def model_labels(self, provider: str, mode: str, model: str | None) -> tuple[str, str]:
        return provider, self.model_of(provider, mode, model)

    def count_usage(self, labels: tuple[str, str], tokens: TokenCounts) -> None:
        self.usage.append((labels, tokens))

    def count_audio(self, provider_label: str, direction: str, seconds: float) -> None:
        key = (provider_label, direction)
        self.audio[key] = self.audio.get(key, 0.0) + seconds


OPENAI_USAGE = {
    "input_tokens": 30,
    "output_tokens": 70,
    "input_token_details": {"text_tokens": 10, "audio_tokens": 20, "cached_tokens": 0},
    "output_token_details": {"text_tokens": 20, "audio_tokens": 50},
}


def test_responses_sum_and_the_summary_says_it_all() -> None:
    usage = SessionUsage()
    counters = Counters()
    reporter = UsageReporter(usage, Profile(), counters)
    usage.audio_in_ms += 1500.0
    reporter.response_reported(OPENAI_USAGE)
    reporter.audio_out(2000.0)
    reporter.response_reported(None)  # a response the upstream gave no usage
    usage.add_tool_call("ok")
    usage.add_tool_call("TIMEOUT")
    usage.add_tool_call("ok")
    summary = reporter.summary()
    assert summary == {
        "responses": 2,
        "tokens": {
            "input_text": 10,
            "input_audio": 20,
            "input_cached": 0,
            "output_text": 20,
            "output_audio": 50,
            "output_reasoning": 0,
        },
        "audio_in_s": 1.5,
        "audio_out_s": 2.0,
        "tool_calls": {"TIMEOUT": 1, "ok": 2},
        "model": "default-voice",
    }
    assert [labels for labels, _ in counters.usage] == [("openai", "default-voice")] * 2
    assert counters.audio == {("openai", "out"): 2.0, ("openai", "in"): 1.5}


def test_audio_in_reaches_the_counters_once_whenever_it_is_flushed() -> None:
    usage = SessionUsage()
    counters = Counters()
    reporter = UsageReporter(usage, Profile(), counters)
    usage.audio_in_ms += 400.0
    reporter.response_reported(None)
    usage.audio_in_ms += 600.0
    reporter.summary()
    reporter.summary()
    assert counters.audio[("openai", "in")] == pytest.approx(1.0)


def test_a_restored_account_goes_on_and_reports_only_what_is_new() -> None:
    before = SessionUsage()
    before.add_tokens(TokenCounts(input_text=5, output_audio=9))
    before.audio_out_ms = 300.0
    before.add_cost(0.25)
    before.audio_in_ms = 2500.0
    before.add_tool_call("ok")
    after = SessionUsage()
    after.restore(before.as_json())
    assert after.as_json() == before.as_json()
    counters = Counters()
    reporter = UsageReporter(after, Profile(mode="text"), counters)
    after.audio_in_ms += 500.0
    reporter.response_reported({"input_tokens": 1, "output_tokens": 1})
    assert counters.audio[("openai", "in")] == pytest.approx(0.5)
    assert after.responses == 2
    assert after.tokens == TokenCounts(input_text=6, output_text=1, output_audio=9)


def test_a_stored_summary_that_is_damaged_restores_as_zero() -> None:
    usage = SessionUsage()
    usage.restore({"responses": "3", "tokens": [1], "audio_in_s": -1, "tool_calls": {"ok": None}})
    assert usage.as_json()["responses"] == 0
    assert usage.tokens == TokenCounts()
    assert usage.tool_calls == {"ok": 0}


def test_the_summary_carries_the_estimate_when_a_price_row_matches() -> None:
    prices = PriceTable.parse({"models": {"openai/gpt-realtime": {"output_audio": 80.0}}})
    usage = SessionUsage()
    reporter = UsageReporter(usage, Profile(model="gpt-realtime"), Counters(), prices)
    reporter.response_reported(OPENAI_USAGE)
    summary = reporter.summary()
    assert summary["estimated_cost"] == pytest.approx(50 * 80.0 / 1e6)
    assert summary["currency"] == "USD"
    other = UsageReporter(SessionUsage(), Profile(provider="chat"), Counters(), prices)
    assert "estimated_cost" not in other.summary()


def test_each_response_is_priced_with_the_model_that_produced_it() -> None:
    """Found in review: the session was priced with its last mode's model (Gemini's voice and
    text models differ), and a model a client named with the metric label ``other``."""
    prices = PriceTable.parse(
        {
            "models": {
                "gemini/default-voice": {"output_audio": 12.0},
                "gemini/default-text": {"output_text": 2.0},
                "openai/gpt-realtime-mini": {"output_audio": 20.0},
            }
        }
    )
    profile = Profile(provider="gemini", mode="voice")
    reporter = UsageReporter(SessionUsage(), profile, Counters(), prices)
    gemini_audio = {
        "promptTokenCount": 0,
        "responseTokensDetails": [{"modality": "AUDIO", "tokenCount": 1_000_000}],
    }
    reporter.response_reported(gemini_audio)
    profile.mode = "text"
    reporter.response_reported({"promptTokenCount": 0, "responseTokenCount": 1_000_000})
    summary = reporter.summary()
    assert summary["estimated_cost"] == pytest.approx(12.0 + 2.0)
    assert summary["model"] == "default-text"
    named = UsageReporter(SessionUsage(), Profile(model="gpt-realtime-mini"), Counters(), prices)
    named.response_reported(OPENAI_USAGE)
    assert named.summary()["model"] == "gpt-realtime-mini"
    assert named.summary()["estimated_cost"] == pytest.approx(50 * 20.0 / 1e6)


def test_metric_labels_come_from_the_configured_models_only() -> None:
    from gateway.observability import Metrics

    metrics = Metrics(models={"gemini": {"voice": "g-voice", "text": "g-text"}})
    assert metrics.model_labels("gemini", "text", None) == ("gemini", "g-text")
    assert metrics.model_labels("gemini", "voice", "g-text") == ("gemini", "g-text")
    assert metrics.model_labels("gemini", "voice", "made-up-by-a-client") == ("gemini", "other")
    assert metrics.model_labels("nobody", "voice", None) == ("other", "other")
    metrics.count_usage(("gemini", "g-text"), TokenCounts(input_text=3, output_audio=4))
    sample = metrics.registry.get_sample_value
    labels = {"provider": "gemini", "model": "g-text"}
    assert sample("gateway_usage_tokens_total", {**labels, "kind": "input_text"}) == 3
    assert sample("gateway_usage_tokens_total", {**labels, "kind": "output_audio"}) == 4
    assert sample("gateway_usage_tokens_total", {**labels, "kind": "output_text"}) is None
    assert sample("gateway_usage_responses_total", labels) == 1
