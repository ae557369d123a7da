"""The targets of an alias file: every field a target may have, what is refused with the message
naming it, and what targets, aliases and the catalog answer once parsed."""

from __future__ import annotations

import pytest
from alias_kit import LISTED, PROVIDER_NAMES, refusal, with_targets

from gateway.errors import ConfigError
from gateway.providers import PROVIDERS
from gateway.routing.aliases import (
    Alias,
    CatalogError,
    Target,
    parse_catalog,
)

# -- a target ----------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", ["openai", ["openai"], None, 1])
def test_a_target_that_is_no_table(raw: object) -> None:
    assert refusal(with_targets({"provider": "openai"}, raw)) == (
        "GATEWAY_MODELS: models.x.targets[1]: must be a table with 'provider'"
    )


def test_an_unknown_target_field_is_named() -> None:
    document = with_targets({"provider": "openai"}, {"provider": "gemini", "modle": "m", "x": 1})
    assert refusal(document) == "GATEWAY_MODELS: models.x.targets[1]: unknown field 'modle'"


@pytest.mark.parametrize(
    ("provider", "shown"),
    [("azure", "'azure'"), ("OpenAI", "'OpenAI'"), ("", "''"), (None, "None"), (3, "3")],
)
def test_an_unknown_provider_lists_the_builds_providers(provider: object, shown: str) -> None:
    document = with_targets({"provider": "openai"}, {"provider": provider})
    assert refusal(document) == (
        f"GATEWAY_MODELS: models.x.targets[1].provider: {shown} is not a provider of this "
        f"build ({LISTED})"
    )


def test_a_missing_provider_is_an_unknown_one() -> None:
    assert refusal(with_targets({"model": "m"})) == (
        f"GATEWAY_MODELS: models.x.targets[0].provider: None is not a provider of this build "
        f"({LISTED})"
    )


def test_the_providers_listed_are_those_of_this_build() -> None:
    names = PROVIDERS.names()
    with pytest.raises(CatalogError) as caught:
        parse_catalog(with_targets({"provider": "azure"}), names)
    assert str(caught.value).endswith(f"({', '.join(sorted(names))})")
    for name in names:
        assert parse_catalog(with_targets({"provider": name}), names)


def test_a_provider_that_is_a_list_is_refused_whatever_collection_the_providers_are() -> None:
    with pytest.raises(CatalogError, match=r"targets\[0\]\.provider: "):
        parse_catalog(with_targets({"provider": ["openai"]}), frozenset(PROVIDER_NAMES))


def test_a_provider_that_is_a_list_is_refused_with_the_apps_tuple() -> None:
    assert refusal(with_targets({"provider": ["openai"]})) == (
        f"GATEWAY_MODELS: models.x.targets[0].provider: ['openai'] is not a provider of this "
        f"build ({LISTED})"
    )


@pytest.mark.parametrize("field", ["model", "voice"])
@pytest.mark.parametrize("value", ["", "   ", "\t\n", 1, True, ["m"], {"m": 1}])
def test_model_and_voice_must_be_non_empty_strings(field: str, value: object) -> None:
    document = with_targets({"provider": "openai"}, {"provider": "gemini", field: value})
    assert refusal(document) == (
        f"GATEWAY_MODELS: models.x.targets[1].{field}: must be a non-empty string"
    )


@pytest.mark.parametrize(
    "weight", [0, 0.0, -1, -0.5, True, False, "2", [1], {"w": 1}, float("nan")]
)
def test_a_weight_must_be_a_number_above_zero(weight: object) -> None:
    document = with_targets({"provider": "openai"}, {"provider": "gemini", "weight": weight})
    assert refusal(document) == (
        "GATEWAY_MODELS: models.x.targets[1].weight: must be a number above 0, at most 1e+06"
    )


@pytest.mark.parametrize("weight", [1, 2.5, 1e-9, 100])
def test_positive_weights_hold_as_floats(weight: float) -> None:
    catalog = parse_catalog(with_targets({"provider": "openai", "weight": weight}), PROVIDER_NAMES)
    alias = catalog.get("x")
    assert alias is not None
    assert alias.targets[0].weight == float(weight)
    assert type(alias.targets[0].weight) is float


def test_the_first_bad_field_of_a_target_is_the_one_named() -> None:
    # Unknown fields first, then the provider, then model and voice, then the weight.
    bad = {"provider": "azure", "model": "", "weight": 0}
    assert "targets[0].provider: 'azure'" in refusal(with_targets(bad))
    assert "targets[0].model: " in refusal(with_targets({**bad, "provider": "openai"}))
    assert refusal(with_targets({**bad, "provider": "openai", "model": "m"})).endswith(
        "targets[0].weight: must be a number above 0, at most 1e+06"
    )
    assert refusal(with_targets({**bad, "extra": 1})).endswith("unknown field 'extra'")


# -- targets, aliases and the catalog ----------------------------------------------------------


def test_a_targets_key_names_its_model_or_a_star() -> None:
    assert Target("openai", "gpt-realtime").key == "openai/gpt-realtime"
    assert Target("openai").key == "openai/*"
    assert Target("gemini", None, "Puck", 2.0).key == "gemini/*"
    assert Target("chat", "team/model:v1", "x").key == "chat/team/model:v1"


def test_a_target_as_a_dict_leaves_out_what_is_unset() -> None:
    assert Target("openai").to_dict() == {"provider": "openai"}
    assert Target("openai", "m").to_dict() == {"provider": "openai", "model": "m"}
    assert Target("openai", voice="v").to_dict() == {"provider": "openai", "voice": "v"}
    assert Target("openai", "m", "v").to_dict() == {
        "provider": "openai",
        "model": "m",
        "voice": "v",
    }


def test_an_alias_without_roles_is_for_anyone() -> None:
    alias = Alias("x", (Target("openai"),))
    assert alias.allowed_for([])
    assert alias.allowed_for(("anyone",))


def test_an_alias_with_roles_needs_one_of_them() -> None:
    alias = Alias("x", (Target("openai"),), roles=frozenset({"staff", "admin"}))
    assert alias.allowed_for(["admin"])
    assert alias.allowed_for(("guest", "staff"))
    assert alias.allowed_for({"staff", "admin"})
    assert not alias.allowed_for([])
    assert not alias.allowed_for(["guest"])
    assert not alias.allowed_for(["Admin"])  # role names are exact


def test_the_catalog_shows_each_caller_the_aliases_its_roles_allow_in_file_order() -> None:
    catalog = parse_catalog(
        {
            "models": {
                "open": {"targets": [{"provider": "openai"}]},
                "staff": {"targets": [{"provider": "gemini"}], "roles": ["staff"]},
                "admin": {"targets": [{"provider": "chat"}], "roles": ["admin", "root"]},
                "also-open": {"targets": [{"provider": "local"}]},
            }
        },
        PROVIDER_NAMES,
    )

    def visible(*roles: str) -> list[str]:
        return [a.name for a in catalog.visible_to(roles)]

    assert visible() == ["open", "also-open"]
    assert visible("staff") == ["open", "staff", "also-open"]
    assert visible("root") == ["open", "admin", "also-open"]
    assert visible("admin", "staff") == ["open", "staff", "admin", "also-open"]
    assert catalog.get("nope") is None


def test_a_catalog_error_is_a_config_error() -> None:
    assert issubclass(CatalogError, ConfigError)
    with pytest.raises(ConfigError):
        parse_catalog({}, PROVIDER_NAMES)
