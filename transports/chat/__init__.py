"""Text agents on any OpenAI-compatible chat-completions provider (``provider: "chat"``)."""

from transports.chat.transport import ChatOptions, ChatTransport

__all__ = ["ChatOptions", "ChatTransport"]
