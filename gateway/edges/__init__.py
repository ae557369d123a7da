"""The client edges: how a client reaches a session, one package per protocol.

- ``native``: ``/v1/session``, the gateway's own protocol (``gateway.protocol``);
- ``realtime``: ``/v1/realtime``, OpenAI's Realtime GA protocol, so OpenAI's SDKs work as they are;
- ``twilio``: Twilio Media Streams, a phone call made into a voice session.

Each edge turns its protocol into the session's typed client events and hands the session a
``ClientOutput`` (``gateway/session/client_output.py``) through which it receives the session's
typed events back. ``socket`` is the gateway's own server side of a WebSocket, shared by
``native`` and ``realtime``. The edges never import each other; the server wires them in, and
nothing below them (the session, the providers) knows they exist.
"""
