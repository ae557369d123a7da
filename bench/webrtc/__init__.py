"""``scripts/bench webrtc``: what the WebRTC edge costs against the WebSocket path (issue 35)."""
