"""The phone edge: a Twilio Media Streams call made into a voice session.

- ``routes``: ``TwilioRoutes``, the two endpoints: ``POST /twilio/voice`` (the webhook that
  answers TwiML) and ``GET /twilio/media`` (the call's media socket);
- ``bridge``: ``TwilioBridge``, the session's client for one call: it moves bytes and keeps time;
- ``codec``: Twilio's inbound messages as a tagged union (``decode``); ``media``, ``mark`` and
  ``clear`` frames out;
- ``playback``: ``PlaybackTracker``, the outbound side as a state machine (20 ms frames, marks,
  played position from mark echoes, barge-in);
- ``signature``: ``X-Twilio-Signature`` validation and the ``<Connect><Stream>`` TwiML.

``codec``, ``playback`` and ``signature`` are pure (no I/O); G.711 µ-law is an audio codec like
any other (``gateway.audio.g711``). Nothing is imported here, so that a pure module is imported
without the endpoints.
"""
