"""The dynamic URL of an Exotel Voicebot applet, as Exotel calls it, for
``fakes.carriers.exotel``: a GET with the call's details in the query (``CallSid``, …), the
secret the operator put in that URL as its ``secret`` parameter or as HTTP basic credentials
(``answer_request``, ``wrongly_signed_answer_request``), answered ``{"url": "wss://…"}``: the
stream's URL (``fetch_stream_url``).

From https://developer.exotel.com/docs/agentstream/stream-voicebot-applet,
https://docs.exotel.com/exotel-agentstream/stream-applet (the ``{"url": …}`` answer),
https://support.exotel.com/support/solutions/articles/3000096873-working-with-connect-applet-dynamic-url-
"""

from __future__ import annotations

from typing import Literal

import aiohttp
import orjson

from fakes.carriers.stream_kit import CarrierRequest, with_query

__all__ = ["AnswerRequest", "answer_request", "fetch_stream_url", "wrongly_signed_answer_request"]


class AnswerRequest(CarrierRequest):
    """The fields of the phone core's ``WebhookRequest`` but ``now`` (headers in lower case)."""

    __slots__ = ()


def answer_request(
    url: str,
    *,
    secret: str | None,
    call_sid: str,
    via: Literal["query", "basic"] = "query",
) -> AnswerRequest:
    """The GET Exotel makes to the applet's URL ``url`` (the call's details in the query), with
    ``secret`` (None: none) as the ``secret`` query parameter the operator put in that URL, or
    as HTTP basic credentials (``via="basic"``, user ``exotel``)."""
    query = {"CallSid": call_sid, "CallFrom": "09876543210", "CallTo": "08047491899"}
    query["Direction"] = "incoming"
    headers: dict[str, str] = {}
    if secret is not None and via == "query":
        query["secret"] = secret
    elif secret is not None:
        headers["authorization"] = aiohttp.encode_basic_auth("exotel", secret)
    return AnswerRequest("GET", with_query(url, query), headers, b"")


def wrongly_signed_answer_request(
    url: str, *, call_sid: str, via: Literal["query", "basic"] = "query"
) -> AnswerRequest:
    """Fault: the same request with a secret that is not the gateway's."""
    return answer_request(
        url, secret="not-the-answer-secret-0123456789", call_sid=call_sid, via=via
    )


async def fetch_stream_url(
    url: str, *, secret: str | None, call_sid: str, via: Literal["query", "basic"] = "query"
) -> str:
    """Call the applet's URL as Exotel does and return the ``url`` it answers (the stream's).
    Raises ``aiohttp.ClientResponseError`` for a status that is not 200, ``ValueError`` for a
    body that is not ``{"url": "ws(s)://…"}``."""
    request = answer_request(url, secret=secret, call_sid=call_sid, via=via)
    async with (
        aiohttp.ClientSession() as session,
        session.get(request.url, headers=request.headers) as response,
    ):
        response.raise_for_status()
        document = orjson.loads(await response.read())
    stream_url = document.get("url") if isinstance(document, dict) else None
    if not isinstance(stream_url, str) or not stream_url.startswith(("ws://", "wss://")):
        raise ValueError('the answer is not {"url": "ws(s)://…"}')
    return stream_url
