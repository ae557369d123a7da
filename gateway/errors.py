"""The gateway's one error tree.

    GatewayError                      base of everything the gateway raises on purpose
    ├── ConfigError                   bad or inconsistent settings (start-up)
    ├── RegistryError                 the tool registry artifact cannot be used
    │   ├── RegistryMissingError      no artifact at the configured path
    │   ├── RegistryStaleError        a tool's files changed since the artifact was built
    │   └── RegistryInvalidError      the artifact or a handler does not load
    ├── ProtocolError                 a problem to tell the client in an ``error`` event
    │                                 (gateway.protocol: code, message, event_id, retryable, fatal)
    ├── ClientError                   the client did something illegal before a session exists
    │   ├── HandshakeRefused          not a WebSocket upgrade we accept (gateway.edges.socket)
    │   ├── AuthError                 a credential that cannot be used here
    │   │   ├── TokenRefused          a JWT (gateway.security.tokens)
    │   │   └── KeyRefused            a gateway key (gateway.governance.credentials)
    │   ├── BudgetInputError          limits that cannot be held, naming the field (also a
    │   │   │                         ValueError; gateway.budgets.limits)
    │   │   └── KeyInputError         admin input (gateway.keys.records; NotFound: no such
    │   │                             key, team or user)
    │   └── StartRefused              ``session.start`` or a resume cannot be honoured
    │                                 (gateway.session.refusals)
    ├── ArgumentError                 the model's tool arguments are unusable, also a ValueError
    │                                 (gateway.toolrun.arguments; the model gets VALIDATION)
    └── SessionStateError             a transition not in the session state table (a bug)

The layers below the gateway cannot import it, so each has a root of its own, which the
gateway translates at its boundary and never lets through:

    transports.base.TransportError    anything an upstream transport raises (``retryable``,
                                      ``code``): the gateway answers ``upstream_unavailable``
                                      or ends the session ``upstream_failed``
    rfc6455.frames.WebSocketError     the WebSocket's handshake, framing and close errors: a
                                      transport turns them into ``TransportError``, the client
                                      socket into a close code
    tools._core.ToolError             what a tool handler raises on purpose (``type``): the
                                      model gets that error type; any other exception from a
                                      handler becomes INTERNAL, without its text

Client faults and upstream faults are separate trees, so the server maps them to protocol
error codes without inspecting messages; third-party exceptions are translated at the boundary.
"""

from __future__ import annotations

__all__ = [
    "AuthError",
    "ClientError",
    "ConfigError",
    "GatewayError",
    "RegistryError",
    "RegistryInvalidError",
    "RegistryMissingError",
    "RegistryStaleError",
    "SessionStateError",
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


class SessionStateError(GatewayError):
    pass
