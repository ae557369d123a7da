"""A faithful fake OpenAI-compatible chat-completions server (SSE); see ``server``."""

__all__: list[str] = []
