"""The operator's model file (``GATEWAY_MODELS``): what ``parse_catalog`` accepts, every field it
refuses and the exact message naming that field, and how ``load_catalog`` reads TOML or JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gateway.errors import ConfigError
from gateway.providers import PROVIDERS
from gateway.routing.aliases import (
    Alias,
    CatalogError,
    ModelCatalog,
    Target,
    load_catalog,
    parse_catalog,
)

# The build's providers as the app passes them (a tuple, in registration order).
PROVIDER_NAMES = ("openai", "gemini", "chat", "local")
LISTED = "chat, gemini, local, openai"
NAME_RULE = "a model name is 1-128 letters, digits and . _ : / - (starting with a letter or digit)"


def one_alias(entry: object, name: str = "x") -> dict[str, Any]:
    return {"models": {name: entry}}


def with_targets(*targets: object) -> dict[str, Any]:
    return one_alias({"targets": list(targets)})


def refusal(document: object, providers: tuple[str, ...] = PROVIDER_NAMES) -> str:
    with pytest.raises(CatalogError) as caught:
        parse_catalog(document, providers)
    return str(caught.value)


# -- a file that holds -------------------------------------------------------------------------


def test_a_full_document_becomes_the_catalog_it_describes() -> None:
    catalog = parse_catalog(
        {
            "default": "talk",
            "models": {
                "fast": {"targets": [{"provider": "chat", "model": "gpt-4o-mini"}]},
                "talk": {
                    "description": "the voice agent",
                    "roles": ["staff", "admin"],
                    "targets": [
                        {"provider": "openai", "model": "gpt-realtime", "voice": "marin"},
                        {"provider": "gemini", "weight": 3},
                        {"provider": "local", "weight": 0.5},
                    ],
                },
            },
        },
        PROVIDER_NAMES,
    )
    assert catalog == ModelCatalog(
        aliases={
            "fast": Alias("fast", (Target("chat", "gpt-4o-mini"),)),
            "talk": Alias(
                "talk",
                (
                    Target("openai", "gpt-realtime", "marin"),
                    Target("gemini", weight=3.0),
                    Target("local", weight=0.5),
                ),
                roles=frozenset({"staff", "admin"}),
                description="the voice agent",
            ),
        },
        default="talk",
        source="GATEWAY_MODELS",
    )
    assert catalog.names() == ("fast", "talk")  # the file's order
    talk = catalog.get("talk")
    assert talk is not None
    assert isinstance(talk.targets[1].weight, float)


def test_without_a_default_the_first_alias_is_the_default() -> None:
    catalog = parse_catalog(
        {
            "models": {
                "zeta": {"targets": [{"provider": "openai"}]},
                "alpha": {"targets": [{"provider": "gemini"}]},
            }
        },
        PROVIDER_NAMES,
    )
    assert catalog.default == "zeta"


def test_optional_fields_default_to_nothing() -> None:
    catalog = parse_catalog(with_targets({"provider": "openai"}), PROVIDER_NAMES)
    assert catalog.get("x") == Alias("x", (Target("openai"),), roles=None, description="")


def test_null_model_voice_and_weight_count_as_absent() -> None:
    catalog = parse_catalog(
        with_targets({"provider": "openai", "model": None, "voice": None, "weight": None}),
        PROVIDER_NAMES,
    )
    assert catalog.get("x") == Alias("x", (Target("openai"),))


@pytest.mark.parametrize("name", ["a", "gpt-4o", "team/voice:v2", "A.b_c-d", "9lives", "a" * 128])
def test_names_that_hold(name: str) -> None:
    assert parse_catalog(one_alias({"targets": [{"provider": "openai"}]}, name), PROVIDER_NAMES)


def test_the_same_provider_twice_with_different_models_holds() -> None:
    catalog = parse_catalog(
        with_targets({"provider": "openai", "model": "a"}, {"provider": "openai"}),
        PROVIDER_NAMES,
    )
    alias = catalog.get("x")
    assert alias is not None
    assert [t.key for t in alias.targets] == ["openai/a", "openai/*"]


def test_the_source_names_where_the_messages_point() -> None:
    catalog = parse_catalog(with_targets({"provider": "openai"}), PROVIDER_NAMES, source="m.toml")
    assert catalog.source == "m.toml"
    with pytest.raises(CatalogError) as caught:
        parse_catalog(with_targets({"provider": "nope"}), PROVIDER_NAMES, source="m.toml")
    assert str(caught.value).startswith("m.toml: models.x.targets[0].provider: ")


# -- the document and its models ---------------------------------------------------------------


@pytest.mark.parametrize("document", [[], "models", None, 3, [("models", {})]])
def test_a_document_that_is_no_table(document: object) -> None:
    assert refusal(document) == (
        "GATEWAY_MODELS: the document must be a table of 'default' and 'models'"
    )


def test_an_unknown_top_level_field_is_named() -> None:
    document = {"models": {"x": {"targets": [{"provider": "openai"}]}}, "zz": 1, "aliases": {}}
    assert refusal(document) == "GATEWAY_MODELS: unknown field 'aliases'"


@pytest.mark.parametrize(
    "document", [{}, {"default": "x"}, {"models": {}}, {"models": []}, {"models": "x"}]
)
def test_models_must_name_at_least_one(document: object) -> None:
    assert refusal(document) == "GATEWAY_MODELS: 'models' must name at least one model"


@pytest.mark.parametrize("default", ["y", "", None, 1, ["x"]])
def test_a_default_that_names_no_model(default: object) -> None:
    document = {
        "default": default,
        "models": {
            "x": {"targets": [{"provider": "openai"}]},
            "z": {"targets": [{"provider": "gemini"}]},
        },
    }
    assert refusal(document) == "GATEWAY_MODELS: 'default' must name one of the models (x, z)"


@pytest.mark.parametrize(
    "name", ["", "-lead", ".lead", "/lead", "has space", "a" * 129, "é", "semi;colon", "a\tb"]
)
def test_a_bad_model_name(name: str) -> None:
    document = one_alias({"targets": [{"provider": "openai"}]}, name)
    assert refusal(document) == f"GATEWAY_MODELS: models.{name}: {NAME_RULE}"


def test_a_model_name_that_is_no_string() -> None:
    document = {"models": {7: {"targets": [{"provider": "openai"}]}}}
    assert refusal(document) == f"GATEWAY_MODELS: models.7: {NAME_RULE}"


def test_a_model_name_with_a_trailing_newline_is_refused() -> None:
    document = one_alias({"targets": [{"provider": "openai"}]}, "x\n")
    assert refusal(document) == f"GATEWAY_MODELS: models.x\n: {NAME_RULE}"


# -- an alias ----------------------------------------------------------------------------------


@pytest.mark.parametrize("entry", [[{"provider": "openai"}], "openai", None, 1])
def test_an_alias_that_is_no_table(entry: object) -> None:
    assert refusal(one_alias(entry)) == "GATEWAY_MODELS: models.x: must be a table with 'targets'"


def test_an_unknown_alias_field_is_named() -> None:
    entry = {"targets": [{"provider": "openai"}], "weight": 2, "voice": "marin"}
    assert refusal(one_alias(entry)) == "GATEWAY_MODELS: models.x: unknown field 'voice'"


@pytest.mark.parametrize(
    "entry",
    [
        {},
        {"targets": []},
        {"targets": None},
        {"targets": {"provider": "openai"}},
        {"targets": "openai"},
        {"targets": ({"provider": "openai"},)},
    ],
)
def test_an_alias_without_targets(entry: object) -> None:
    assert refusal(one_alias(entry)) == (
        "GATEWAY_MODELS: models.x.targets: must list at least one target"
    )


def test_the_failing_alias_is_named_among_several() -> None:
    document = {
        "models": {
            "good": {"targets": [{"provider": "openai"}]},
            "bad": {"targets": []},
        }
    }
    assert refusal(document) == "GATEWAY_MODELS: models.bad.targets: must list at least one target"


@pytest.mark.parametrize("roles", [[], "admin", {"admin": True}, [1], ["admin", None]])
def test_roles_must_be_a_non_empty_list_of_names(roles: object) -> None:
    entry = {"targets": [{"provider": "openai"}], "roles": roles}
    assert refusal(one_alias(entry)) == (
        "GATEWAY_MODELS: models.x.roles: must be a non-empty list of role names"
    )


@pytest.mark.parametrize("description", [None, 1, ["a"], {"a": 1}])
def test_a_description_must_be_a_string(description: object) -> None:
    entry = {"targets": [{"provider": "openai"}], "description": description}
    assert refusal(one_alias(entry)) == "GATEWAY_MODELS: models.x.description: must be a string"


@pytest.mark.parametrize(
    "targets",
    [
        [{"provider": "openai"}, {"provider": "openai"}],
        [{"provider": "openai", "model": "m"}, {"provider": "openai", "model": "m"}],
        # Another voice is still the same upstream: one breaker, one key.
        [
            {"provider": "openai", "model": "m", "voice": "a"},
            {"provider": "gemini"},
            {"provider": "openai", "model": "m", "voice": "b", "weight": 1},
        ],
    ],
)
def test_a_target_listed_twice(targets: list[object]) -> None:
    assert refusal(with_targets(*targets)) == (
        "GATEWAY_MODELS: models.x.targets: a target is listed twice"
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


# -- the file ----------------------------------------------------------------------------------

TOML = """
default = "talk"

[models.talk]
description = "the voice agent"
roles = ["staff"]

[[models.talk.targets]]
provider = "openai"
model = "gpt-realtime"
weight = 2

[[models.talk.targets]]
provider = "gemini"
voice = "Puck"

[models."team/fast"]
targets = [{ provider = "chat", model = "gpt-4o-mini" }]
"""

EXPECTED = {
    "talk": Alias(
        "talk",
        (Target("openai", "gpt-realtime", weight=2.0), Target("gemini", voice="Puck")),
        roles=frozenset({"staff"}),
        description="the voice agent",
    ),
    "team/fast": Alias("team/fast", (Target("chat", "gpt-4o-mini"),)),
}

JSON_DOCUMENT = {
    "default": "talk",
    "models": {
        "talk": {
            "description": "the voice agent",
            "roles": ["staff"],
            "targets": [
                {"provider": "openai", "model": "gpt-realtime", "weight": 2},
                {"provider": "gemini", "voice": "Puck"},
            ],
        },
        "team/fast": {"targets": [{"provider": "chat", "model": "gpt-4o-mini"}]},
    },
}


@pytest.mark.parametrize("name", ["models.toml", "MODELS.TOML", "models.Toml"])
def test_a_toml_file_is_read_as_toml(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text(TOML)
    catalog = load_catalog(path, PROVIDER_NAMES)
    assert catalog == ModelCatalog(aliases=EXPECTED, default="talk", source=str(path))


@pytest.mark.parametrize("name", ["models.json", "models", "models.yaml", "models.toml.json"])
def test_any_other_file_is_read_as_json(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text(json.dumps(JSON_DOCUMENT))
    catalog = load_catalog(path, PROVIDER_NAMES)
    assert catalog == ModelCatalog(aliases=EXPECTED, default="talk", source=str(path))


def test_toml_in_a_json_file_is_invalid(tmp_path: Path) -> None:
    path = tmp_path / "models.json"
    path.write_text(TOML)
    with pytest.raises(CatalogError) as caught:
        load_catalog(path, PROVIDER_NAMES)
    assert str(caught.value).startswith(f"GATEWAY_MODELS: {path} is not valid: ")


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("models.toml", b"[models.x\nprovider = 'openai'\n"),
        ("models.toml", b"x = "),
        ("models.toml", b"name = '\xff\xfe'\n"),  # not UTF-8
        ("models.json", b'{"models": {'),
        ("models.json", b"{'models': {}}"),
        ("models.json", b""),
        ("models.json", b'{"models": "\xff"}'),  # not UTF-8
    ],
)
def test_invalid_syntax_is_a_catalog_error(tmp_path: Path, name: str, content: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(CatalogError) as caught:
        load_catalog(path, PROVIDER_NAMES)
    message = str(caught.value)
    assert message.startswith(f"GATEWAY_MODELS: {path} is not valid: ")
    assert len(message) > len(f"GATEWAY_MODELS: {path} is not valid: ")
    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__


def test_a_missing_file_cannot_be_read(tmp_path: Path) -> None:
    path = tmp_path / "absent.toml"
    with pytest.raises(CatalogError) as caught:
        load_catalog(path, PROVIDER_NAMES)
    assert str(caught.value) == f"GATEWAY_MODELS: cannot read {path}: No such file or directory"


def test_a_directory_cannot_be_read(tmp_path: Path) -> None:
    with pytest.raises(CatalogError) as caught:
        load_catalog(tmp_path, PROVIDER_NAMES)
    assert str(caught.value) == f"GATEWAY_MODELS: cannot read {tmp_path}: Is a directory"


def test_a_read_file_is_checked_and_its_errors_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "models.toml"
    path.write_text(
        "[[models.x.targets]]\nprovider = 'openai'\n\n"
        "[[models.x.targets]]\nprovider = 'gemini'\nweight = -1\n"
    )
    with pytest.raises(CatalogError) as caught:
        load_catalog(path, PROVIDER_NAMES)
    assert str(caught.value) == (
        f"{path}: models.x.targets[1].weight: must be a number above 0, at most 1e+06"
    )


def test_a_json_array_is_no_catalog(tmp_path: Path) -> None:
    path = tmp_path / "models.json"
    path.write_text("[]")
    with pytest.raises(CatalogError) as caught:
        load_catalog(path, PROVIDER_NAMES)
    assert str(caught.value) == (f"{path}: the document must be a table of 'default' and 'models'")


def test_a_read_catalog_is_checked_against_the_providers_given(tmp_path: Path) -> None:
    path = tmp_path / "models.toml"
    path.write_text(TOML)
    with pytest.raises(CatalogError) as caught:
        load_catalog(path, ("gemini", "chat"))
    assert str(caught.value) == (
        f"{path}: models.talk.targets[0].provider: 'openai' is not a provider of this build "
        "(chat, gemini)"
    )
