"""Phone-stream tokens: one stream of one call, until they expire; short enough for Exotel's
256 characters of custom parameters and Plivo's and Vonage's 512-byte headers; never a JWT."""

from __future__ import annotations

import pytest

from gateway.security import TokenAuthority, TokenRefused
from gateway.security.stream_tokens import StreamTokens

SECRET = "s" * 32
NOW = 1_800_000_000.0


@pytest.fixture
def tokens() -> StreamTokens:
    return StreamTokens(SECRET, max_lifetime_s=3600)


def refused(call: object, match: str) -> None:
    with pytest.raises(TokenRefused, match=match):
        call()  # type: ignore[operator]


def test_a_token_opens_a_stream_of_its_own_call_until_it_expires(tokens: StreamTokens) -> None:
    token = tokens.mint("CA1", now=NOW, ttl_s=120)
    grant = tokens.verify(token, NOW + 119, call_id="CA1")
    assert grant.expires_at == NOW + 120
    assert len(grant.token_id) == 16
    refused(lambda: tokens.verify(token, NOW, call_id="CA2"), "not made for this call")
    refused(lambda: tokens.verify(token, NOW + 120, call_id="CA1"), "expired")


def test_tokens_are_short_and_plain(tokens: StreamTokens) -> None:
    token = tokens.mint("v3:" + "x" * 200, now=NOW, ttl_s=120)
    assert len(token) <= 76
    assert set(token) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")


def test_each_token_has_its_own_id(tokens: StreamTokens) -> None:
    first, second = (tokens.mint("CA1", now=NOW, ttl_s=60) for _ in range(2))
    assert first != second
    ids = {tokens.verify(t, NOW, call_id="CA1").token_id for t in (first, second)}
    assert len(ids) == 2


def test_a_forged_or_altered_token_is_refused(tokens: StreamTokens) -> None:
    token = tokens.mint("CA1", now=NOW, ttl_s=120)
    token_id, expiry, mac = token.split(".")
    later = f"{token_id}.{int(expiry) + 3600}.{mac}"  # its life stretched
    refused(lambda: tokens.verify(later, NOW, call_id="CA1"), "not made for this call")
    other_key = StreamTokens("t" * 32, max_lifetime_s=3600).mint("CA1", now=NOW, ttl_s=120)
    refused(lambda: tokens.verify(other_key, NOW, call_id="CA1"), "not made for this call")
    for junk in ("", None, "a.b.c", token + "x", token.replace(".", "-")):
        refused(lambda junk=junk: tokens.verify(junk, NOW, call_id="CA1"), "token")


def test_the_lifetime_is_capped(tokens: StreamTokens) -> None:
    token = tokens.mint("CA1", now=NOW, ttl_s=10 * 86400)
    assert tokens.verify(token, NOW, call_id="CA1").expires_at == NOW + 3600


def test_user_tokens_and_stream_tokens_never_stand_for_each_other(tokens: StreamTokens) -> None:
    users = TokenAuthority(SECRET, max_lifetime_s=3600)
    user = users.mint_user("CA1", now=NOW, ttl_s=60)
    refused(lambda: tokens.verify(user, NOW, call_id="CA1"), "not a phone-stream token")
    stream = tokens.mint("CA1", now=NOW, ttl_s=60)
    refused(lambda: users.verify_user(stream, NOW), "invalid token")
