"""WebSocket (RFC 6455), the project's own: ``frames`` (sans-I/O framing, both directions) and
``client`` (a client connection on an ``asyncio.Protocol``).

Used by the upstream transports (the OpenAI upstream's socket) and by the gateway's server side
of a client's socket (``gateway.edges.socket``). It imports nothing of the project, so both
layers can stand on it; its errors root at ``WebSocketError``.
"""
