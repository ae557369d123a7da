"""The gateway's JWTs: every claim rule of gateway.security.tokens, against a fixed time."""

from __future__ import annotations

from typing import Any

import jwt
import pytest

from gateway.security import TokenAuthority, TokenRefused

SECRET = "unit-test-secret-0123456789abcdef0123"
NOW = 1_800_000_000.0
DAY = 86400.0


@pytest.fixture
def authority() -> TokenAuthority:
    return TokenAuthority(SECRET, max_lifetime_s=DAY)


def sign(**claims: Any) -> str:
    return jwt.encode(claims, SECRET, "HS256")


def refused(call: Any, match: str) -> None:
    with pytest.raises(TokenRefused, match=match):
        call()


def test_a_good_user_token(authority: TokenAuthority) -> None:
    token = sign(sub="alice", exp=NOW + 60, roles=["admin"], tenant="t1")
    user = authority.verify_user(token, NOW)
    assert (user.subject, user.roles, user.tenant) == ("alice", ("admin",), "t1")


@pytest.mark.parametrize("sub", ["", "   ", None, 42, "x" * 257])
def test_the_subject_must_name_someone(authority: TokenAuthority, sub: object) -> None:
    claims: dict[str, Any] = {"exp": NOW + 60}
    if sub is not None:
        claims["sub"] = sub
    with pytest.raises(TokenRefused):
        authority.verify_user(jwt.encode(claims, SECRET, "HS256"), NOW)


def test_a_century_is_too_long(authority: TokenAuthority) -> None:
    century = sign(sub="alice", exp=NOW + 100 * 365 * DAY)
    refused(lambda: authority.verify_user(century, NOW), "lifetime exceeds")
    issued_long_ago = sign(sub="alice", iat=NOW - 2 * DAY, exp=NOW + 60)
    refused(lambda: authority.verify_user(issued_long_ago, NOW), "lifetime exceeds")
    assert authority.verify_user(sign(sub="alice", iat=NOW, exp=NOW + DAY), NOW)


def test_time_claims(authority: TokenAuthority) -> None:
    refused(lambda: authority.verify_user(sign(sub="a", exp=NOW - 60), NOW), "expired")
    refused(lambda: authority.verify_user(sign(sub="a"), NOW), "'exp' is required")
    refused(lambda: authority.verify_user(sign(sub="a", exp="soon"), NOW), "not a time")
    refused(lambda: authority.verify_user(sign(sub="a", exp=True), NOW), "not a time")
    future = sign(sub="a", iat=NOW + 3600, exp=NOW + 7200)
    refused(lambda: authority.verify_user(future, NOW), "issued in the future")
    early = sign(sub="a", nbf=NOW + 3600, exp=NOW + 7200)
    refused(lambda: authority.verify_user(early, NOW), "not valid yet")
    # Within the clock-skew leeway both ways.
    assert authority.verify_user(sign(sub="a", exp=NOW - 3), NOW)


def test_signature_and_algorithm(authority: TokenAuthority) -> None:
    other = jwt.encode(
        {"sub": "a", "exp": NOW + 60}, "another-secret-0123456789abcdef-xyz", "HS256"
    )
    refused(lambda: authority.verify_user(other, NOW), "invalid token")
    unsigned = jwt.encode({"sub": "a", "exp": NOW + 60}, None, "none")
    refused(lambda: authority.verify_user(unsigned, NOW), "invalid token")
    refused(lambda: authority.verify_user("not.a.jwt", NOW), "invalid token")
    refused(lambda: authority.verify_user(None, NOW), "missing")


def test_malformed_roles_and_tenant_grant_nothing(authority: TokenAuthority) -> None:
    user = authority.verify_user(sign(sub="a", exp=NOW + 60, roles="admin", tenant=7), NOW)
    assert user.roles == ()
    assert user.tenant is None


def test_minting_respects_the_maximum(authority: TokenAuthority) -> None:
    token = authority.mint_user("alice", now=NOW, ttl_s=3600, roles=("r",), tenant="t")
    assert authority.verify_user(token, NOW).roles == ("r",)
    with pytest.raises(ValueError, match="exceeds"):
        authority.mint_user("alice", now=NOW, ttl_s=2 * DAY)
    with pytest.raises(ValueError, match="subject"):
        authority.mint_user(" ", now=NOW, ttl_s=60)
