"""Simulators of the phone carriers' media-stream clients (Twilio, Telnyx, Plivo, Vonage,
Exotel), each on a real WebSocket, for the phone edge's tests: one module per carrier, sending
what the carrier sends, recording what it receives, playing it at real time. What they share
is in ``stream_kit`` (the records, waiting, pacing, the Vonage and Exotel stream end) and
``json_stream`` (the Twilio, Telnyx and Plivo stream end and its play queue).

Like the rest of ``fakes``, not part of the product, and free of ``gateway.edges`` imports
(``tests/test_layering.py``): what a test hands the gateway is plain data.
"""

__all__: list[str] = []
