"""``scripts/bench relay``, ``capacity``, ``scale`` and ``all``: every target in front of one
OpenAI fake in echo mode, driven by the Go load generator."""
