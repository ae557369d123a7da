"""``GET /v1/models`` (``models_listing``): the aliases a caller's roles and key may use, or
without aliases each configured provider's models, in OpenAI's list shape."""

from __future__ import annotations

from typing import Any

from gateway.routing.aliases import parse_catalog
from gateway.routing.listing import models_listing

PROVIDER_NAMES = ("openai", "gemini", "chat", "local")

CATALOG = parse_catalog(
    {
        "default": "talk",
        "models": {
            "talk": {
                "targets": [
                    {"provider": "openai", "model": "gpt-realtime"},
                    {"provider": "gemini"},
                ]
            },
            "fast": {"targets": [{"provider": "chat", "model": "gpt-4o-mini"}]},
            "staff-only": {"targets": [{"provider": "local"}], "roles": ["staff", "admin"]},
            "admin-only": {"targets": [{"provider": "openai"}], "roles": ["admin"]},
        },
    },
    PROVIDER_NAMES,
)

CONFIGURED = {
    "openai": {"voice": "gpt-realtime", "text": "gpt-realtime"},
    "gemini": {"voice": "gemini-live-audio", "text": "gemini-live-text"},
    "chat": {"text": "gpt-4o-mini"},
}


def entry(name: str, owner: str) -> dict[str, Any]:
    return {"id": name, "object": "model", "created": 0, "owned_by": owner}


def ids(listing: dict[str, Any]) -> list[str]:
    return [item["id"] for item in listing["data"]]


# -- with aliases ------------------------------------------------------------------------------


def test_the_aliases_anyone_may_use_in_openais_list_shape() -> None:
    listing = models_listing(CATALOG, roles=(), key_models=None, configured=CONFIGURED)
    assert listing == {
        "object": "list",
        "data": [entry("talk", "gateway"), entry("fast", "gateway")],
    }


def test_roles_show_the_aliases_they_allow_in_file_order() -> None:
    def names(*roles: str) -> list[str]:
        return ids(models_listing(CATALOG, roles=roles, key_models=None, configured=CONFIGURED))

    assert names("staff") == ["talk", "fast", "staff-only"]
    assert names("admin") == ["talk", "fast", "staff-only", "admin-only"]
    assert names("guest") == ["talk", "fast"]


def test_a_keys_models_filter_the_aliases() -> None:
    def names(key_models: tuple[str, ...], *roles: str) -> list[str]:
        return ids(models_listing(CATALOG, roles=roles, key_models=key_models, configured={}))

    assert names(("fast",)) == ["fast"]
    assert names(("chat/*",)) == ["fast"]
    assert names(("gpt-4o-mini",)) == ["fast"]
    assert names(("openai/gpt-realtime",)) == []  # talk's gemini target is not allowed
    assert names(("gpt-realtime", "gemini/*")) == ["talk"]
    assert names(("openai/*", "local/*"), "admin") == ["staff-only", "admin-only"]
    assert names(("staff-only",)) == []  # the key allows it, the roles do not
    assert names(()) == []


def test_with_aliases_the_configured_providers_are_not_listed() -> None:
    listing = models_listing(CATALOG, roles=(), key_models=None, configured=CONFIGURED)
    assert "gpt-realtime" not in ids(listing)
    assert {item["owned_by"] for item in listing["data"]} == {"gateway"}


# -- without aliases ---------------------------------------------------------------------------


def test_each_providers_distinct_models_in_mode_order() -> None:
    listing = models_listing(None, roles=(), key_models=None, configured=CONFIGURED)
    assert listing == {
        "object": "list",
        "data": [
            entry("gpt-realtime", "openai"),
            entry("gemini-live-audio", "gemini"),
            entry("gemini-live-text", "gemini"),
            entry("gpt-4o-mini", "chat"),
        ],
    }


def test_nothing_configured_lists_nothing() -> None:
    assert models_listing(None, roles=(), key_models=None, configured={}) == {
        "object": "list",
        "data": [],
    }


def test_without_aliases_roles_change_nothing() -> None:
    anyone = models_listing(None, roles=(), key_models=None, configured=CONFIGURED)
    assert models_listing(None, roles=("admin",), key_models=None, configured=CONFIGURED) == anyone


def test_without_aliases_a_keys_models_filter_the_providers_models() -> None:
    def names(key_models: tuple[str, ...]) -> list[tuple[str, str]]:
        listing = models_listing(None, roles=(), key_models=key_models, configured=CONFIGURED)
        return [(item["id"], item["owned_by"]) for item in listing["data"]]

    assert names(("gpt-realtime",)) == [("gpt-realtime", "openai")]
    assert names(("openai/gpt-realtime",)) == [("gpt-realtime", "openai")]
    assert names(("gemini/*",)) == [
        ("gemini-live-audio", "gemini"),
        ("gemini-live-text", "gemini"),
    ]
    assert names(("gemini/gemini-live-text", "chat/*")) == [
        ("gemini-live-text", "gemini"),
        ("gpt-4o-mini", "chat"),
    ]
    assert names(("openai/gpt-4o-mini",)) == []  # the model, of another provider
    assert names(("talk",)) == []
    assert names(()) == []


def test_a_model_two_providers_serve_is_listed_for_each() -> None:
    configured = {"openai": {"text": "shared"}, "chat": {"text": "shared"}}
    listing = models_listing(None, roles=(), key_models=None, configured=configured)
    assert listing["data"] == [entry("shared", "openai"), entry("shared", "chat")]
    only_chat = models_listing(None, roles=(), key_models=("chat/*",), configured=configured)
    assert only_chat["data"] == [entry("shared", "chat")]
