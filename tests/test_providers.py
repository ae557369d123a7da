"""A provider is done when every place that names providers agrees: the registry of transports
(``gateway.providers``), the settings, the client protocol, and the tool registry's adapters for
the declarations each transport reads. (Its behaviour is ``tests/contract/``'s business.)"""

from __future__ import annotations

import typing

import pytest

from gateway.config import Settings
from gateway.protocol import Provider
from gateway.providers import PROVIDERS, make_transport
from transports.base import TransportError


def test_settings_protocol_and_transports_name_the_same_providers() -> None:
    settings_names = set(typing.get_args(Settings.model_fields["provider"].annotation))
    assert settings_names == set(PROVIDERS)
    assert {p.value for p in Provider} == set(PROVIDERS)


def test_phone_calls_may_use_every_provider_that_speaks() -> None:
    annotation = Settings.model_fields["twilio_provider"].annotation
    voice_capable = {"local", "openai", "gemini"}
    names = {a for arg in typing.get_args(annotation) for a in typing.get_args(arg)}
    assert names == voice_capable
    assert voice_capable <= set(PROVIDERS)


def test_an_unknown_provider_is_a_clear_error() -> None:
    with pytest.raises(TransportError, match="'nope' is not available"):
        make_transport("nope", Settings(auth="none"))


@pytest.mark.parametrize("name", sorted(PROVIDERS))
def test_every_builder_makes_a_transport_or_says_what_is_missing(name: str) -> None:
    settings = Settings(auth="none", openai_api_key=None, gemini_api_key=None, chat_api_key=None)
    if name == "local":
        assert PROVIDERS[name](settings).capabilities.modes
        return
    with pytest.raises(TransportError, match="is not set on the gateway"):
        PROVIDERS[name](settings)  # no key in these settings
