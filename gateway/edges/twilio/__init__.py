"""Twilio Media Streams: a phone carrier's adapter for the shared phone bridge
(``gateway.edges.phone``).

- ``wire``: ``TwilioCarrier`` and ``TwilioSpeaker``, Twilio's messages on the carrier contract;
- ``codec``: Twilio's inbound messages as a tagged union (``decode``); ``media``, ``mark`` and
  ``clear`` frames out;
- ``signature``: ``X-Twilio-Signature`` validation and the ``<Connect><Stream>`` TwiML;
- ``webhook``: the voice webhook (``POST /twilio/voice``) on the answer-webhook contract, and
  the hang-up through Twilio's REST API.

``codec``, ``signature`` and ``wire`` are pure (no I/O). Nothing is imported here, so that a
pure module is imported without the endpoints.
"""
