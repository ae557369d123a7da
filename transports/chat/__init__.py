"""Text agents on any chat-completions provider (work in progress: the pure pieces first)."""
