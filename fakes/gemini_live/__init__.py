"""A faithful fake Gemini Live (over TLS) server; ``server`` is its entry point."""

__all__: list[str] = []
