"""The API's answer → the envelope (pure, no event loop): every status, messages, side effects,
Retry-After."""

from __future__ import annotations

from datetime import UTC, datetime

import orjson
import pytest

from gateway.http_tools.response_mapping import (
    MESSAGE_CAP,
    TEXT_CAP,
    ApiAnswer,
    api_message,
    connection_failed,
    interpret_answer,
    parse_retry_after,
    retry_wait_s,
    too_large,
)
from tools._core import ToolErrorType, ToolResponse

JSON = "application/json; charset=utf-8"
NOW = datetime(2030, 1, 7, 12, 0, 0, tzinfo=UTC)


def answer(status: int, body: object = b"", content_type: str = JSON, **extra: object) -> ApiAnswer:
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    return ApiAnswer(status, content_type, raw, **extra)


def interpret(
    status: int, body: object = b"", method: str = "GET", **extra: object
) -> ToolResponse:
    return interpret_answer(answer(status, body, **extra), method=method, service_auth=False)


@pytest.mark.parametrize(
    ("body", "data"),
    [
        ({"appointments": [], "count": 0}, {"appointments": [], "count": 0}),
        ([1, 2], {"items": [1, 2]}),
        ("done", {"value": "done"}),
        (b"", {}),
    ],
)
def test_success_data(body: object, data: dict[str, object]) -> None:
    response = interpret(200, body)
    assert response.ok
    assert response.data == data


def test_a_body_that_is_not_json_is_text_capped() -> None:
    response = interpret(200, b"x" * (TEXT_CAP + 50), content_type="text/plain")
    assert response.ok
    assert response.data == {"text": "x" * TEXT_CAP}


def test_json_that_does_not_parse_is_permanent() -> None:
    response = interpret(201, b"{nope", method="POST")
    assert response.error is not None
    assert response.error.type is ToolErrorType.PERMANENT
    assert response.error.partial_side_effects is True  # a 2xx: the API did it


@pytest.mark.parametrize(
    ("status", "error_type", "retryable"),
    [
        (400, ToolErrorType.VALIDATION, False),
        (422, ToolErrorType.VALIDATION, False),
        (401, ToolErrorType.AUTH, False),
        (403, ToolErrorType.AUTH, False),
        (404, ToolErrorType.NOT_FOUND, False),
        (409, ToolErrorType.CONFLICT, False),
        (429, ToolErrorType.RATE_LIMIT, True),
        (500, ToolErrorType.TRANSIENT, True),
        (502, ToolErrorType.TRANSIENT, True),
        (503, ToolErrorType.TRANSIENT, True),
        (405, ToolErrorType.PERMANENT, False),
        (410, ToolErrorType.PERMANENT, False),
        (302, ToolErrorType.PERMANENT, False),
    ],
)
@pytest.mark.parametrize("method", ["GET", "PATCH"])
def test_status_mapping(
    status: int, error_type: ToolErrorType, retryable: bool, method: str
) -> None:
    response = interpret(status, {"message": "said the API"}, method=method)
    assert response.error is not None
    assert response.error.type is error_type
    assert response.error.retryable is retryable
    refused = 400 <= status < 500
    assert response.error.partial_side_effects is (method != "GET" and not refused)
    assert str(status) in response.error.message
    if status >= 400:
        assert response.error.message.endswith(": said the API")


def test_auth_names_whose_credentials() -> None:
    user = interpret_answer(answer(401), method="GET", service_auth=False)
    service = interpret_answer(answer(403), method="GET", service_auth=True)
    assert user.error is not None
    assert service.error is not None
    assert "the user's credentials" in user.error.message
    assert "service credentials" in service.error.message


def test_a_redirect_elsewhere_says_so() -> None:
    response = interpret(302, redirect_elsewhere=True)
    assert response.error is not None
    assert (
        response.error.message
        == "the API redirected to another host, which HTTP tools never follow"
    )


@pytest.mark.parametrize(
    ("content_type", "body", "message"),
    [
        (JSON, {"message": "start must be on the hour"}, "start must be on the hour"),
        (JSON, {"error": "slot_taken"}, "slot_taken"),
        (JSON, {"error": {"code": 7, "message": "nested"}}, "nested"),
        (
            JSON,
            {"detail": [{"loc": ["body", "start"], "msg": "field required"}]},
            "body.start: field required",
        ),
        (JSON, {"title": "Bad", "detail": "the long one"}, "the long one"),
        (JSON, {"unrelated": 1}, None),
        (JSON, [1, 2], None),
        ("text/plain", b"  plain\n\ttext  ", "plain text"),
        ("text/html", b"<html><body>Oops</body></html>", None),
        (JSON, b"{not json", None),
    ],
)
def test_api_message(content_type: str, body: object, message: str | None) -> None:
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    assert api_message(content_type, raw) == message


def test_api_message_is_capped_and_printable() -> None:
    found = api_message(JSON, orjson.dumps({"message": "a\x00b " + "x" * 1000}))
    assert found is not None
    assert len(found) == MESSAGE_CAP
    assert found.startswith("a b ")
    assert found.endswith("…")


def test_too_large_and_connection_failures() -> None:
    large = too_large(1024, "GET").error
    assert large is not None
    assert large.message == "the API's response is larger than 1024 bytes"
    assert large.partial_side_effects is False
    changed = too_large(1024, "PATCH").error
    assert changed is not None
    assert changed.partial_side_effects is True  # the API may have done it
    unsent = connection_failed(sent=False, method="POST").error
    sent = connection_failed(sent=True, method="POST").error
    read = connection_failed(sent=True, method="GET").error
    assert unsent is not None
    assert sent is not None
    assert read is not None
    assert {unsent.type, sent.type, read.type} == {ToolErrorType.TRANSIENT}
    assert (unsent.retryable, sent.retryable) == (True, True)
    assert (unsent.partial_side_effects, sent.partial_side_effects) == (False, True)
    assert read.partial_side_effects is False


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("3", 3.0),
        (" 0 ", 0.0),
        ("Mon, 07 Jan 2030 12:00:02 GMT", 2.0),
        ("Mon, 07 Jan 2030 11:00:00 GMT", 0.0),  # in the past: no wait
        ("soon", None),
        ("-1", None),
        ("1.5", None),
    ],
)
def test_parse_retry_after(value: str, seconds: float | None) -> None:
    assert parse_retry_after(value, NOW) == seconds


@pytest.mark.parametrize(
    ("method", "status", "header", "wait"),
    [
        ("GET", 429, "1", 1.0),
        ("GET", 503, "2", 2.0),
        ("GET", 500, "1", None),  # only 429 and 503 say "come back later"
        ("GET", 429, None, None),
        ("PATCH", 429, "1", None),  # never repeat a request that may change something
        ("POST", 503, "1", None),
    ],
)
def test_only_a_get_told_when_to_come_back_is_retried(
    method: str, status: int, header: str | None, wait: float | None
) -> None:
    assert retry_wait_s(answer(status, retry_after=header), method, NOW) == wait
