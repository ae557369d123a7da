"""``model_names``: which upstream ``/v1/realtime?model=…`` names, and the refusal of a name
whose upstream this gateway does not serve, listing the names it does (never "OPENAI_API_KEY is
not set" at the first audio)."""

from __future__ import annotations

from typing import Any

from gateway.config import Settings
from gateway.edges.realtime.model_names import model_refusal, provider_for_model, served_models


def _settings(provider: str, **keys: Any) -> Settings:
    given: dict[str, Any] = {
        "auth": "none",
        "openai_api_key": None,
        "gemini_api_key": None,
        "chat_api_key": None,
        **keys,
    }
    return Settings(provider=provider, **given)


def test_the_name_picks_the_upstream() -> None:
    assert provider_for_model("gpt-realtime") == "openai"
    assert provider_for_model("GPT-4o-realtime-preview") == "openai"
    assert provider_for_model("gemini-2.5-flash-native-audio") == "gemini"
    assert provider_for_model("local") == "local"
    assert provider_for_model("my-assistant") is None  # the default provider


def test_a_gemini_gateway_refuses_an_openai_model_and_says_what_it_serves() -> None:
    gemini_only = _settings("gemini", gemini_api_key="g-key")
    refusal = model_refusal("gpt-realtime", gemini_only)
    assert refusal is not None
    assert (refusal.type, refusal.code, refusal.param) == (
        "invalid_request_error",
        "model_not_found",
        "model",
    )
    assert refusal.message == (
        "The model 'gpt-realtime' is not served by this gateway: OpenAI Realtime is not "
        "configured on this gateway. It serves 'gemini-…' (Gemini Live), 'local' (the "
        "gateway's embedded model), and any other name (the default provider, Gemini Live)."
    )
    assert "API_KEY" not in refusal.message
    for served in ("gemini-2.5-flash-native-audio", "local", "my-assistant"):
        assert model_refusal(served, gemini_only) is None


def test_a_default_provider_without_its_key_serves_no_other_name() -> None:
    keyless = _settings("openai")
    assert served_models(keyless) == ["'local' (the gateway's embedded model)"]
    refusal = model_refusal("my-assistant", keyless)
    assert refusal is not None
    assert "its default provider (OpenAI Realtime) is not configured" in refusal.message
    assert model_refusal("local", keyless) is None


def test_every_upstream_configured_serves_every_name() -> None:
    everything = _settings("local", openai_api_key="o-key", gemini_api_key="g-key")
    assert len(served_models(everything)) == 4
    for name in ("gpt-realtime", "gemini-live", "local", "anything"):
        assert model_refusal(name, everything) is None


def test_the_chat_provider_takes_the_openai_key_too() -> None:
    assert model_refusal("anything", _settings("chat", openai_api_key="o-key")) is None
    assert model_refusal("anything", _settings("chat", chat_api_key="c-key")) is None
    assert model_refusal("anything", _settings("chat")) is not None
