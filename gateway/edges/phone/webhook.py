"""A carrier's answer webhook, as pure data: the request the carrier made and the call-control
document the gateway answers with. Each carrier adapter implements ``AnswerWebhook``; the routes
(``gateway.edges.phone.routes``) do the HTTP.

The flow is the same for every carrier that asks a webhook what to do with a call (Twilio,
Plivo, Vonage, Exotel's dynamic stream URL): verify the carrier signed the request (a refusal is
a 403 with the reason logged, never the expected signature), read the call's id, mint a stream
token bound to it, and answer the document that connects the call to the gateway's media URL
with the token where the carrier will hand it back in the stream's first messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["Answer", "AnswerWebhook", "WebhookRequest"]


@dataclass(frozen=True, slots=True)
class WebhookRequest:
    """``url``: the URL as the carrier called it (the public scheme, host, path and query, as
    signatures cover it); ``headers`` with lower-case names; ``body`` the raw bytes (signatures
    cover those too); ``now`` Unix seconds, for signatures with a timestamp."""

    method: str
    url: str
    headers: Mapping[str, str] = field(hash=False)
    body: bytes = field(repr=False)
    now: float


@dataclass(frozen=True, slots=True)
class Answer:
    """The HTTP answer: a call-control document (TwiML-like XML, NCCO JSON, …)."""

    content_type: str
    body: str
    status: int = 200


class AnswerWebhook(Protocol):
    """One carrier's answer webhook. Stateless apart from the credentials it was built with."""

    @property
    def name(self) -> str: ...

    def refusal(self, request: WebhookRequest) -> str | None:
        """Why the request is refused (unsigned, wrongly signed, too old), None if it is the
        carrier's. The reason is for the log: it never contains a secret or the expected
        signature."""
        ...

    def call_id(self, request: WebhookRequest) -> str:
        """The carrier's id of the call; raises ``PhoneFormatError`` if the request has none."""
        ...

    def answer(self, stream_url: str, token: str, call_id: str) -> Answer:
        """The document connecting the call to ``stream_url`` (``wss://…/phone/media``), with
        ``token`` placed where the carrier hands it back in the stream's first messages."""
        ...
