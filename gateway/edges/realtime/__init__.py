"""The realtime edge: OpenAI-Realtime-compatible, GA client events in, GA server events out.

``GET /v1/realtime?model=…`` speaks OpenAI's GA Realtime protocol as a server, so a client
written for OpenAI Realtime (the ``openai`` SDK's ``client.realtime.connect``, the Agents SDK)
gets this gateway's tools, policy and upstreams. The async shell is ``routes`` (endpoint, auth),
``bridge`` (the client of one gateway session) and ``early_session`` (that session opened as the
client connects, with the start ``opening`` describes); the core below does no I/O:

- ``client_wire`` (with ``client_items``): a client's JSON text message → a typed event, or
  ``CompatError`` (``errors``) with OpenAI's code, message and ``param``;
- ``session_config``: ``session.update`` validated (``SessionPatch``) and merged into the
  effective session (``SessionView``) that ``session.created`` / ``session.updated`` show;
  ``client_tools``: its function tools made into the gateway session's ``client_tools``;
- ``translate``: ``Translator``, the gateway session's output (our protocol's events and PCM16
  audio) → GA server events in OpenAI's order, and the echoes of the client's own edits; it
  drives ``responses`` (one response's events), ``user_turns`` (speech, commits,
  transcription) and ``conversation`` (the item list);
- ``server_wire``: event builders, ids, and the mappings of statuses, usage, errors and close
  codes; ``json_fields``: typed field reads that raise OpenAI's errors.
"""
