"""The gateway's one error tree.

    GatewayError                    base of everything the gateway raises on purpose
    ├── ConfigError                 bad or inconsistent settings (start-up)
    ├── RegistryError               the tool registry artifact cannot be used
    │   ├── RegistryMissingError    no artifact at the configured path
    │   ├── RegistryStaleError      a tool's files changed since the artifact was built
    │   └── RegistryInvalidError    the artifact or a handler does not load
    ├── ClientError                 the client did something illegal (protocol, auth, limits)
    │   ├── AuthError               missing, malformed, expired or badly signed token
    │   └── ForbiddenError          allowed user, forbidden action (origin, role, mode)
    ├── UpstreamError               the model provider failed; ``retryable`` says if a retry helps
    │   └── UpstreamUnavailableError  could not open the upstream session at all
    └── SessionStateError           a transition not in the session state table (a bug)

Client faults and upstream faults are separate branches so the server can map them to protocol
error codes without inspecting messages; third-party exceptions are translated at the boundary.
"""

from __future__ import annotations

__all__ = [
    "AuthError",
    "ClientError",
    "ConfigError",
    "ForbiddenError",
    "GatewayError",
    "RegistryError",
    "RegistryInvalidError",
    "RegistryMissingError",
    "RegistryStaleError",
    "SessionStateError",
    "UpstreamError",
    "UpstreamUnavailableError",
]


class GatewayError(Exception):
    """Base of the gateway's own errors."""


class ConfigError(GatewayError):
    pass


class RegistryError(GatewayError):
    pass


class RegistryMissingError(RegistryError):
    pass


class RegistryStaleError(RegistryError):
    pass


class RegistryInvalidError(RegistryError):
    pass


class ClientError(GatewayError):
    pass


class AuthError(ClientError):
    pass


class ForbiddenError(ClientError):
    pass


class UpstreamError(GatewayError):
    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class UpstreamUnavailableError(UpstreamError):
    pass


class SessionStateError(GatewayError):
    pass
