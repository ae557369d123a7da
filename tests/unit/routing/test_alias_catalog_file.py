"""The operator's model file (``GATEWAY_MODELS``): what ``parse_catalog`` accepts, the fields of
the document and its aliases it refuses with the exact message naming each, and how
``load_catalog`` reads TOML or JSON. Targets: ``test_alias_targets.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from alias_kit import NAME_RULE, PROVIDER_NAMES, one_alias, refusal, with_targets

from gateway.routing.aliases import (
    Alias,
    CatalogError,
    ModelCatalog,
    Target,
    load_catalog,
    parse_catalog,
)

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
