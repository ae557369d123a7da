"""A chat provider's failure as the client hears it: what happened, and whether to retry. Pure.

The message names the status and the provider's own message (at most 300 characters), never
the key.
"""

from __future__ import annotations

from collections.abc import Mapping

import openai

from transports.events import UpstreamNotice

__all__ = ["notice_of"]


def notice_of(exc: Exception) -> UpstreamNotice:
    """A provider failure as the client will hear it: what happened, and whether to retry."""
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        retryable = status in (408, 409, 429) or status >= 500
        label = "rate limited" if status == 429 else "error"
        detail = _provider_message(exc)
        return UpstreamNotice(
            f"http_{status}",
            f"the chat provider answered {status} ({label}): {detail}",
            retryable=retryable,
        )
    if isinstance(exc, openai.APITimeoutError):
        return UpstreamNotice("timeout", "the chat provider did not answer in time", retryable=True)
    if isinstance(exc, openai.APIConnectionError):
        return UpstreamNotice(
            "unreachable", f"cannot reach the chat provider: {exc}", retryable=True
        )
    return UpstreamNotice(
        "stream_broken", f"the chat provider's stream broke off: {exc}", retryable=True
    )


def _provider_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, Mapping):
        message = body.get("message")
        if isinstance(message, str) and message:
            return message[:300]
    return exc.message[:300]
