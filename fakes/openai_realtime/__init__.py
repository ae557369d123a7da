"""A faithful fake OpenAI Realtime (GA) server; ``server`` is its entry point."""

__all__: list[str] = []
