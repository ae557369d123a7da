"""Which pages and Host names may reach the gateway (gateway.security.origins): pure."""

from __future__ import annotations

import pytest

from gateway.security import (
    is_local_origin,
    is_loopback_host_header,
    is_loopback_name,
    origin_allowed,
)


@pytest.mark.parametrize(
    "origin",
    [
        "http://localhost",
        "http://localhost:8080",
        "https://localhost:3000",
        "http://127.0.0.1:8080",
        "http://127.0.0.9",
        "http://[::1]:8080",
        "http://app.localhost:5173",
        "HTTP://LOCALHOST:8080",
    ],
)
def test_pages_of_this_machine_are_local(origin: str) -> None:
    assert is_local_origin(origin)


@pytest.mark.parametrize(
    "origin",
    [
        "https://evil.example",
        "http://evil.example:8080",
        "http://localhost.evil.example",
        "http://127.0.0.1.evil.example",
        "http://10.0.0.5:8080",
        "file://",
        "null",
        "ws://localhost:8080",
        "http://localhost:notaport",
        "http://user@localhost",
        "http://localhost/path",
        "",
    ],
)
def test_other_pages_are_not_local(origin: str) -> None:
    assert not is_local_origin(origin)


@pytest.mark.parametrize(
    "host",
    ["localhost", "localhost:8080", "127.0.0.1:8080", "127.1.2.3", "[::1]:8080", "[::1]"],
)
def test_loopback_host_headers(host: str) -> None:
    assert is_loopback_host_header(host)


@pytest.mark.parametrize(
    "host",
    [
        None,
        "",
        "evil.example:8080",
        "evil.example",
        "192.168.1.10:8080",
        "::1",  # IPv6 without brackets is not a Host header
        "[::1",
        "[::1]x",
        "localhost:80:80",
        "127.0.0.1:abc",
    ],
)
def test_other_host_headers(host: str | None) -> None:
    assert not is_loopback_host_header(host)


def test_loopback_names() -> None:
    assert is_loopback_name("LOCALHOST.")
    assert is_loopback_name("[::1]")
    assert not is_loopback_name("0.0.0.0")


def test_with_auth_off_only_local_or_listed_origins_pass() -> None:
    assert origin_allowed(None, allowed=[], auth_enabled=False)  # not a browser
    assert origin_allowed("http://localhost:8080", allowed=[], auth_enabled=False)
    assert not origin_allowed("https://evil.example", allowed=[], auth_enabled=False)
    listed = ["https://app.example.com"]
    assert origin_allowed("https://app.example.com/", allowed=listed, auth_enabled=False)


def test_with_auth_on_a_list_is_enforced_and_no_list_accepts_any() -> None:
    assert origin_allowed("https://evil.example", allowed=[], auth_enabled=True)
    listed = ["https://app.example.com"]
    assert origin_allowed("https://app.example.com", allowed=listed, auth_enabled=True)
    assert not origin_allowed("https://evil.example", allowed=listed, auth_enabled=True)
    # A listed gateway does not let its own machine's pages in unless they are listed too.
    assert not origin_allowed("http://localhost:8080", allowed=listed, auth_enabled=True)
