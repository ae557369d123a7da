"""A provider is its record (``gateway.providers``): everything that names providers derives from
the registry of records, and each record agrees with the transport it builds. (The transport's
behaviour is ``tests/contract/``'s business; a provider added by its transport folder and its
record alone is ``tests/integration/test_a_provider_is_a_transport_and_a_record.py``.)"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from gateway.config import Settings
from gateway.protocol import ProtocolError, SessionStart, decode_text
from gateway.providers import (
    PROVIDERS,
    ModelNames,
    ProviderSettings,
    make_transport,
    warm_up_upstreams,
)
from gateway.providers.record import ProviderRecord, UpstreamSettings
from gateway.registry.provider_schemas import DIALECTS, provider_schemas
from transports.base import TransportError

REPO = Path(__file__).resolve().parents[1]
NAMES = PROVIDERS.names()
KEYS: dict[str, Any] = {"openai_api_key": None, "gemini_api_key": None, "chat_api_key": None}
# A fake key for each setting a record needs: enough to build (never to connect).
GIVEN = {"openai_api_key": "sk-given", "gemini_api_key": "g-given", "chat_api_key": "c-given"}


def _settings(**values: Any) -> Settings:
    return Settings(auth="none", **{**KEYS, **values})


@pytest.mark.parametrize("name", NAMES)
def test_the_settings_and_the_protocol_accept_every_registered_name(name: str) -> None:
    assert _settings(provider=name).provider == name
    event = decode_text(f'{{"type": "session.start", "mode": "text", "provider": "{name}"}}')
    assert isinstance(event, SessionStart)
    assert event.provider == name


def test_a_name_not_registered_is_refused_with_the_registered_ones() -> None:
    listed = ", ".join(f"'{name}'" for name in NAMES[:-1]) + f" or '{NAMES[-1]}'"
    with pytest.raises(ValidationError, match=f"Input should be {listed}"):
        _settings(provider="anthropic")
    with pytest.raises(ProtocolError, match=f"'provider' must be {listed}"):
        SessionStart(mode="text", provider="anthropic")  # type: ignore[arg-type]
    with pytest.raises(TransportError, match="'anthropic' is not available"):
        make_transport("anthropic", _settings())


def test_phone_calls_take_exactly_the_providers_that_speak() -> None:
    speaking = {record.name for record in PROVIDERS if "voice" in record.modes}
    assert speaking == set(PROVIDERS.speaking())
    for name in NAMES:
        if name in speaking:
            assert _settings(twilio_provider=name).phone_provider == name
        else:
            with pytest.raises(ValidationError, match="a phone call needs a provider that speaks"):
                _settings(twilio_provider=name)


@pytest.mark.parametrize("name", NAMES)
def test_each_record_builds_a_transport_that_agrees_with_it(name: str) -> None:
    record = PROVIDERS[name]
    if record.needs:
        missing = f"^{re.escape(str(record.needed()))} is not set on the gateway$"
        with pytest.raises(TransportError, match=missing):
            make_transport(name, _settings())
    given = {need: GIVEN[need] for need in record.needs[:1]}
    transport = make_transport(name, _settings(**given))
    assert transport.capabilities.modes == record.modes
    assert (transport.capabilities.input_rate, transport.capabilities.output_rate) == (
        record.input_rate,
        record.output_rate,
    )


def test_what_a_record_needs_is_reported_by_its_variables() -> None:
    assert PROVIDERS["openai"].needed() == "OPENAI_API_KEY"
    assert PROVIDERS["chat"].needed() == "GATEWAY_CHAT_API_KEY (or OPENAI_API_KEY)"
    assert PROVIDERS["local"].needed() is None
    assert PROVIDERS["chat"].missing(_settings(openai_api_key="sk-given")) is None


def test_every_provider_setting_belongs_to_a_record() -> None:
    """The settings the records read are ``ProviderSettings``, and only theirs."""
    owned = {field for record in PROVIDERS for field in record.settings.model_fields}
    assert owned == set(ProviderSettings.model_fields)
    assert set(ProviderSettings.model_fields) <= set(Settings.model_fields)


def test_each_dialect_is_one_the_registry_writes() -> None:
    written = provider_schemas("t", "d", {"type": "object", "properties": {}}, False)
    assert set(written) == {dialect.key for dialect in DIALECTS}
    for record in PROVIDERS:
        assert record.dialect is None or record.dialect in DIALECTS


def test_a_model_name_picks_one_provider() -> None:
    for record in PROVIDERS:
        for described in record.model_names.described():
            name = described.strip("'").replace("…", "x")
            assert PROVIDERS.for_model(name) is record
    clash = ProviderRecord(
        name="mimic",
        title="a provider answering to gpt-4o names",
        settings=UpstreamSettings,
        modes=frozenset({"text"}),
        input_rate=16000,
        output_rate=16000,
        dialect=None,
        model_names=ModelNames(prefixes=("gpt-4o",)),
        default_models=lambda _: {"voice": "m", "text": "m"},
        build=lambda _: make_transport("local", _settings()),
        genai_name="mimic",
    )
    with pytest.raises(ValueError, match="answers to model names of 'openai'"):
        PROVIDERS.register(clash)
    with pytest.raises(ValueError, match="registered already"):
        PROVIDERS.register(PROVIDERS["local"])
    assert PROVIDERS.names() == NAMES  # nothing refused was kept


# Where a provider's name appears in the gateway's code outside its records, as a string that
# is not a provider: (module, string) and why.
NOT_PROVIDERS = {
    ("gateway/admission.py", "local"): "the user id of an anonymous local user",
    ("gateway/session/manager.py", "local"): "the node id of a gateway without one",
    ("gateway/__main__.py", "chat"): "the terminal chat command",
    ("gateway/observability/genai.py", "chat"): "the GenAI operation name of a model call",
    ("gateway/registry/provider_schemas.py", "gemini"): "the key of a declaration dialect",
}


def _named_providers(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and node.value in NAMES
        and id(node) not in docstrings
    }


def test_no_module_outside_the_records_names_a_provider() -> None:
    """Everything else asks the record: a provider's name as a string in the gateway's code is
    one of the reasons above, or a place that should ask ``PROVIDERS`` instead."""
    found = {
        (str(path.relative_to(REPO)), name)
        for path in sorted((REPO / "gateway").rglob("*.py"))
        if "providers" not in path.relative_to(REPO / "gateway").parts[:1]
        for name in _named_providers(path)
    }
    assert found == set(NOT_PROVIDERS)


def test_every_provider_whose_key_is_set_is_warmed_up_at_start() -> None:
    """Any session may ask for any provider, not only the default: each usable one does its
    first session's work (imports, shared clients) when the node starts, not in a turn."""
    warmed: list[str] = []

    def record(name: str, needs: tuple[str, ...]) -> ProviderRecord[Any]:
        return ProviderRecord(
            name=name,
            title=name,
            settings=UpstreamSettings if not needs else Settings,
            needs=needs,
            modes=frozenset({"text"}),
            input_rate=16000,
            output_rate=16000,
            dialect=None,
            model_names=ModelNames(prefixes=(f"{name}-",)),
            default_models=lambda _: {"voice": "m", "text": "m"},
            build=lambda _: make_transport("local", _settings()),
            warm_up=lambda _: warmed.append(name),
            genai_name=name,
        )

    with (
        PROVIDERS.registered(record("keyless", ())),
        PROVIDERS.registered(record("keyed", ("chat_base_url",))),
    ):
        warm_up_upstreams(_settings(provider="local"))
        assert warmed == ["keyless"]  # "keyed" has no key set: its sessions cannot open
        warmed.clear()
        warm_up_upstreams(_settings(provider="local", chat_base_url="http://127.0.0.1:1/v1"))
        assert warmed == ["keyless", "keyed"]
