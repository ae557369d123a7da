"""Vonage Voice API calls on the shared phone core: a thin, pure wire adapter.

- ``wire``: ``VonageCarrier`` (claims and decodes the Voice WebSocket: the text
  ``websocket:connected`` first, binary 16-bit PCM audio, ``websocket:dtmf``,
  ``websocket:notify`` and ``websocket:cleared`` text events) and ``VonageSpeaker`` (binary
  20 ms PCM frames out, ``notify`` markers, ``clear`` for barge-in);
- ``webhook``: ``VonageAnswerWebhook``, the signed answer webhook (``Authorization: Bearer``
  JWT, HS256 with the account's signature secret) and the NCCO that connects the call to the
  gateway's media URL.

Both are pure (no I/O, no clock); the phone core (``gateway.edges.phone``) does the rest.
Nothing is imported here, so that a pure module is imported without the endpoints.
"""
