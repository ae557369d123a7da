"""Arguments → one request (pure, no event loop): path segments, query, body, the origin guard."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from yarl import URL

from gateway.http_tools.request_plan import fill_path, prepare_request, query_pairs
from gateway.http_tools.section import HttpToolSection
from tools._core import ToolError, ToolErrorType

BASE = URL("http://127.0.0.1:8090/api")


def section(path: str = "/v1/appointments/{appointment_id}", **changes: Any) -> HttpToolSection:
    raw: dict[str, Any] = {"method": "GET", "path": path, "baseUrlEnv": "CARE_API_URL"}
    raw.update(changes)
    return HttpToolSection.from_artifact(raw)


@pytest.mark.parametrize(
    ("value", "segment"),
    [
        ("A1001", "A1001"),
        ("../../admin", "..%2F..%2Fadmin"),
        ("http://elsewhere/x", "http%3A%2F%2Felsewhere%2Fx"),
        ("a b?c#d", "a%20b%3Fc%23d"),
        ("%2e%2e", "%252e%252e"),
        ("{other}", "%7Bother%7D"),
        ("é", "%C3%A9"),
        (1001, "1001"),
    ],
)
def test_a_placeholder_is_one_encoded_segment(value: object, segment: str) -> None:
    request = prepare_request(section(), BASE, {"appointment_id": value})
    assert request.url.raw_path == f"/api/v1/appointments/{segment}"
    assert (request.url.scheme, request.url.host, request.url.port) == ("http", "127.0.0.1", 8090)
    assert request.body is None


@pytest.mark.parametrize("value", ["", ".", ".."])
def test_a_segment_that_names_another_resource_is_refused(value: str) -> None:
    with pytest.raises(ToolError) as caught:
        prepare_request(section(), BASE, {"appointment_id": value})
    assert caught.value.type is ToolErrorType.VALIDATION
    assert "appointment_id" in caught.value.message


def test_a_missing_path_argument_is_a_validation_error() -> None:
    with pytest.raises(ToolError, match="'appointment_id' is required"):
        fill_path("/v1/{appointment_id}", ("appointment_id",), {})


def test_query_pairs_keep_order_repeat_lists_and_skip_nulls() -> None:
    pairs = query_pairs(
        ("q", "tags", "on", "limit", "absent", "nothing"),
        {"q": "a&b=c", "tags": ["x", "y"], "on": True, "limit": 5, "nothing": None},
    )
    assert pairs == [("q", "a&b=c"), ("tags", "x"), ("tags", "y"), ("on", "true"), ("limit", "5")]


def test_query_arguments_are_encoded_in_the_url() -> None:
    plan = section("/v1/appointments", query=["from_date", "status"])
    request = prepare_request(plan, BASE, {"from_date": "2030-01-07", "status": "a&b=c d"})
    assert request.url.raw_path == "/api/v1/appointments"
    assert request.url.raw_query_string == "from_date=2030-01-07&status=a%26b%3Dc+d"
    assert request.url.query.getall("status") == ["a&b=c d"]


def test_body_arguments_are_one_json_object_of_those_given() -> None:
    plan = section(method="PATCH", body=["start", "reason"])
    request = prepare_request(plan, BASE, {"appointment_id": "A1", "start": "2030-01-08T09:00Z"})
    assert request.method == "PATCH"
    assert request.body is not None
    assert orjson.loads(request.body) == {"start": "2030-01-08T09:00Z"}


def test_a_base_url_without_a_path_works() -> None:
    request = prepare_request(section(), URL("https://api.example"), {"appointment_id": "A1"})
    assert str(request.url) == "https://api.example/v1/appointments/A1"


@pytest.mark.parametrize(
    "path",
    [
        "@elsewhere.example/x",  # what precedes "@" would become credentials, the host changes
        "/../admin",  # a dot segment climbs out of the base path
        "/v1/./x",
    ],
)
def test_a_url_that_would_leave_the_base_is_refused(path: str) -> None:
    plan = HttpToolSection(
        method="GET",
        path=path,
        path_arguments=(),
        query=(),
        body=(),
        base_url_env="X",
        service_token_env=None,
        max_response_bytes=1024,
    )
    for base in (BASE, URL("http://127.0.0.1:8090")):
        with pytest.raises(ToolError) as caught:
            prepare_request(plan, base, {})
        assert caught.value.type is ToolErrorType.PERMANENT
        assert "it was not sent" in caught.value.message
