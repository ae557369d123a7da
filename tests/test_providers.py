"""A provider is done when every place that names providers agrees: the registry of transports
(``gateway.providers``), the settings, the client protocol, and the tool registry's adapters for
the declarations each transport reads. (Its behaviour is ``tests/contract/``'s business.)"""

from __future__ import annotations

import typing

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
    try:
        make_transport("nope", Settings(auth="none"))
    except TransportError as error:
        assert "'nope' is not available" in str(error)
    else:
        raise AssertionError("no error")


def test_every_builder_makes_a_transport_or_says_what_is_missing() -> None:
    settings = Settings(auth="none")
    for name, build in PROVIDERS.items():
        try:
            transport = build(settings)
        except TransportError as error:
            assert "is not set on the gateway" in str(error), name
        else:
            assert transport.capabilities.modes, name
