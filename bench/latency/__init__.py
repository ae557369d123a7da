"""``scripts/bench latency``: the voice-to-voice latency the gateway adds, per audio path."""
