"""The Telnyx carrier: a Call Control call whose media stream (Telnyx Media Streaming over
WebSocket, bidirectional RTP mode) is made into a phone stream of ``gateway.edges.phone``.

- ``wire``: ``TelnyxCarrier`` (``claims`` and ``decode`` of Telnyx's JSON frames: ``connected``,
  ``start``, ``media`` numbered by ``media.chunk`` since Telnyx may deliver them out of order,
  ``dtmf``, ``mark``, ``error``, ``stop``) and ``TelnyxSpeaker`` (``media``, ``mark`` and
  ``clear`` out);
- ``webhook``: the Call Control webhook: its Ed25519 signature (``signature_refusal``), its
  events as a tagged union (``parse_event``), and ``TelnyxAnswerWebhook``, whose ``answer`` is
  the body of the answer action (Telnyx returns no document: the gateway answers through the
  REST API);
- ``call_control``: the REST actions the gateway sends (answer with streaming, streaming start,
  hang-up, dial) as pure ``(method, path, body)`` requests; the HTTP client is the caller's.

All three are pure (no I/O, no clock). Nothing is imported here, so that a pure module is
imported without the others.
"""
