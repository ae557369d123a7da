"""WebRTC (work in progress, issue 35): a browser's peer connection made into a session.

- ``audio_out``: ``PcmOutTrack``, the session's audio as an outbound track paced at real time;
- ``audio_in``: the caller's Opus frames (decoded by aiortc) as the session's PCM16;
- ``routes``: ``POST /v1/webrtc/offer``: the SDP offer in, the answer out, the data channel
  carrying the native protocol's JSON events.
"""
