"""Which alias a client's model name resolves to and for whom (``pick_alias``,
``key_allows_alias``), the target a session starts on (``first_target``), and the order it fails
over in (``route_of``, ``Route.after``)."""

from __future__ import annotations

import pytest

from gateway.routing.aliases import Alias, ModelCatalog, Target, parse_catalog
from gateway.routing.resolve import (
    NoSuchModel,
    Route,
    first_target,
    key_allows_alias,
    pick_alias,
    route_of,
)

PROVIDER_NAMES = ("openai", "gemini", "chat", "local")
IDS = [f"sess_{i:04d}" for i in range(400)]

CATALOG = parse_catalog(
    {
        "default": "talk",
        "models": {
            "talk": {
                "targets": [
                    {"provider": "openai", "model": "gpt-realtime"},
                    {"provider": "gemini", "model": "gemini-live", "voice": "Puck"},
                ]
            },
            "fast": {"targets": [{"provider": "chat", "model": "gpt-4o-mini"}]},
            "staff-only": {"targets": [{"provider": "local"}], "roles": ["staff"]},
            "mixed": {
                "targets": [
                    {"provider": "openai", "model": "gpt-realtime"},
                    {"provider": "chat", "model": "gpt-4o-mini"},
                ]
            },
        },
    },
    PROVIDER_NAMES,
)


def alias(name: str) -> Alias:
    found = CATALOG.get(name)
    assert found is not None
    return found


def refused(
    model: str | None,
    provider: str | None = None,
    roles: tuple[str, ...] = (),
    key_models: tuple[str, ...] | None = None,
    catalog: ModelCatalog = CATALOG,
) -> NoSuchModel:
    with pytest.raises(NoSuchModel) as caught:
        pick_alias(catalog, model, provider, roles, key_models)
    return caught.value


# -- pick_alias --------------------------------------------------------------------------------


def test_no_model_is_the_default_alias() -> None:
    assert pick_alias(CATALOG, None, None, (), None) is alias("talk")


def test_a_model_names_its_alias() -> None:
    assert pick_alias(CATALOG, "fast", None, (), None) is alias("fast")
    assert pick_alias(CATALOG, "staff-only", None, ("staff",), None) is alias("staff-only")


def test_an_unknown_model_lists_what_the_caller_may_use() -> None:
    error = refused("gpt-5")
    assert not error.forbidden
    assert str(error) == (
        "model: no model named 'gpt-5'; this gateway serves 'talk', 'fast', 'mixed'"
    )


def test_an_unknown_model_lists_only_aliases_the_roles_and_key_allow() -> None:
    error = refused("nope", roles=("staff",), key_models=("fast", "local/*"))
    assert not error.forbidden
    assert str(error) == "model: no model named 'nope'; this gateway serves 'fast', 'staff-only'"


def test_an_unknown_model_for_a_caller_who_may_use_nothing() -> None:
    error = refused("nope", key_models=("gemini/other",))
    assert not error.forbidden
    assert str(error) == "model: no model named 'nope'; this gateway serves no model to this caller"


def test_names_are_exact() -> None:
    assert not refused("Talk").forbidden
    assert not refused(" talk").forbidden
    assert not refused("").forbidden


def test_an_alias_outside_the_callers_roles_is_forbidden() -> None:
    error = refused("staff-only", roles=("guest",))
    assert error.forbidden
    assert str(error) == (
        "model: 'staff-only' is not available to this caller; it may use 'talk', 'fast', 'mixed'"
    )


def test_an_alias_outside_the_callers_key_is_forbidden() -> None:
    error = refused("talk", key_models=("fast",))
    assert error.forbidden
    assert str(error) == "model: 'talk' is not available to this caller; it may use 'fast'"


def test_a_forbidden_default_is_forbidden_when_no_model_is_named() -> None:
    error = refused(None, key_models=("fast",))
    assert error.forbidden
    assert str(error) == "model: 'talk' is not available to this caller; it may use 'fast'"


def test_a_forbidden_alias_for_a_caller_who_may_use_nothing() -> None:
    error = refused("fast", key_models=())
    assert error.forbidden
    assert str(error) == (
        "model: 'fast' is not available to this caller; it may use no model to this caller"
    )


def test_a_provider_inside_the_alias_keeps_the_alias() -> None:
    assert pick_alias(CATALOG, "talk", "gemini", (), None) is alias("talk")
    assert pick_alias(CATALOG, None, "gemini", (), None) is alias("talk")
    assert pick_alias(CATALOG, None, "openai", (), None) is alias("talk")


def test_a_provider_outside_the_default_with_no_model_is_that_provider_alone() -> None:
    assert pick_alias(CATALOG, None, "chat", (), None) is None
    assert pick_alias(CATALOG, None, "local", (), None) is None


def test_a_provider_outside_a_named_alias_is_refused() -> None:
    error = refused("talk", "chat")
    assert not error.forbidden
    assert str(error) == ("provider: 'chat' does not serve model 'talk' (served by gemini, openai)")


def test_a_provider_outside_a_single_target_alias_is_refused() -> None:
    error = refused("fast", "openai")
    assert not error.forbidden
    assert str(error) == "provider: 'openai' does not serve model 'fast' (served by chat)"


def test_access_is_checked_before_the_provider() -> None:
    error = refused("staff-only", "openai", roles=())
    assert error.forbidden


def test_a_provider_named_alone_by_a_caller_who_may_not_use_the_default_is_that_provider() -> None:
    staff_default = parse_catalog(
        {
            "default": "staff-only",
            "models": {"staff-only": {"targets": [{"provider": "local"}], "roles": ["staff"]}},
        },
        PROVIDER_NAMES,
    )
    # It named no model: the default it may not use is not what it asked for.
    assert pick_alias(staff_default, None, "local", (), None) is None
    assert pick_alias(staff_default, None, "local", ("staff",), None) is not None
    # A key limited to other models: the provider alone, checked against the key elsewhere.
    assert pick_alias(CATALOG, None, "openai", (), ("fast",)) is None


def test_a_key_may_allow_an_alias_by_its_targets() -> None:
    assert pick_alias(CATALOG, "fast", None, (), ("chat/*",)) is alias("fast")
    assert pick_alias(CATALOG, "talk", None, (), ("openai/*", "gemini-live")) is alias("talk")


# -- key_allows_alias --------------------------------------------------------------------------

TALK = Alias(
    "talk",
    (Target("openai", "gpt-realtime"), Target("gemini"), Target("chat", "gpt-4o-mini")),
)


def test_a_key_without_limits_allows_every_alias() -> None:
    assert key_allows_alias(None, TALK)


def test_a_key_naming_the_alias_allows_it() -> None:
    assert key_allows_alias(("talk",), TALK)
    assert key_allows_alias(("other", "talk"), TALK)


@pytest.mark.parametrize(
    "key_models",
    [
        ("openai/gpt-realtime", "gemini/*", "chat/gpt-4o-mini"),
        ("openai/*", "gemini/*", "chat/*"),
        ("gpt-realtime", "gemini/*", "gpt-4o-mini"),  # bare model names
        ("gpt-realtime", "gemini/*", "chat/*", "unrelated"),
    ],
)
def test_a_key_allowing_every_target_allows_the_alias(key_models: tuple[str, ...]) -> None:
    assert key_allows_alias(key_models, TALK)


@pytest.mark.parametrize(
    "key_models",
    [
        (),
        ("openai/gpt-realtime", "chat/gpt-4o-mini"),  # not gemini's default
        ("openai/*", "gemini/*"),  # not chat's
        ("gpt-realtime", "gpt-4o-mini"),  # a bare name cannot allow a provider's default
        ("openai/gpt-realtime", "gemini/*", "chat/gpt-4o"),  # another model of chat
        ("openai/gpt-realtime", "gemini/*", "openai/gpt-4o-mini"),  # another provider's
        ("Talk",),  # alias names are exact
        ("talk/*",),
    ],
)
def test_one_target_not_allowed_refuses_the_alias(key_models: tuple[str, ...]) -> None:
    assert not key_allows_alias(key_models, TALK)


# -- first_target ------------------------------------------------------------------------------

WEIGHTED = Alias(
    "w",
    (
        Target("openai", "gpt-realtime", weight=1.0),
        Target("gemini", "gemini-live", "Puck", weight=1.0),
        Target("chat", "gpt-4o-mini"),
    ),
)


def test_the_first_target_is_the_first_of_the_sessions_order() -> None:
    for sid in IDS:
        assert first_target(WEIGHTED, sid, None, None) == WEIGHTED.order(sid)[0]
    assert {first_target(WEIGHTED, sid, None, None).provider for sid in IDS} == {
        "openai",
        "gemini",
    }


@pytest.mark.parametrize("provider", ["openai", "gemini", "chat"])
def test_a_provider_asked_for_is_the_first_target(provider: str) -> None:
    for sid in IDS[:50]:
        assert first_target(WEIGHTED, sid, provider, None).provider == provider


def test_a_provider_with_several_targets_starts_on_its_first_in_the_sessions_order() -> None:
    two = Alias(
        "two",
        (
            Target("openai", "a", weight=1.0),
            Target("gemini", "g"),
            Target("openai", "b", weight=1.0),
        ),
    )
    for sid in IDS:
        expected = next(t for t in two.order(sid) if t.provider == "openai")
        assert first_target(two, sid, "openai", None) == expected
    assert {first_target(two, sid, "openai", None).model for sid in IDS} == {"a", "b"}


def test_the_clients_voice_is_used_when_the_target_sets_none() -> None:
    target = first_target(WEIGHTED, "s", "openai", "marin")
    assert target == Target("openai", "gpt-realtime", "marin", 1.0)
    assert target.key == "openai/gpt-realtime"


def test_the_targets_voice_wins_over_the_clients() -> None:
    assert first_target(WEIGHTED, "s", "gemini", "marin") == WEIGHTED.targets[1]
    assert first_target(WEIGHTED, "s", "gemini", "marin").voice == "Puck"


def test_no_voice_from_either_is_none() -> None:
    assert first_target(WEIGHTED, "s", "chat", None) is WEIGHTED.targets[2]


# -- route_of and Route.after ------------------------------------------------------------------

T1, T2, T3, T4 = (Target("openai", "a"), Target("gemini"), Target("chat", "c"), Target("local"))
ROUTE = Route("r", (T1, T2, T3, T4))


def test_without_an_alias_the_route_is_the_one_target() -> None:
    route = route_of(None, session_id="s", current=T2)
    assert route == Route(None, (T2,))
    assert not route.fails_over


def test_the_current_target_goes_first_then_the_aliases_order() -> None:
    alias = Alias("x", (T1, T2, T3))
    assert route_of(alias, session_id="s", current=T2) == Route("x", (T2, T1, T3))
    assert route_of(alias, session_id="s", current=T1) == Route("x", (T1, T2, T3))
    assert route_of(alias, session_id="s", current=T1).fails_over


def test_the_current_target_is_matched_by_key_whatever_its_voice() -> None:
    alias = Alias("x", (T1, T2, T3))
    current = Target("gemini", None, "Puck")
    assert route_of(alias, session_id="s", current=current) == Route("x", (current, T1, T3))


def test_a_current_target_outside_the_alias_is_added_in_front() -> None:
    alias = Alias("x", (T1, T3))
    assert route_of(alias, session_id="s", current=T4) == Route("x", (T4, T1, T3))


def test_the_rest_follow_the_sessions_spread() -> None:
    alias = Alias("x", (Target("openai", "a", weight=1.0), Target("gemini", weight=1.0), T3))
    for sid in IDS[:100]:
        route = route_of(alias, session_id=sid, current=T3)
        assert route.targets == (T3, *alias.order(sid)[:2])


def test_a_single_target_alias_does_not_fail_over() -> None:
    assert not route_of(Alias("x", (T1,)), session_id="s", current=T1).fails_over


def test_after_a_target_come_those_after_it_then_those_before() -> None:
    assert ROUTE.after(T1) == (T2, T3, T4)
    assert ROUTE.after(T2) == (T3, T4, T1)
    assert ROUTE.after(T3) == (T4, T1, T2)
    assert ROUTE.after(T4) == (T1, T2, T3)


def test_after_matches_the_target_by_key() -> None:
    assert ROUTE.after(Target("gemini", None, "Puck", 2.0)) == (T3, T4, T1)


def test_after_an_unknown_target_comes_the_whole_route() -> None:
    assert ROUTE.after(Target("openai", "other")) == ROUTE.targets
    assert ROUTE.after(Target("openai")) == ROUTE.targets


def test_after_the_only_target_comes_nothing() -> None:
    assert Route(None, (T1,)).after(T1) == ()
