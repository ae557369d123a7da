"""The Exotel carrier: a call that reaches a Voicebot applet (Exotel's bidirectional AgentStream)
made into a phone stream of ``gateway.edges.phone``.

- ``wire``: ``ExotelCarrier`` (``claims`` and ``decode`` of Exotel's JSON messages, snake_case:
  ``connected``, ``start``, ``media``, ``dtmf``, ``mark``, ``stop``) and ``ExotelSpeaker``
  (``media``, ``mark`` and ``clear`` out);
- ``webhook``: ``ExotelAnswerWebhook``, the applet's dynamic URL: Exotel asks it where to stream
  a call and gets ``{"url": "wss://…/phone/media?token=…"}`` back; Exotel signs nothing, so the
  request carries a shared secret (a query parameter or HTTP basic credentials).

Both are pure (no I/O, no clock). Nothing is imported here, so that a pure module is imported
without the others.
"""
