"""Ephemeral keys (``gateway.security.ephemeral_keys``), without an event loop: a key reads back
as what was minted (its minter, its session config, its expiry), on any gateway with the same
secret; it expires; one changed byte, another secret, or another kind of token is refused
with a message that never holds the key; it shows nothing of its minter; a config too large
for a header is refused at minting."""

from __future__ import annotations

import base64
import json
import random

import pytest

from gateway.security import TokenRefused
from gateway.security.ephemeral_keys import (
    MAX_KEY_CHARS,
    EphemeralKeys,
    KeyTooLarge,
    Minter,
    looks_ephemeral,
)

SECRET = "unit-secret-0123456789abcdef0123456789"
NOW = 1_800_000_000.0
SESSION = {"type": "realtime", "model": "local", "instructions": "Be brief."}


@pytest.mark.parametrize(
    "minter",
    [
        Minter("key", key_id="k_0123456789ab"),
        Minter("user", user_id="alice", roles=("caregiver",), tenant="team-a"),
        Minter("anonymous"),
    ],
)
def test_a_key_reads_back_as_minted_on_any_gateway_with_the_secret(minter: Minter) -> None:
    value, expires_at = EphemeralKeys(SECRET).mint(minter, SESSION, now=NOW, ttl_s=600)
    assert looks_ephemeral(value)
    assert expires_at == int(NOW) + 600
    grant = EphemeralKeys(SECRET).read(value, now=NOW + 599)  # another node, same secret
    assert (grant.minter, grant.session, grant.expires_at) == (minter, SESSION, expires_at)


def test_each_key_is_new_and_shows_nothing_of_its_minter() -> None:
    keys = EphemeralKeys(SECRET)
    minter = Minter("user", user_id="alice-the-admin", roles=("admin",))
    first, _ = keys.mint(minter, SESSION, now=NOW, ttl_s=600)
    second, _ = keys.mint(minter, SESSION, now=NOW, ttl_s=600)
    assert first != second
    for value in (first, second):
        raw = base64.urlsafe_b64decode(value[3:] + "=" * (-len(value[3:]) % 4))
        for secret_word in (b"alice", b"admin", b"Be brief", b"realtime"):
            assert secret_word not in raw


def test_a_key_expires_and_a_jwt_s_expiry_bounds_it() -> None:
    keys = EphemeralKeys(SECRET)
    value, expires_at = keys.mint(Minter("anonymous"), SESSION, now=NOW, ttl_s=10)
    with pytest.raises(TokenRefused, match="has expired"):
        keys.read(value, now=expires_at)
    _, bounded = keys.mint(
        Minter("user", user_id="bob"), SESSION, now=NOW, ttl_s=7200, not_after=NOW + 60
    )
    assert bounded == int(NOW) + 60


@pytest.mark.parametrize("ttl_s", [9, 7201, 0, -5])
def test_a_lifetime_out_of_openai_s_range_is_refused(ttl_s: float) -> None:
    with pytest.raises(ValueError, match="10 to 7200"):
        EphemeralKeys(SECRET).mint(Minter("anonymous"), SESSION, now=NOW, ttl_s=ttl_s)


def test_a_changed_forged_or_foreign_key_is_refused_without_showing_it() -> None:
    keys = EphemeralKeys(SECRET)
    value, _ = keys.mint(Minter("key", key_id="k_1"), SESSION, now=NOW, ttl_s=600)
    flipped = value[:-3] + ("A" if value[-3] != "A" else "B") + value[-2:]
    cases = [
        flipped,
        value[:40],
        "ek_" + "A" * 200,
        "ek_not*base64!",
        "ek_",
        EphemeralKeys(SECRET + "x").mint(Minter("anonymous"), SESSION, now=NOW, ttl_s=600)[0],
        "ek_" + "A" * MAX_KEY_CHARS,
    ]
    for bad in cases:
        with pytest.raises(TokenRefused) as refused:
            keys.read(bad, now=NOW)
        assert str(refused.value) == "invalid ephemeral key"
        assert bad not in str(refused.value)
    for other in ("gk_" + "a" * 43, "eyJhbGciOiJIUzI1NiJ9.e30.x", "", None):
        with pytest.raises(TokenRefused, match="not an ephemeral key"):
            keys.read(other, now=NOW)


def test_a_config_too_large_for_a_header_is_refused_at_minting() -> None:
    # Random-looking text does not compress: a schema this size cannot ride in a header.
    noise = base64.b64encode(random.Random(35).randbytes(6000)).decode()
    big = {**SESSION, "instructions": noise}
    with pytest.raises(KeyTooLarge) as large:
        EphemeralKeys(SECRET).mint(Minter("anonymous"), big, now=NOW, ttl_s=600)
    assert large.value.chars > MAX_KEY_CHARS
    assert f"at most {MAX_KEY_CHARS}" in str(large.value)
    # Tools of an ordinary size fit: JSON schemas compress well.
    tools = [
        {
            "type": "function",
            "name": f"tool_{n}",
            "description": "Looks something up for the user, by name and date.",
            "parameters": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "date": {"type": "string"}},
                "required": ["name"],
            },
        }
        for n in range(20)
    ]
    value, _ = EphemeralKeys(SECRET).mint(
        Minter("anonymous"), {**SESSION, "tools": tools}, now=NOW, ttl_s=600
    )
    assert len(value) < MAX_KEY_CHARS
    assert json.dumps(tools) == json.dumps(
        EphemeralKeys(SECRET).read(value, now=NOW).session["tools"]
    )
