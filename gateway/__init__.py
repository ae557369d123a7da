"""Realtime voice/text gateway: the server, and everything not specific to a provider or tool."""

__all__: list[str] = []
