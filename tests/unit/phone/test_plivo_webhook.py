"""Plivo's answer URL: X-Plivo-Signature-V3 over the string Plivo's docs and SDKs sign (written out
here by hand), accepted when right and refused when wrong, missing or tampered with; the call's
CallUUID; the <Stream> XML parsed back field by field."""

from __future__ import annotations

import base64
import hashlib
import hmac
import xml.etree.ElementTree as ET
from typing import Any, get_args
from urllib.parse import urlencode

import jwt
import orjson
import pytest

from fakes.carriers.plivo import AnswerRequest, SigningFault, answer_request
from gateway.edges.phone.webhook import WebhookRequest
from gateway.edges.phone.wire import PhoneFormatError, StreamStarted
from gateway.edges.plivo.webhook import (
    MAX_EXTRA_HEADERS_BYTES,
    PlivoAnswerWebhook,
    signed_text,
    stream_xml,
    v3_signature,
)
from gateway.edges.plivo.wire import PlivoCarrier, unpack_header_value

AUTH_TOKEN = "MzQ5ZjE0YmQ3ZGM1NmRmNjA0ZjUyYzQ4"
URL = "https://gw.example.com/plivo/answer"
CALL = "d7e6bb5a-5e1b-4b35-8f0a-0c1c6f5e6e01"
NONCE = "05429567804466091622"
FORM = {
    "CallUUID": CALL,
    "From": "14155550100",
    "To": "14155550199",
    "Direction": "inbound",
    "CallStatus": "ringing",
}
# What is signed, by hand: the URL, "?", the parameters sorted by name as namevalue, ".", nonce.
SIGNED = (
    "https://gw.example.com/plivo/answer?CallStatusringing"
    f"CallUUID{CALL}DirectioninboundFrom14155550100To14155550199"
)
STREAM_URL = "wss://gw.example.com/phone/media"
TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJjYWxsIjoiZDdlNiJ9.a-b_c"


def hmac_b64(key: str, text: str) -> str:
    return base64.b64encode(hmac.new(key.encode(), text.encode(), hashlib.sha256).digest()).decode()


SIGNATURE = hmac_b64(AUTH_TOKEN, f"{SIGNED}.{NONCE}")
webhook = PlivoAnswerWebhook(AUTH_TOKEN)


def request(
    headers: dict[str, str] | None = None,
    *,
    url: str = URL,
    body: bytes | None = None,
    method: str = "POST",
    now: float = 1_700_000_000.0,
) -> WebhookRequest:
    if headers is None:
        headers = {"x-plivo-signature-v3": SIGNATURE, "x-plivo-signature-v3-nonce": NONCE}
    form = urlencode(FORM).encode() if body is None else body
    return WebhookRequest(method=method, url=url, headers=headers, body=form, now=now)


# -- what is signed ------------------------------------------------------------------------------


def test_a_post_signs_the_url_then_the_sorted_parameters() -> None:
    params = {name: [value] for name, value in FORM.items()}
    assert signed_text("POST", URL, params) == SIGNED
    assert v3_signature(AUTH_TOKEN, "POST", URL, params, NONCE) == SIGNATURE


def test_the_query_is_sorted_and_a_dot_parts_it_from_the_form() -> None:
    url = "https://gw.example.com:8443/plivo/answer?tenant=acme&b=2&b=1&e=a%20b#frag"
    text = signed_text("POST", url, {"To": ["1"], "From": ["2"]})
    assert text == "https://gw.example.com:8443/plivo/answer?b=1&b=2&e=a b&tenant=acme.From2To1"


def test_a_repeated_parameter_signs_each_value_in_order() -> None:
    text = signed_text("POST", URL, {"Digits": ["9", "1"], "A": [""]})
    assert text == f"{URL}?ADigits1Digits9"


def test_a_get_signs_its_sorted_query_and_a_bare_url_itself() -> None:
    assert signed_text("GET", f"{URL}?To=1&CallUUID=x", {}) == f"{URL}?CallUUID=x&To=1"
    assert signed_text("GET", URL, {}) == URL
    assert signed_text("POST", URL, {}) == URL


# -- refusal -------------------------------------------------------------------------------------


def test_plivos_signature_is_accepted() -> None:
    assert webhook.refusal(request()) is None


def test_headers_are_read_whatever_their_case() -> None:
    headers = {"X-Plivo-Signature-V3": SIGNATURE, "X-Plivo-Signature-V3-Nonce": NONCE}
    assert webhook.refusal(request(headers)) is None


@pytest.mark.parametrize(
    "header",
    [f"{hmac_b64('old', SIGNED)},{SIGNATURE}", f"{SIGNATURE}, {hmac_b64('new', SIGNED)}"],
)
def test_any_of_several_signatures_passes(header: str) -> None:
    headers = {"x-plivo-signature-v3": header, "x-plivo-signature-v3-nonce": NONCE}
    assert webhook.refusal(request(headers)) is None


def test_the_main_accounts_signature_passes_alone() -> None:
    headers = {"x-plivo-signature-ma-v3": SIGNATURE, "x-plivo-signature-v3-nonce": NONCE}
    assert webhook.refusal(request(headers)) is None


def test_v3_has_no_timestamp_so_no_age_is_checked() -> None:
    assert webhook.refusal(request(now=0.0)) is None
    assert webhook.refusal(request(now=4_000_000_000.0)) is None


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"headers": {}}, "unsigned"),
        ({"headers": {"x-plivo-signature-v3-nonce": NONCE}}, "unsigned"),
        ({"headers": {"x-plivo-signature-v3": SIGNATURE}}, "Nonce"),
        ({"headers": {"x-plivo-signature-v3": "", "x-plivo-signature-v3-nonce": NONCE}}, "unsign"),
        ({"url": URL.replace("https", "http")}, "does not match"),
        ({"url": URL + "?tenant=other"}, "does not match"),
        ({"body": urlencode(FORM | {"From": "19005550123"}).encode()}, "does not match"),
        ({"body": urlencode(FORM | {"Extra": ""}).encode()}, "does not match"),
        ({"body": b"CallUUID=\xff\xfe"}, "UTF-8"),
        ({"method": "PUT"}, "GET and POST"),
    ],
)
def test_a_wrong_missing_or_tampered_signature_is_refused(
    changes: dict[str, Any], reason: str
) -> None:
    refused = webhook.refusal(request(**changes))
    assert refused is not None
    assert reason in refused
    assert SIGNATURE not in refused
    assert AUTH_TOKEN not in refused


@pytest.mark.parametrize("nonce", ["05429567804466091623", NONCE + "0"])
def test_the_nonce_is_signed(nonce: str) -> None:
    headers = {"x-plivo-signature-v3": SIGNATURE, "x-plivo-signature-v3-nonce": nonce}
    assert webhook.refusal(request(headers)) is not None


def test_another_auth_tokens_signature_is_refused() -> None:
    other = PlivoAnswerWebhook(AUTH_TOKEN + "x")
    assert other.refusal(request()) == (
        "X-Plivo-Signature-V3 does not match (another auth token, or another URL)"
    )


def test_the_simulators_requests_are_judged_alike() -> None:
    right = answer_request(URL + "?tenant=acme", AUTH_TOKEN, call_id=CALL)
    assert webhook.refusal(as_request(right)) is None
    for fault in get_args(SigningFault):
        wrong = answer_request(URL, AUTH_TOKEN, fault=fault)
        assert webhook.refusal(as_request(wrong)) is not None, fault


def as_request(made: AnswerRequest) -> WebhookRequest:
    return WebhookRequest(made.method, made.url, made.lower_headers, made.body, 0.0)


def test_an_empty_auth_token_is_not_a_configuration() -> None:
    with pytest.raises(ValueError, match="PLIVO_AUTH_TOKEN"):
        PlivoAnswerWebhook("")


def test_the_auth_token_is_not_in_the_repr() -> None:
    assert AUTH_TOKEN not in repr(webhook)
    assert webhook.name == "plivo"


# -- the call ------------------------------------------------------------------------------------


def test_the_call_is_the_forms_call_uuid() -> None:
    assert webhook.call_id(request()) == CALL


def test_a_get_answer_names_the_call_in_its_query() -> None:
    get = request(url=f"{URL}?CallUUID={CALL}&From=1", body=b"", method="GET")
    assert webhook.call_id(get) == CALL


@pytest.mark.parametrize("body", [b"", b"From=1", b"CallUUID="])
def test_a_request_without_a_call_uuid_is_refused(body: bytes) -> None:
    with pytest.raises(PhoneFormatError, match="CallUUID"):
        webhook.call_id(request(body=body))


# -- the answer ----------------------------------------------------------------------------------


def parsed(body: str) -> ET.Element:
    assert body.startswith('<?xml version="1.0" encoding="UTF-8"?>')
    return ET.fromstring(body)


def test_the_answer_is_a_bidirectional_mulaw_stream_carrying_the_token() -> None:
    answer = webhook.answer(STREAM_URL, TOKEN, CALL)
    assert (answer.status, answer.content_type) == (200, "application/xml")
    root = parsed(answer.body)
    assert root.tag == "Response"
    assert [child.tag for child in root] == ["Stream"]
    stream = root[0]
    assert stream.text == STREAM_URL
    assert stream.attrib == {
        "bidirectional": "true",
        "keepCallAlive": "true",
        "audioTrack": "inbound",
        "contentType": "audio/x-mulaw;rate=8000",
        "extraHeaders": stream.attrib["extraHeaders"],
    }
    key, _, packed = stream.attrib["extraHeaders"].partition("=")
    assert key == "token"
    assert packed.isascii()
    assert packed.isalnum()
    assert unpack_header_value(packed) == TOKEN


@pytest.mark.parametrize("separator", [",", ";"])
def test_the_token_comes_back_through_the_streams_start(separator: str) -> None:
    extra = parsed(webhook.answer(STREAM_URL, TOKEN, CALL).body)[0].attrib["extraHeaders"]
    start = {
        "event": "start",
        "sequenceNumber": 1,
        "start": {
            "callId": CALL,
            "streamId": "87654321-4321-4321-4321-cba987654321",
            "accountId": "MA0",
            "tracks": ["inbound"],
            "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000},
        },
        "extra_headers": extra.replace(",", separator),
    }
    event = PlivoCarrier().decode(orjson.dumps(start).decode())
    assert isinstance(event, StreamStarted)
    assert (event.call_id, event.token) == (CALL, TOKEN)


def test_without_a_token_the_stream_has_no_extra_headers() -> None:
    stream = parsed(webhook.answer(STREAM_URL, "", CALL).body)[0]
    assert "extraHeaders" not in stream.attrib
    assert stream.attrib["bidirectional"] == "true"


def test_a_farewell_is_spoken_after_the_stream() -> None:
    farewell = PlivoAnswerWebhook(AUTH_TOKEN, farewell="Sorry & goodbye <3")
    root = parsed(farewell.answer(STREAM_URL, TOKEN, CALL).body)
    assert [child.tag for child in root] == ["Stream", "Speak"]
    assert root[1].text == "Sorry & goodbye <3"
    assert [child.tag for child in parsed(webhook.answer(STREAM_URL, TOKEN, CALL).body)] == [
        "Stream"
    ]


def test_the_stream_url_is_escaped() -> None:
    url = "wss://gw.example.com/phone/media?a=1&b=<2>"
    assert parsed(stream_xml(url, TOKEN))[0].text == url


def test_a_real_stream_token_fits_plivos_limit() -> None:
    claims = {
        "sub": f"plivo:{CALL}",
        "aud": "realtime-gateway:phone-media",
        "call": CALL,
        "jti": "Xk3-_q9PZ0aLm2_nB7cR1w",
        "roles": ["caller", "phone"],
        "iat": 1_700_000_000,
        "exp": 1_700_000_060,
    }
    token = jwt.encode(claims, "s" * 32, "HS256")
    extra = parsed(stream_xml(STREAM_URL, token))[0].attrib["extraHeaders"]
    assert len(extra.encode()) <= MAX_EXTRA_HEADERS_BYTES
    assert unpack_header_value(extra.removeprefix("token=")) == token


def test_a_token_too_long_for_plivo_is_refused_without_saying_it() -> None:
    token = "secret." * 100
    with pytest.raises(ValueError, match="512") as raised:
        stream_xml(STREAM_URL, token)
    assert "secret" not in str(raised.value)


def test_a_hang_up_notice_on_the_answer_url_is_not_a_call_to_connect() -> None:
    """Without a hangup URL, Plivo posts the call's end to the answer URL: acknowledged only."""
    hook = PlivoAnswerWebhook("token")

    def request(status: str) -> WebhookRequest:
        body = urlencode({"CallUUID": "c1", "CallStatus": status}).encode()
        return WebhookRequest("POST", "https://gw.example/plivo/answer", {}, body, 0.0)

    assert hook.connects(request("ringing"))
    assert hook.connects(request("in-progress"))
    assert not hook.connects(request("completed"))
