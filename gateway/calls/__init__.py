"""Calls the gateway places itself (``POST /v1/calls``): ``records`` (the request and the
call's record, pure), ``center`` (placing, following and finishing a call) and ``routes``
(the HTTP API). Each carrier's dialer and its call-progress webhooks live in its edge package
(``gateway.edges.twilio.outbound``, ``gateway.edges.telnyx.outbound``); ``gateway.phone_lines``
wires them in."""
