"""Gateway keys (gateway.keys): a secret is recognisable, random and kept only as a hash; admin
input is checked whole, each problem named by its field; a key's status follows revocation
and expiry."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.keys import ApiKey, KeyInputError, hint_of, looks_like_key, new_secret, secret_hash
from gateway.keys.material import well_formed
from gateway.keys.records import key_changes, new_key_fields

NOW = 1_800_000_000.0
TEAMS = {"support"}
TOOLS = {"kb_search", "calendar_create_event"}


def test_a_secret_is_prefixed_random_and_stored_only_as_its_hash() -> None:
    secrets = {new_secret() for _ in range(200)}
    assert len(secrets) == 200
    for secret in secrets:
        assert secret.startswith("gk_")
        assert len(secret) == 46
        assert well_formed(secret)
        assert looks_like_key(secret)
        assert secret_hash(secret) != secret
        assert len(secret_hash(secret)) == 64
        assert hint_of(secret).startswith(secret[:7])
        assert secret[7:-4] not in hint_of(secret)
    assert not looks_like_key("eyJhbGciOi.x.y")
    assert not looks_like_key(None)
    assert not well_formed("gk_short")
    assert not well_formed("gk_" + "!" * 43)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "owner: required"),
        ({"owner": ""}, "owner: the user id"),
        ({"owner": "a", "colour": 1}, "unknown fields ['colour']"),
        ({"owner": "a", "team": "sales"}, "team: no team 'sales'; create it first"),
        ({"owner": "a", "tools": ["kb_search", "nope"]}, "tools: not in the registry: ['nope']"),
        ({"owner": "a", "roles": "admin"}, "roles: expected a list"),
        ({"owner": "a", "roles": ["a b"]}, "roles: each entry"),
        ({"owner": "a", "expires_at": "2020-01-01T00:00:00Z"}, "expires_at: must be in the future"),
        ({"owner": "a", "expires_at": "2030-01-01T00:00:00"}, "expires_at: give the timezone"),
        ({"owner": "a", "expires_at": "soon"}, "expires_at: an ISO 8601 time"),
        ({"owner": "a", "budgets": {"spend_per_day": -2}}, "budgets.spend_per_day: must be"),
        ({"owner": "a", "budgets": {"spend_per_day": "lots"}}, "budgets.spend_per_day: expected"),
        ({"owner": "a", "budgets": {"tokens_per_day": 1e20}}, "budgets.tokens_per_day: at most"),
        ([], "body: expected a JSON object"),
    ],
)
def test_bad_admin_input_is_refused_naming_the_field(body: Any, message: str) -> None:
    with pytest.raises(KeyInputError) as refused:
        new_key_fields(body, teams=TEAMS, tools=TOOLS, now=NOW)
    assert message in str(refused.value)


def test_a_key_made_and_changed_from_admin_input() -> None:
    fields = new_key_fields(
        {
            "owner": "alice",
            "team": "support",
            "roles": ["agent", "agent"],
            "models": ["gpt-realtime"],
            "tools": ["kb_search"],
            "expires_at": "2027-06-01T00:00:00Z",
            "budgets": {"spend_per_day": 1.5, "concurrent_sessions": 2},
        },
        teams=TEAMS,
        tools=TOOLS,
        now=NOW,
    )
    key = ApiKey(key_id="k_1", secret_hash="h", hint="gk_…", created_at=NOW, **fields)
    assert key.roles == ("agent",)
    assert key.models == ("gpt-realtime",)
    assert key.limits.spend_per_day == 1.5
    assert key.status(NOW) == "active"
    assert key.status(key.expires_at or 0) == "expired"
    changed = key_changes(
        key,
        {"budgets": {"tokens_per_day": 1000, "spend_per_day": None}, "team": None},
        teams=TEAMS,
        tools=TOOLS,
        now=NOW,
    )
    assert changed.limits.tokens_per_day == 1000
    assert changed.limits.spend_per_day is None
    assert changed.limits.concurrent_sessions == 2
    assert changed.team is None
    with pytest.raises(KeyInputError, match="unknown fields"):
        key_changes(key, {"owner": "bob"}, teams=TEAMS, tools=TOOLS, now=NOW)
    shown = key.as_json(NOW)
    assert "secret_hash" not in shown
    assert "h" not in shown.values()
    assert ApiKey.from_record(key.to_record()) == key
