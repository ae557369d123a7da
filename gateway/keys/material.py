"""Key secrets: made here, shown once, kept only as a hash. Pure.

A secret is ``gk_`` and 43 base62 characters (32 random bytes): the prefix lets a person, a
secret scanner and the gateway itself tell it from a JWT. It has 256 bits of entropy, so a
plain SHA-256 of it is what is stored and looked up (a slow password hash adds nothing against
guessing a random 256-bit value). The hint (``gk_Ab3x…9fQz``) is what lists show.
"""

from __future__ import annotations

import hashlib
import re
import secrets

__all__ = [
    "KEY_PREFIX",
    "hint_of",
    "looks_like_key",
    "new_key_id",
    "new_secret",
    "secret_hash",
    "well_formed",
]

KEY_PREFIX = "gk_"
_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_BODY_CHARS = 43  # 62**43 > 2**256
_SHAPE = re.compile(rf"^{KEY_PREFIX}[0-9A-Za-z]{{{_BODY_CHARS}}}$")


def new_secret() -> str:
    number = int.from_bytes(secrets.token_bytes(32), "big")
    chars = []
    for _ in range(_BODY_CHARS):
        number, digit = divmod(number, 62)
        chars.append(_ALPHABET[digit])
    return KEY_PREFIX + "".join(chars)


def new_key_id() -> str:
    """The key's public name (in lists, logs and the audit trail; never a credential)."""
    return "k_" + secrets.token_hex(6)


def looks_like_key(token: str | None) -> bool:
    """A credential that is meant as one of our keys (checked before any lookup)."""
    return token is not None and token.startswith(KEY_PREFIX)


def well_formed(token: str) -> bool:
    return _SHAPE.fullmatch(token) is not None


def secret_hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def hint_of(secret: str) -> str:
    return f"{secret[:7]}…{secret[-4:]}"
