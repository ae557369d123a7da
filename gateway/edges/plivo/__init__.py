"""Plivo Audio Streams: a Plivo call made into a voice session by the shared phone core.

- ``wire``: ``PlivoCarrier`` (which stream messages are Plivo's, and what each one means) and
  ``PlivoSpeaker`` (``playAudio``, ``checkpoint`` and ``clearAudio`` out); the packing that
  carries the stream token through ``extraHeaders``, which admits letters and digits only;
- ``webhook``: ``PlivoAnswerWebhook``: the ``X-Plivo-Signature-V3`` check of the answer URL's
  request, the call's ``CallUUID`` and the ``<Stream>`` XML that connects the call to
  ``/phone/media``.

Both are pure (no I/O, no clock): the routes and the bridge live in ``gateway.edges.phone``.
Nothing is imported here, so that a pure module is imported without anything else.
"""
