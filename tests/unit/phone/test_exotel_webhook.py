"""Exotel's dynamic stream URL: the shared secret (query parameter or basic auth) accepted when
right and refused when wrong, missing or unset; ``CallSid`` read from a GET query, a form or a
JSON body; the answer ``{"url": "wss://…?token=…"}`` parsed back field by field."""

from __future__ import annotations

import base64
from urllib.parse import parse_qs, urlsplit

import orjson
import pytest

from gateway.edges.exotel.webhook import (
    CUSTOM_PARAMETERS_MAX_CHARS,
    SECRET_PARAMETER,
    ExotelAnswerWebhook,
    stream_url_with_token,
)
from gateway.edges.phone.webhook import WebhookRequest
from gateway.edges.phone.wire import PhoneFormatError

SECRET = "9f2c4e1ab7d35e80c6f1a2b3c4d5e6f7"
CALL = "a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4"
ANSWER_URL = "https://gw.example.com/exotel/answer"
CALL_QUERY = f"CallSid={CALL}&CallFrom=09876543210&CallTo=08047491899&Direction=incoming"
NOW = 1_750_000_000.0

hook = ExotelAnswerWebhook(SECRET)


def request(
    url: str,
    *,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    body: bytes = b"",
) -> WebhookRequest:
    return WebhookRequest(method=method, url=url, headers=headers or {}, body=body, now=NOW)


def basic(user: str, password: str) -> dict[str, str]:
    encoded = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"authorization": f"Basic {encoded}"}


# -- refusal ------------------------------------------------------------------------------------


def test_secret_in_the_query_is_accepted() -> None:
    url = f"{ANSWER_URL}?{SECRET_PARAMETER}={SECRET}&{CALL_QUERY}"
    assert hook.refusal(request(url)) is None


def test_secret_as_basic_auth_is_accepted_whatever_the_user() -> None:
    url = f"{ANSWER_URL}?{CALL_QUERY}"
    assert hook.refusal(request(url, headers=basic("exotel", SECRET))) is None
    assert hook.refusal(request(url, headers=basic("anyone", SECRET))) is None
    credentials = base64.b64encode(f"exotel:{SECRET}".encode()).decode()
    lower_scheme = {"authorization": f"basic {credentials}"}  # the scheme is case-insensitive
    assert hook.refusal(request(url, headers=lower_scheme)) is None


def test_secret_also_accepted_on_a_post() -> None:
    url = f"{ANSWER_URL}?{SECRET_PARAMETER}={SECRET}"
    assert hook.refusal(request(url, method="POST", body=b'{"CallSid":"x"}')) is None


@pytest.mark.parametrize(
    ("url", "headers", "reason"),
    [
        (f"{ANSWER_URL}?{CALL_QUERY}", {}, "no secret"),
        (f"{ANSWER_URL}?{SECRET_PARAMETER}=wrong&{CALL_QUERY}", {}, "wrong secret"),
        (f"{ANSWER_URL}?{SECRET_PARAMETER}=&{CALL_QUERY}", {}, "wrong secret"),
        (f"{ANSWER_URL}?{SECRET_PARAMETER}={SECRET[:-1]}", {}, "wrong secret"),
        (f"{ANSWER_URL}?{SECRET_PARAMETER}={SECRET}x", {}, "wrong secret"),
        (f"{ANSWER_URL}?{SECRET_PARAMETER.upper()}={SECRET}", {}, "no secret"),
        (ANSWER_URL, basic("exotel", "wrong"), "wrong secret"),
        (ANSWER_URL, basic(SECRET, ""), "wrong secret"),  # the secret as the user is not it
        (ANSWER_URL, {"authorization": f"Bearer {SECRET}"}, "no secret"),
        (ANSWER_URL, {"authorization": "Basic !!!notbase64"}, "no secret"),
        (ANSWER_URL, {"authorization": "Basic " + base64.b64encode(b"nocolon").decode()}, "no"),
        (f"{ANSWER_URL}#{SECRET_PARAMETER}={SECRET}", {}, "no secret"),  # a fragment is not sent
    ],
)
def test_refused(url: str, headers: dict[str, str], reason: str) -> None:
    refusal = hook.refusal(request(url, headers=headers))
    assert refusal is not None
    assert refusal.startswith(reason)
    assert SECRET not in refusal


def test_refused_when_the_secret_is_not_set() -> None:
    url = f"{ANSWER_URL}?{SECRET_PARAMETER}={SECRET}"
    assert ExotelAnswerWebhook(None).refusal(request(url)) == "EXOTEL_ANSWER_SECRET is not set"


def test_one_right_secret_among_wrong_ones_is_enough() -> None:
    url = f"{ANSWER_URL}?{SECRET_PARAMETER}=wrong&{SECRET_PARAMETER}={SECRET}"
    assert hook.refusal(request(url)) is None
    assert (
        hook.refusal(request(f"{ANSWER_URL}?{SECRET_PARAMETER}=wrong", headers=basic("e", SECRET)))
        is None
    )


def test_a_percent_encoded_secret_is_decoded() -> None:
    special = ExotelAnswerWebhook("a+b/c=d")
    assert special.refusal(request(f"{ANSWER_URL}?{SECRET_PARAMETER}=a%2Bb%2Fc%3Dd")) is None
    assert special.refusal(request(f"{ANSWER_URL}?{SECRET_PARAMETER}=a+b/c=d")) == "wrong secret"


def test_an_empty_secret_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match="EXOTEL_ANSWER_SECRET"):
        ExotelAnswerWebhook("")


# -- call_id ------------------------------------------------------------------------------------


def test_call_id_from_the_get_query() -> None:
    url = f"{ANSWER_URL}?{SECRET_PARAMETER}={SECRET}&{CALL_QUERY}"
    assert hook.call_id(request(url)) == CALL


def test_call_id_from_a_form_body() -> None:
    body = CALL_QUERY.encode()
    headers = {"content-type": "application/x-www-form-urlencoded; charset=utf-8"}
    assert hook.call_id(request(ANSWER_URL, method="POST", headers=headers, body=body)) == CALL


def test_call_id_from_a_json_body() -> None:
    body = orjson.dumps({"CallSid": CALL, "StreamSid": "MZ1", "From": "+919876543210"})
    headers = {"content-type": "application/json"}
    assert hook.call_id(request(ANSWER_URL, method="POST", headers=headers, body=body)) == CALL


def test_the_query_wins_over_the_body() -> None:
    body = orjson.dumps({"CallSid": "other"})
    headers = {"content-type": "application/json"}
    url = f"{ANSWER_URL}?CallSid={CALL}"
    assert hook.call_id(request(url, method="POST", headers=headers, body=body)) == CALL


@pytest.mark.parametrize(
    ("url", "headers", "body", "reason"),
    [
        (ANSWER_URL, {}, b"", "CallSid is missing"),
        (f"{ANSWER_URL}?CallFrom=0987", {}, b"", "CallSid is missing"),
        (f"{ANSWER_URL}?CallSid=", {}, b"", "CallSid is missing"),
        (ANSWER_URL, {"content-type": "text/plain"}, CALL.encode(), "CallSid is missing"),
        (ANSWER_URL, {"content-type": "application/json"}, b"[1]", "CallSid is missing"),
        (ANSWER_URL, {"content-type": "application/json"}, b'{"CallSid": 5}', "is missing"),
        (ANSWER_URL, {"content-type": "application/json"}, b"{", "not JSON"),
        (
            ANSWER_URL,
            {"content-type": "application/x-www-form-urlencoded"},
            b"\xff\xfe",
            "not UTF-8",
        ),
        (f"{ANSWER_URL}?CallSid=a%20b", {}, b"", "CallSid is not"),
        (f"{ANSWER_URL}?CallSid={'a' * 129}", {}, b"", "CallSid is not"),
        (f"{ANSWER_URL}?CallSid=%3Cscript%3E", {}, b"", "CallSid is not"),
    ],
)
def test_call_id_refused(url: str, headers: dict[str, str], body: bytes, reason: str) -> None:
    with pytest.raises(PhoneFormatError, match=reason):
        hook.call_id(request(url, method="POST", headers=headers, body=body))


# -- answer -------------------------------------------------------------------------------------


def parsed_answer_url(webhook: ExotelAnswerWebhook, stream_url: str, token: str) -> str:
    answer = webhook.answer(stream_url, token, CALL)
    assert answer.status == 200
    assert answer.content_type == "application/json"
    document = orjson.loads(answer.body)
    assert list(document) == ["url"]
    url = document["url"]
    assert isinstance(url, str)
    return url


def test_answer_is_the_stream_url_with_the_token() -> None:
    token = "eyJhbGciOiJIUzI1NiJ9.eyJjYWxsIjoiYTEifQ.c2lnbmF0dXJl"
    url = parsed_answer_url(hook, "wss://gw.example.com/phone/media", token)
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc, parts.path) == ("wss", "gw.example.com", "/phone/media")
    assert parse_qs(parts.query) == {"token": [token]}
    assert CALL not in url


def test_answer_asks_for_16_khz_when_configured() -> None:
    url = parsed_answer_url(
        ExotelAnswerWebhook(SECRET, sample_rate=16000), "wss://gw.example.com/phone/media", "t"
    )
    assert urlsplit(url).query == "sample-rate=16000&token=t"


def test_answer_keeps_a_query_the_stream_url_has_and_escapes_the_token() -> None:
    url = parsed_answer_url(hook, "ws://localhost:8080/phone/media?region=in", "a+b/c=&d")
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc) == ("ws", "localhost:8080")
    assert parse_qs(parts.query) == {"region": ["in"], "token": ["a+b/c=&d"]}


def test_answer_refuses_a_stream_url_that_is_not_a_websocket() -> None:
    with pytest.raises(ValueError, match="ws:// or wss://"):
        hook.answer("https://gw.example.com/phone/media", "t", CALL)


def test_the_token_query_is_within_exotels_bound_for_a_short_token() -> None:
    url = stream_url_with_token("wss://h/phone/media", "x" * 200)
    assert len(urlsplit(url).query) <= CUSTOM_PARAMETERS_MAX_CHARS


def test_name_and_bad_rate() -> None:
    assert hook.name == "exotel"
    with pytest.raises(ValueError, match="24000"):
        ExotelAnswerWebhook(SECRET, sample_rate=24000)
