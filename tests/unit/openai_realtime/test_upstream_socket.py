"""Where the upstream socket connects: the SDK client's endpoint, headers and proxy."""

from __future__ import annotations

import pytest
from openai import AsyncOpenAI

from transports.openai_realtime.upstream_socket import endpoint, env_proxy


def client(**options: object) -> AsyncOpenAI:
    return AsyncOpenAI(api_key="sk-test", max_retries=0, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "url"),
    [
        ({"websocket_base_url": "ws://127.0.0.1:9/v1"}, "ws://127.0.0.1:9/v1/realtime?model=m"),
        ({"websocket_base_url": "ws://h/v1/?model=x&a=1"}, "ws://h/v1/realtime?a=1&model=m"),
        ({"base_url": "http://127.0.0.1:5/v1/"}, "ws://127.0.0.1:5/v1/realtime?model=m"),
        (
            {"base_url": "https://proxy.example/openai/v1"},
            "wss://proxy.example/openai/v1/realtime?model=m",
        ),
        ({}, "wss://api.openai.com/v1/realtime?model=m"),
    ],
)
def test_the_url_is_the_one_the_sdk_would_connect_to(options: dict[str, object], url: str) -> None:
    assert endpoint(client(**options), "m")[0] == url


def test_the_headers_carry_the_key_and_the_sdk_defaults_it_sends() -> None:
    _, headers = endpoint(client(organization="org_1"), "m")
    assert headers["Authorization"] == "Bearer sk-test"
    assert headers["OpenAI-Organization"] == "org_1"
    assert headers["User-Agent"].startswith("AsyncOpenAI/Python")
    assert "OpenAI-Project" not in headers  # left out by the SDK (Omit), so by us too
    assert all(isinstance(value, str) for value in headers.values())
    assert "OpenAI-Beta" not in headers


def test_the_environment_proxy_is_used_as_websockets_would(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("http_proxy", "https_proxy", "ws_proxy", "wss_proxy", "no_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    assert env_proxy("wss://api.openai.com/v1/realtime") is None
    monkeypatch.setenv("https_proxy", "http://proxy:3128")
    monkeypatch.setenv("http_proxy", "http://plain:8080")
    assert env_proxy("wss://api.openai.com/v1/realtime") == "http://proxy:3128"
    assert env_proxy("ws://h/v1/realtime") == "http://proxy:3128"  # https first, as websockets
    monkeypatch.setenv("no_proxy", "api.openai.com")
    assert env_proxy("wss://api.openai.com/v1/realtime") is None
    monkeypatch.setenv("https_proxy", "socks5h://proxy:1080")  # the SDK's socket takes it
    monkeypatch.delenv("http_proxy")
    assert env_proxy("wss://elsewhere.example/v1/realtime") == "socks5h://proxy:1080"
