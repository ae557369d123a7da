"""The gateway's user JWTs (HS256 with ``GATEWAY_AUTH_SECRET``).

PyJWT checks the signature and the algorithm; every claim is checked here, against a time the
caller passes in, so the rules are plain unit tests:

    claim   user token
    sub     non-empty string
    exp     required, in the future
    iat     optional, not in the future
    nbf     optional, passed
    aud     absent (a token for another audience is not a user token)

``exp`` minus ``iat`` (or minus now, without ``iat``) may not exceed the maximum lifetime
(``GATEWAY_TOKEN_MAX_LIFETIME_S``): a leaked token cannot be good for a century. Phone-stream
tokens are not JWTs (``gateway.security.stream_tokens``): neither kind opens what the other does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import jwt

from gateway.errors import AuthError

__all__ = ["TokenAuthority", "TokenRefused", "VerifiedToken"]

ALGORITHM = "HS256"
# Clock skew tolerated between the token's issuer and this gateway.
LEEWAY_S = 5.0
MAX_SUBJECT_CHARS = 256

_SIGNATURE_ONLY: jwt.types.Options = {
    "verify_signature": True,
    "verify_exp": False,
    "verify_nbf": False,
    "verify_iat": False,
    "verify_aud": False,
    "verify_iss": False,
    "verify_sub": False,
    "verify_jti": False,
}


class TokenRefused(AuthError):
    """The token cannot be used here; the message is safe to show the client."""


@dataclass(frozen=True, slots=True)
class VerifiedToken:
    subject: str
    roles: tuple[str, ...]
    tenant: str | None
    expires_at: float


def _number(claims: dict[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise TokenRefused(f"invalid token: '{name}' is not a time")
    return float(value)


class TokenAuthority:
    def __init__(self, secret: str, *, max_lifetime_s: float, leeway_s: float = LEEWAY_S) -> None:
        self._secret = secret
        self.max_lifetime_s = max_lifetime_s
        self._leeway = leeway_s

    # -- verifying ---------------------------------------------------------------------------

    def verify_user(self, token: str | None, now: float) -> VerifiedToken:
        claims = self._claims(token)
        if "aud" in claims:
            raise TokenRefused("this token is not a user token")
        return self._checked(claims, now)

    def _claims(self, token: str | None) -> dict[str, Any]:
        if not token:
            raise TokenRefused("missing bearer token")
        try:
            claims: dict[str, Any] = jwt.decode(
                token, self._secret, algorithms=[ALGORITHM], options=_SIGNATURE_ONLY
            )
        except jwt.PyJWTError:
            raise TokenRefused("invalid token") from None
        return claims

    def _checked(self, claims: dict[str, Any], now: float) -> VerifiedToken:
        sub = claims.get("sub")
        if not isinstance(sub, str) or not sub.strip():
            raise TokenRefused("invalid token: 'sub' must name the user")
        if len(sub) > MAX_SUBJECT_CHARS:
            raise TokenRefused(f"invalid token: 'sub' is longer than {MAX_SUBJECT_CHARS}")
        exp = _number(claims, "exp")
        if exp is None:
            raise TokenRefused("invalid token: 'exp' is required")
        if now >= exp + self._leeway:
            raise TokenRefused("token expired")
        nbf = _number(claims, "nbf")
        if nbf is not None and now + self._leeway < nbf:
            raise TokenRefused("token not valid yet")
        iat = _number(claims, "iat")
        if iat is not None and iat > now + self._leeway:
            raise TokenRefused("invalid token: issued in the future")
        issued = iat if iat is not None else now
        if exp - issued > self.max_lifetime_s + self._leeway:
            raise TokenRefused(
                f"token lifetime exceeds the maximum of {self.max_lifetime_s:g} s; "
                "mint a shorter one"
            )
        roles = claims.get("roles") or []
        if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
            roles = []
        tenant = claims.get("tenant") or claims.get("team")  # the team, for budgets
        return VerifiedToken(
            subject=sub,
            roles=tuple(roles),
            tenant=tenant if isinstance(tenant, str) and tenant else None,
            expires_at=exp,
        )

    # -- minting -----------------------------------------------------------------------------

    def mint_user(
        self,
        subject: str,
        *,
        now: float,
        ttl_s: float,
        roles: tuple[str, ...] = (),
        tenant: str | None = None,
    ) -> str:
        if not subject.strip():
            raise ValueError("a user token needs a non-empty subject")
        if ttl_s > self.max_lifetime_s:
            raise ValueError(
                f"a lifetime of {ttl_s:g} s exceeds GATEWAY_TOKEN_MAX_LIFETIME_S "
                f"({self.max_lifetime_s:g} s)"
            )
        claims: dict[str, Any] = {"sub": subject, "iat": int(now), "exp": int(now + ttl_s)}
        if roles:
            claims["roles"] = list(roles)
        if tenant:
            claims["tenant"] = tenant
        return jwt.encode(claims, self._secret, ALGORITHM)
