"""Where an HTTP tool points, read from the environment at load time (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.http_tools.section import (
    EndpointUnavailable,
    HttpEndpoint,
    HttpToolSection,
    resolve_endpoint,
)

USER = HttpToolSection.from_artifact(
    {"method": "GET", "path": "/v1/x", "baseUrlEnv": "CARE_API_URL"}
)
SERVICE = HttpToolSection.from_artifact(
    {
        "method": "POST",
        "path": "/v1/x",
        "body": [],
        "baseUrlEnv": "CARE_API_URL",
        "auth": {"serviceTokenEnv": "CARE_API_TOKEN"},
    }
)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (None, "CARE_API_URL is not set"),
        ("  ", "CARE_API_URL is not set"),
        ("care-api:8090", "CARE_API_URL is not an absolute http(s) URL"),
        ("/v1", "CARE_API_URL is not an absolute http(s) URL"),
        ("ftp://files.example", "CARE_API_URL is not an absolute http(s) URL"),
        ("http://", "CARE_API_URL is not an absolute http(s) URL"),
        ("http://bob:secret@api.example", "CARE_API_URL must not carry credentials"),
        ("http://api.example/?k=1", "CARE_API_URL must not have a query or a fragment"),
    ],
)
def test_an_unusable_base_url_makes_the_tool_unavailable(value: str | None, reason: str) -> None:
    environ = {} if value is None else {"CARE_API_URL": value}
    found = resolve_endpoint(USER, environ)
    assert isinstance(found, EndpointUnavailable)
    assert found.reason.startswith(reason)
    assert "secret" not in found.reason


@pytest.mark.parametrize(
    ("value", "base"),
    [
        ("http://127.0.0.1:8090", "http://127.0.0.1:8090"),
        ("https://api.example/care/", "https://api.example/care"),
        (" http://api.example/a%2Fb/ ", "http://api.example/a%2Fb"),
    ],
)
def test_a_usable_base_url(value: str, base: str) -> None:
    found = resolve_endpoint(USER, {"CARE_API_URL": value})
    assert isinstance(found, HttpEndpoint)
    assert str(found.base_url) == base
    assert found.service_token is None


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        (None, "CARE_API_TOKEN is not set"),
        ("", "CARE_API_TOKEN is not set"),
        ("two words", "CARE_API_TOKEN does not hold a usable token"),
        ("line\nbreak", "CARE_API_TOKEN does not hold a usable token"),
    ],
)
def test_service_auth_needs_a_usable_token(token: str | None, reason: str) -> None:
    environ = {"CARE_API_URL": "http://api.example"}
    if token is not None:
        environ["CARE_API_TOKEN"] = token
    found = resolve_endpoint(SERVICE, environ)
    assert isinstance(found, EndpointUnavailable)
    assert found.reason.startswith(reason)


def test_the_service_token_is_kept_out_of_repr() -> None:
    found = resolve_endpoint(
        SERVICE, {"CARE_API_URL": "http://api.example", "CARE_API_TOKEN": "s3cr3t-token"}
    )
    assert isinstance(found, HttpEndpoint)
    assert found.service_token == "s3cr3t-token"
    assert "s3cr3t" not in repr(found)
    assert SERVICE.auth == "service"
    assert USER.auth == "user"


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ({"method": "TRACE", "path": "/x", "baseUrlEnv": "A"}, "http.method"),
        ({"method": "GET", "path": "x", "baseUrlEnv": "A"}, "http.path"),
        ({"method": "GET", "path": "/x"}, "http.baseUrlEnv"),
        ({"method": "GET", "path": "/x", "baseUrlEnv": "A", "auth": "anyone"}, "http.auth"),
        ({"method": "GET", "path": "/x", "baseUrlEnv": "A", "query": "q"}, "http.query"),
        (
            {"method": "GET", "path": "/x", "baseUrlEnv": "A", "maxResponseBytes": 10**9},
            "http.maxResponseBytes",
        ),
    ],
)
def test_a_hand_edited_artifact_section_is_refused(raw: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        HttpToolSection.from_artifact(raw)


def test_path_arguments_in_order_once() -> None:
    section = HttpToolSection.from_artifact(
        {"method": "GET", "path": "/v1/{a}/x/{b}", "baseUrlEnv": "A"}
    )
    assert section.path_arguments == ("a", "b")
    assert section.max_response_bytes == 1024 * 1024


@pytest.mark.parametrize("token", ["Q", "1234567", "s3cr3t!"])
def test_a_service_token_shorter_than_8_characters_is_unusable(token: str) -> None:
    """Too short to be a secret, and too short to blank out of an answer without blanking
    ordinary words too: the tool is unavailable rather than run with it."""
    found = resolve_endpoint(
        SERVICE, {"CARE_API_URL": "http://api.example", "CARE_API_TOKEN": f" {token} "}
    )
    assert isinstance(found, EndpointUnavailable)
    assert found.reason == (
        "CARE_API_TOKEN holds a token shorter than 8 characters: too short to be a secret, "
        "and to be blanked out of the API's answers"
    )
    assert token not in found.reason


def test_a_service_token_of_8_characters_is_usable() -> None:
    found = resolve_endpoint(
        SERVICE, {"CARE_API_URL": "http://api.example", "CARE_API_TOKEN": "12345678"}
    )
    assert isinstance(found, HttpEndpoint)
    assert found.service_token == "12345678"
