"""Ephemeral keys (``ek_…``) for OpenAI's WebRTC interface: ``POST /v1/realtime/client_secrets``
mints one from the caller's own credential (a gateway key or a JWT), and a browser presents it
to ``POST /v1/realtime/calls`` instead of that credential. Pure: no I/O, and times are passed in.

The design: a sealed, stateless token, not a record in the store::

    ek_<base64url( nonce(12) ‖ AES-256-GCM( zlib( JSON claims ) ) )>

The claims say who minted it (``Minter``: a gateway key by its id; a JWT's user with the
token's roles and team; or the anonymous user of a gateway with auth off), until when it may
be used, and the session config it was minted for (the ``session`` object as the client gave
it, already checked). The AES key is derived from ``GATEWAY_AUTH_SECRET`` (HMAC-SHA256 over a
domain label), so:

- every node reads every key, with Redis or without, with no round trip and no record to
  share or expire, and a restart keeps them; the gateway already trusts that secret with its
  JWTs and stream tokens;
- it is sealed, not merely signed: GCM's tag refuses any changed byte, and the page holding a
  key learns nothing of its minter (a key's id, a user's roles) from it. It is not a
  credential by itself: at each use ``gateway.admission`` looks its minter up again (a key's
  record: a revoked or expired key refuses its ephemeral keys on every node at once; the
  budgets of key, user and team are read then), so using it is being its minter;
- it may open several calls until it expires, as OpenAI's may, and cannot be revoked by
  itself: its lifetime (10 s to 2 h, 10 min by default) bounds it, and one minted from a JWT
  expires with that JWT at the latest.

The price is size: the config rides in the key, which travels in an ``Authorization`` header
(8 KiB a header line on aiohttp and nginx by default), so a key is at most ``MAX_KEY_CHARS``;
``mint`` raises ``KeyTooLarge`` above (large tool schemas), and the caller says so: such
tools may come in the call's own ``session`` part or a ``session.update`` instead. Nothing here
logs, and a refusal's message never contains the key.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import math
import secrets
import zlib
from dataclasses import dataclass
from typing import Any, Literal

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from gateway.security.tokens import TokenRefused

__all__ = [
    "DEFAULT_TTL_S",
    "KEY_PREFIX",
    "MAX_KEY_CHARS",
    "MAX_TTL_S",
    "MIN_TTL_S",
    "EphemeralGrant",
    "EphemeralKeys",
    "KeyTooLarge",
    "Minter",
    "looks_ephemeral",
]

KEY_PREFIX = "ek_"
MIN_TTL_S = 10
DEFAULT_TTL_S = 600
MAX_TTL_S = 7200  # OpenAI's limits for a client secret
MAX_KEY_CHARS = 6144
_DOMAIN = b"realtime-gateway/ephemeral-key/v1"
_AAD = b"ek1"
_NONCE_BYTES = 12
_VERSION = 1

MinterKind = Literal["key", "user", "anonymous"]


@dataclass(frozen=True, slots=True)
class Minter:
    """Whom an ephemeral key speaks for: a gateway key (``key_id``; its owner, roles and
    budgets are read at each use), a JWT's user (``user_id``, ``roles``, ``tenant`` as the
    token said), or the anonymous user of a gateway without auth."""

    kind: MinterKind
    key_id: str | None = None
    user_id: str | None = None
    roles: tuple[str, ...] = ()
    tenant: str | None = None

    def as_json(self) -> dict[str, Any]:
        if self.kind == "key":
            return {"kind": "key", "key": self.key_id}
        if self.kind == "user":
            return {
                "kind": "user",
                "sub": self.user_id,
                "roles": list(self.roles),
                "team": self.tenant,
            }
        return {"kind": "anonymous"}

    @staticmethod
    def from_json(value: Any) -> Minter:
        """ValueError when ``value`` is not what ``as_json`` writes."""
        if not isinstance(value, dict):
            raise ValueError("minter")
        kind = value.get("kind")
        if kind == "key" and isinstance(value.get("key"), str):
            return Minter("key", key_id=value["key"])
        if kind == "user" and isinstance(value.get("sub"), str):
            roles = value.get("roles")
            team = value.get("team")
            if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
                raise ValueError("roles")
            if team is not None and not isinstance(team, str):
                raise ValueError("team")
            return Minter("user", user_id=value["sub"], roles=tuple(roles), tenant=team)
        if kind == "anonymous":
            return Minter("anonymous")
        raise ValueError("minter")


@dataclass(frozen=True, slots=True)
class EphemeralGrant:
    """A key read back: its minter, the session config it was minted for, its expiry."""

    minter: Minter
    session: dict[str, Any]
    expires_at: int  # Unix seconds


class KeyTooLarge(ValueError):
    """The session config does not fit in a key of ``MAX_KEY_CHARS``."""

    def __init__(self, chars: int) -> None:
        super().__init__(f"{chars} characters once encoded, at most {MAX_KEY_CHARS}")
        self.chars = chars


def looks_ephemeral(token: str | None) -> bool:
    """A credential meant as an ephemeral key (read before anything is looked up)."""
    return token is not None and token.startswith(KEY_PREFIX)


class EphemeralKeys:
    def __init__(self, secret: str | bytes) -> None:
        raw = secret.encode() if isinstance(secret, str) else secret
        self._aead = AESGCM(hmac.new(raw, _DOMAIN, hashlib.sha256).digest())

    def mint(
        self,
        minter: Minter,
        session: dict[str, Any],
        *,
        now: float,
        ttl_s: float,
        not_after: float | None = None,
    ) -> tuple[str, int]:
        """A key for ``session`` (already checked), valid ``ttl_s`` from ``now`` and at most
        until ``not_after`` (a JWT's expiry): ``(value, expires_at)``. ``KeyTooLarge`` when the
        config makes it too long; ValueError for a lifetime out of range."""
        if not MIN_TTL_S <= ttl_s <= MAX_TTL_S:
            raise ValueError(f"a lifetime must be {MIN_TTL_S} to {MAX_TTL_S} s")
        expires = math.floor(now + ttl_s)
        if not_after is not None:
            expires = min(expires, math.floor(not_after))
        claims = {
            "v": _VERSION,
            "iat": math.floor(now),
            "exp": expires,
            "by": minter.as_json(),
            "session": session,
        }
        nonce = secrets.token_bytes(_NONCE_BYTES)
        sealed = self._aead.encrypt(nonce, zlib.compress(orjson.dumps(claims), 9), _AAD)
        value = KEY_PREFIX + base64.urlsafe_b64encode(nonce + sealed).rstrip(b"=").decode()
        if len(value) > MAX_KEY_CHARS:
            raise KeyTooLarge(len(value))
        return value, expires

    def read(self, value: str | None, *, now: float) -> EphemeralGrant:
        """The grant of a key this gateway minted; ``TokenRefused`` (its message safe to show,
        never the key) when it is not one, was changed, or has expired."""
        if not looks_ephemeral(value):
            raise TokenRefused("this is not an ephemeral key")
        assert value is not None
        if len(value) > MAX_KEY_CHARS:
            raise TokenRefused("invalid ephemeral key")
        body = value[len(KEY_PREFIX) :]
        try:
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
            opened = self._aead.decrypt(raw[:_NONCE_BYTES], raw[_NONCE_BYTES:], _AAD)
            # Only what this gateway sealed gets past the tag: nothing else is decompressed.
            claims = orjson.loads(zlib.decompress(opened))
        except (binascii.Error, ValueError, InvalidTag, zlib.error):
            # Another gateway's key, a changed one, a forged one: all look alike.
            raise TokenRefused("invalid ephemeral key") from None
        try:
            grant = _grant(claims)
        except ValueError:
            raise TokenRefused("invalid ephemeral key") from None
        if now >= grant.expires_at:
            raise TokenRefused("this ephemeral key has expired; mint a new one")
        return grant


def _grant(claims: Any) -> EphemeralGrant:
    if not isinstance(claims, dict) or claims.get("v") != _VERSION:
        raise ValueError("version")
    expires = claims.get("exp")
    session = claims.get("session")
    if isinstance(expires, bool) or not isinstance(expires, int) or not isinstance(session, dict):
        raise ValueError("claims")
    return EphemeralGrant(Minter.from_json(claims.get("by")), session, expires)
