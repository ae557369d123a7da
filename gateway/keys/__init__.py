"""API keys issued by the gateway: secrets (``material``) and the records kept of keys, teams
and users' limits (``records``)."""

from gateway.keys.material import hint_of, looks_like_key, new_key_id, new_secret, secret_hash
from gateway.keys.records import ApiKey, KeyInputError, Team, UserLimits

__all__ = [
    "ApiKey",
    "KeyInputError",
    "Team",
    "UserLimits",
    "hint_of",
    "looks_like_key",
    "new_key_id",
    "new_secret",
    "secret_hash",
]
