"""The native edge: ``/v1/session``, the gateway's own protocol (``gateway.protocol``).

- ``routes``: ``NativeRoutes``, the session socket's handler: admission, the upgrade, waiting
  for ``session.start`` (or a resume), then reading the client's events and audio into the
  session while its ``Outbound`` writes the session's events back, each encoded once.

The socket itself is ``gateway.edges.socket``, shared with the realtime edge.
"""
