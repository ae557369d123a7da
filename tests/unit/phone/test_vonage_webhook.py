"""Vonage's signed answer webhook and the NCCO answered: the JWT accepted when right, refused
when missing, wrongly signed, stale or not matching the body
(https://developer.vonage.com/en/getting-started/concepts/webhooks#decoding-signed-webhooks),
the call's uuid from a GET or a POST, and the NCCO read back field by field
(https://developer.vonage.com/en/voice/voice-api/ncco-reference)."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any
from urllib.parse import urlencode

import jwt
import orjson
import pytest

from fakes.carriers.vonage import answer_request, wrongly_signed_answer_request
from gateway.edges.phone.webhook import AnswerWebhook, WebhookRequest
from gateway.edges.phone.wire import PhoneFormatError, StreamStarted
from gateway.edges.vonage.webhook import VonageAnswerWebhook
from gateway.edges.vonage.wire import VonageCarrier

SECRET = "vonage-signature-secret-" + "0123456789" * 4  # 64 bytes: HS512 too, unwarned
APPLICATION = "aaaaaaaa-bbbb-cccc-dddd-0123456789ab"
CALL = "63f61863-4a51-4f6b-86e1-46edebcf9356"
NOW = 1_760_000_000.0
ANSWER_URL = "https://gateway.example/vonage/answer"
MEDIA_URL = "wss://gateway.example/phone/media"
FIELDS = {
    "to": "447700900000",
    "from": "447700900001",
    "uuid": CALL,
    "conversation_uuid": "CON-aaaaaaaa-bbbb-cccc-dddd-0123456789ab",
}
BODY = orjson.dumps(FIELDS)

webhook = VonageAnswerWebhook(SECRET, application_id=APPLICATION)


def claims(**change: Any) -> dict[str, Any]:
    """The docs' sample claims, issued ``NOW``, for the POST body ``BODY``."""
    base = {
        "iat": int(NOW),
        "jti": "c5ba8f24-1a14-4c10-bfdf-3fbe8ce511b5",
        "iss": "Vonage",
        "payload_hash": hashlib.sha256(BODY).hexdigest(),
        "api_key": "a1b2c3d",
        "application_id": APPLICATION,
    }
    return {k: v for k, v in (base | change).items() if v is not None}


def bearer(token_claims: dict[str, Any], secret: str = SECRET, algorithm: str = "HS256") -> str:
    return "Bearer " + jwt.encode(token_claims, secret, algorithm=algorithm)


def post(authorization: str | None, body: bytes = BODY, now: float = NOW) -> WebhookRequest:
    headers = {"content-type": "application/json"}
    if authorization is not None:
        headers["authorization"] = authorization
    return WebhookRequest("POST", ANSWER_URL, headers, body, now)


def get(authorization: str | None, query: dict[str, str] = FIELDS) -> WebhookRequest:
    headers = {} if authorization is None else {"authorization": authorization}
    return WebhookRequest("GET", f"{ANSWER_URL}?{urlencode(query)}", headers, b"", NOW)


def test_it_is_an_answer_webhook_named_vonage() -> None:
    as_webhook: AnswerWebhook = webhook
    assert as_webhook.name == "vonage"


# the signature ---------------------------------------------------------------------------------


def test_a_signed_post_is_accepted() -> None:
    assert webhook.refusal(post(bearer(claims()))) is None


def test_a_signed_get_is_accepted() -> None:
    query_hash = hashlib.sha256(orjson.dumps(FIELDS)).hexdigest()
    assert webhook.refusal(get(bearer(claims(payload_hash=query_hash)))) is None


def test_the_get_query_hash_is_not_checked() -> None:
    # Its rendering is described by a support article only: the query is not held against it.
    assert webhook.refusal(get(bearer(claims(payload_hash="0" * 64)))) is None


def test_the_simulators_requests_are_accepted() -> None:
    for method in ("GET", "POST"):
        made = answer_request(
            ANSWER_URL, secret=SECRET, call_uuid=CALL, issued_at=NOW, method=method
        )
        request = WebhookRequest(made.method, made.url, made.headers, made.body, NOW + 1)
        assert webhook.refusal(request) is None
        assert webhook.call_id(request) == CALL


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_the_simulators_wrongly_signed_request_is_refused(method: str) -> None:
    made = wrongly_signed_answer_request(ANSWER_URL, call_uuid=CALL, issued_at=NOW, method=method)  # type: ignore[arg-type]
    request = WebhookRequest(made.method, made.url, made.headers, made.body, NOW)
    assert (
        webhook.refusal(request)
        == "the token's signature does not verify with the signature secret"
    )


@pytest.mark.parametrize(
    "authorization",
    [None, "", "Bearer", "Bearer   ", "Basic dXNlcjpwYXNz", "Token abc"],
)
def test_an_unsigned_request_is_refused(authorization: str | None) -> None:
    refusal = webhook.refusal(post(authorization))
    assert refusal is not None
    assert "no Authorization: Bearer token" in refusal


def test_the_scheme_is_case_insensitive() -> None:
    assert webhook.refusal(post(bearer(claims()).replace("Bearer", "bearer"))) is None


def test_a_wrong_secret_is_refused() -> None:
    refusal = webhook.refusal(post(bearer(claims(), secret="another-secret-of-forty-characters!!")))
    assert refusal == "the token's signature does not verify with the signature secret"


@pytest.mark.parametrize(
    ("authorization", "kind"),
    [
        ("Bearer not.a.jwt", "DecodeError"),
        ("Bearer abc", "DecodeError"),
        (bearer(claims(), algorithm="HS512"), "InvalidAlgorithmError"),
        ("Bearer " + jwt.encode(claims(), None, algorithm="none"), "InvalidAlgorithmError"),
    ],
)
def test_a_token_that_is_not_hs256_is_refused(authorization: str, kind: str) -> None:
    assert webhook.refusal(post(authorization)) == f"the token is not a valid HS256 JWT ({kind})"


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"iss": None}, "the token's issuer is not Vonage"),
        ({"iss": "Nexmo"}, "the token's issuer is not Vonage"),
        ({"iat": None}, "the token has no iat"),
        ({"iat": "1760000000"}, "the token has no iat"),
        ({"iat": True}, "the token has no iat"),
        ({"iat": float("nan")}, "the token has no iat"),
        ({"iat": 10**400}, "the token has no iat"),
        ({"iat": int(NOW) - 301}, "the token was issued 301 s ago (over 300 s)"),
        ({"iat": int(NOW) + 61}, "the token was issued in the future"),
        ({"exp": int(NOW) - 1}, "the token has expired"),
        ({"exp": int(NOW)}, "the token has expired"),
        ({"exp": "later"}, "the token has expired"),
        ({"application_id": "bbbbbbbb-0000"}, "the token is for another application"),
        ({"payload_hash": None}, "the token has no payload_hash for the POST body"),
        ({"payload_hash": ""}, "the token has no payload_hash for the POST body"),
        ({"payload_hash": "0" * 64}, "the body does not match the token's payload_hash"),
    ],
)
def test_a_token_with_bad_claims_is_refused(change: dict[str, Any], reason: str) -> None:
    assert webhook.refusal(post(bearer(claims(**change)))) == reason


@pytest.mark.parametrize(
    "change",
    [
        {"iat": int(NOW) - 299},
        {"iat": int(NOW) + 59},
        {"iat": NOW - 0.5},
        {"exp": int(NOW) + 60},
        {"application_id": None},  # the claim is optional
        {"payload_hash": hashlib.sha256(BODY).hexdigest().upper()},
    ],
)
def test_a_token_within_bounds_is_accepted(change: dict[str, Any]) -> None:
    assert webhook.refusal(post(bearer(claims(**change)))) is None


def test_a_tampered_body_is_refused() -> None:
    tampered = BODY.replace(CALL.encode(), str(uuid.uuid4()).encode())
    refusal = webhook.refusal(post(bearer(claims()), body=tampered))
    assert refusal == "the body does not match the token's payload_hash"


def test_any_application_is_taken_when_none_is_configured() -> None:
    anyone = VonageAnswerWebhook(SECRET)
    assert anyone.refusal(post(bearer(claims(application_id="another-app")))) is None


def test_a_short_secret_still_verifies_without_a_warning() -> None:
    # The account's secret may be short (pyjwt warns on encoding it; we never refuse for it).
    short = "s3cr3t"
    with pytest.warns(jwt.InsecureKeyLengthWarning):
        authorization = bearer(claims(), secret=short)
    assert VonageAnswerWebhook(short).refusal(post(authorization)) is None
    assert VonageAnswerWebhook(short).refusal(post(bearer(claims()))) is not None


def test_no_refusal_quotes_the_token_or_the_secret() -> None:
    requests = [
        post(bearer(claims(), secret="another-secret-of-forty-characters!!")),
        post(bearer(claims(iat=1))),
        post(bearer(claims(payload_hash="f" * 64))),
        post("Bearer " + SECRET),
    ]
    for request in requests:
        refusal = webhook.refusal(request)
        assert refusal is not None
        token = request.headers["authorization"].split(" ", 1)[1]
        assert SECRET not in refusal
        assert token not in refusal
        assert all(part not in refusal for part in token.split(".") if len(part) > 8)


def test_an_empty_secret_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match="empty"):
        VonageAnswerWebhook("")


# the call's id ---------------------------------------------------------------------------------


def test_the_call_id_of_a_get_is_the_uuid_parameter() -> None:
    assert webhook.call_id(get(None)) == CALL


def test_the_call_id_of_a_post_is_the_uuid_in_its_body() -> None:
    assert webhook.call_id(post(None)) == CALL


def test_a_post_without_a_body_is_read_from_its_query() -> None:
    request = WebhookRequest("POST", f"{ANSWER_URL}?uuid={CALL}", {}, b"", NOW)
    assert webhook.call_id(request) == CALL


@pytest.mark.parametrize(
    ("request_", "problem"),
    [
        (get(None, {"to": "1", "from": "2"}), "no uuid"),
        (get(None, {"uuid": ""}), "no uuid"),
        (post(None, body=b"uuid=abc"), "not JSON"),
        (post(None, body=b"[1]"), "not a JSON object"),
        (post(None, body=b'{"uuid": 7}'), "no uuid"),
        (post(None, body=b'{"conversation_uuid": "CON-1"}'), "no uuid"),
    ],
)
def test_a_request_without_a_uuid_is_malformed(request_: WebhookRequest, problem: str) -> None:
    with pytest.raises(PhoneFormatError, match=problem):
        webhook.call_id(request_)


# the NCCO --------------------------------------------------------------------------------------


def endpoint_of(answer_body: str) -> dict[str, Any]:
    ncco = orjson.loads(answer_body)
    assert isinstance(ncco, list)
    assert len(ncco) == 1
    (action,) = ncco
    assert set(action) == {"action", "endpoint"}
    assert action["action"] == "connect"
    assert isinstance(action["endpoint"], list)
    assert len(action["endpoint"]) == 1
    endpoint: dict[str, Any] = action["endpoint"][0]
    return endpoint


def test_the_answer_connects_the_call_to_the_media_socket() -> None:
    answer = webhook.answer(MEDIA_URL, "t0k3n", CALL)
    assert answer.status == 200
    assert answer.content_type == "application/json"
    assert endpoint_of(answer.body) == {
        "type": "websocket",
        "uri": MEDIA_URL,
        "content-type": "audio/l16;rate=16000",
        "headers": {"call_uuid": CALL, "token": "t0k3n"},
    }


def test_the_answer_at_8khz() -> None:
    answer = VonageAnswerWebhook(SECRET, rate=8000).answer(MEDIA_URL, "t", CALL)
    assert endpoint_of(answer.body)["content-type"] == "audio/l16;rate=8000"


def test_an_unsupported_rate_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match="24000"):
        VonageAnswerWebhook(SECRET, rate=24000)


def test_the_stream_vonage_opens_from_the_answer_hands_back_the_call_and_token() -> None:
    endpoint = endpoint_of(webhook.answer(MEDIA_URL, "t0k3n", CALL).body)
    # What Vonage sends first: the content-type, the endpoint's headers at the top level.
    first = {"event": "websocket:connected", "content-type": endpoint["content-type"]}
    first |= endpoint["headers"]
    event = VonageCarrier().decode(orjson.dumps(first).decode())
    assert isinstance(event, StreamStarted)
    assert (event.call_id, event.token, event.line.rate) == (CALL, "t0k3n", 16000)


def test_headers_over_vonages_512_bytes_are_refused() -> None:
    with pytest.raises(ValueError, match="Vonage allows 512"):
        webhook.answer(MEDIA_URL, "t" * 480, CALL)
    assert endpoint_of(webhook.answer(MEDIA_URL, "t" * 400, CALL).body)["headers"]["token"]
