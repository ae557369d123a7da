"""What every phone carrier's edge shares: a call made into a voice session.

- ``wire``: the contract of a carrier adapter (``Carrier``, ``Speaker``) and the events a
  carrier's messages become;
- ``webhook``: the contract of a carrier's answer webhook, as pure data;
- ``bridge``: ``PhoneBridge``, the session's client for one call: it moves bytes and keeps time;
- ``playback``: ``PlaybackTracker``, the outbound side as a state machine (20 ms frames,
  markers, the played position, barge-in);
- ``reorder``: caller audio put back in order, for carriers whose frames may arrive out of order;
- ``routes``: the answer webhook and the media stream (``/phone/media`` serves every carrier).

Each carrier (``gateway.edges.twilio``, ``.telnyx``, ``.plivo``, ``.vonage``, ``.exotel``) is a
thin, pure adapter of ``wire`` and ``webhook``; ``gateway.phone_lines`` wires them in. Nothing
is imported here, so that a pure module is imported without the endpoints.
"""
