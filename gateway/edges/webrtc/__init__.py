"""WebRTC for the native protocol: a browser's peer connection made into a session.

- ``routes``: ``GET /v1/webrtc/config`` (ICE servers for the browser) and ``POST
  /v1/webrtc/offer`` (the SDP offer in, the answer out); imports no aiortc;
- ``call``: ``NativeCall``, one peer connection's data channel speaking the native protocol,
  its tracks the session's audio, parked (resumable) when the connection is lost.

The media itself (the peer connection, the tracks, ICE) is ``gateway.edges.rtc``'s, shared with
OpenAI's WebRTC interface (``gateway.edges.realtime``).
"""
