"""WebRTC media shared by the edges that terminate a browser's peer connection (the native
protocol's ``/v1/webrtc/offer``, OpenAI's ``/v1/realtime/calls``), as ``gateway.edges.phone``
is for the carriers. Importing ``peer`` or ``audio_out`` loads aiortc and PyAV (a third of a
second): the edges do so in a thread at their first offer, not when the gateway starts.

- ``peer``: ``PeerLink``, one peer connection: the offer answered, the peer's microphone
  drained into the session as 48 kHz mono PCM16, the reply track, the data channel, the end;
- ``audio_out``: ``PcmOutTrack``, the session's audio as an outbound track paced at real time,
  counting what of each response it has sent;
- ``audio_in``: Opus frames, decoded by aiortc, as mono PCM16;
- ``ice``: TURN credentials for browsers, the public address announced (pure);
- ``udp_ports``: the UDP port range of the gateway's ICE candidates (aioice has none).
"""
