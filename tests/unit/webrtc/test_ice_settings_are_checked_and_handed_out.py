"""GATEWAY_WEBRTC_*: checked at start with the setting's name; what browsers are handed (TURN
credentials minted per user, coturn's REST formula); the public address announced."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from pydantic import ValidationError

from gateway.config import Settings, describe_invalid_settings
from gateway.edges.rtc.ice import announce_public_ip, browser_ice_servers, turn_credentials
from gateway.rtc_settings import IceServer, parse_ice_servers, parse_port_range

STUN = '{"urls": "stun:stun.example.org:3478"}'
TURN = (
    '{"urls": ["turn:turn.example.org:3478?transport=udp"], "username": "u", '
    '"credential": "pw-9f3k"}'
)


def test_ice_servers_are_read_as_a_browser_takes_them() -> None:
    servers = parse_ice_servers(f"[{STUN}, {TURN}]")
    assert servers == (
        IceServer(("stun:stun.example.org:3478",)),
        IceServer(("turn:turn.example.org:3478?transport=udp",), "u", "pw-9f3k"),
    )
    assert not servers[0].is_turn
    assert servers[1].is_turn
    assert "pw-9f3k" not in repr(servers[1])  # a credential never reaches a log line
    assert parse_ice_servers("") == ()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{", "JSON list"),
        ('{"urls": "stun:x"}', "JSON list"),
        ('["stun:x"]', "server 0: must be an object"),
        ('[{"url": "stun:x"}]', "unknown field 'url'"),
        ('[{"urls": []}]', "urls must be"),
        ('[{"urls": "http://x"}]', "not a stun:"),
        ('[{"urls": "stun:"}]', "not a stun:"),
        ('[{"urls": "stun:x", "username": "u", "credential": "c"}]', "only TURN"),
        ('[{"urls": "turn:x", "username": "u"}]', "both username and credential"),
        ('[{"urls": "turn:x", "username": "", "credential": "c"}]', "non-empty"),
    ],
)
def test_a_bad_ice_server_list_says_what_is_wrong(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_ice_servers(text)


def test_a_port_range_is_low_dash_high() -> None:
    assert parse_port_range("50000-50999") == (50000, 50999)
    assert parse_port_range(" ") is None
    for bad in ("50000", "a-b", "500-600", "6000-5000", "60000-70000", "50000-50000"):
        with pytest.raises(ValueError, match="LOW-HIGH"):
            parse_port_range(bad)


def test_settings_name_the_variable_and_never_the_value(monkeypatch: pytest.MonkeyPatch) -> None:
    bad = '[{"urls": "turn:x", "username": "u", "credential": "hunter2", "extra": 1}]'
    with pytest.raises(ValidationError) as raised:
        Settings(auth="none", webrtc_ice_servers=bad)  # type: ignore[arg-type]
    described = describe_invalid_settings(raised.value)
    assert "GATEWAY_WEBRTC_ICE_SERVERS" in described
    assert "hunter2" not in described
    with pytest.raises(ValidationError, match="must be an IP address"):
        Settings(auth="none", webrtc_public_ip="not-an-ip")
    with pytest.raises(ValidationError, match="LOW-HIGH"):
        Settings(auth="none", webrtc_udp_ports="1-2")  # type: ignore[arg-type]
    monkeypatch.setenv("GATEWAY_WEBRTC_UDP_PORTS", "40000-40099")
    monkeypatch.setenv("GATEWAY_WEBRTC_PUBLIC_IP", "203.0.113.7")
    monkeypatch.setenv("GATEWAY_WEBRTC_ICE_SERVERS", f"[{STUN}]")
    settings = Settings(auth="none")
    assert settings.webrtc_udp_ports == (40000, 40099)
    assert settings.webrtc_public_ip == "203.0.113.7"
    assert settings.webrtc_ice_servers[0].urls == ("stun:stun.example.org:3478",)


def test_turn_credentials_follow_coturns_rest_formula() -> None:
    username, credential = turn_credentials("s3cret", "alice", now=1_000_000, ttl_s=3600)
    assert username == "1003600:alice"
    expected = hmac.new(b"s3cret", b"1003600:alice", hashlib.sha1).digest()
    assert credential == base64.b64encode(expected).decode()
    assert turn_credentials("s", "a:b", 0, 60)[0] == "60:a_b"  # a colon would split the name


def test_browsers_get_fresh_turn_credentials_and_no_turn_without_them() -> None:
    servers = parse_ice_servers(f'[{STUN}, {TURN}, {{"urls": "turns:relay.example.org:443"}}]')
    shown = browser_ice_servers(servers, turn_secret="k", user="bob", now=100, ttl_s=600)
    assert shown[0] == {"urls": ["stun:stun.example.org:3478"]}
    assert shown[1]["username"] == "u"  # configured credentials are handed as they are
    assert shown[2]["username"] == "700:bob"
    assert shown[2]["credential"] == turn_credentials("k", "bob", 100, 600)[1]
    without = browser_ice_servers(servers, turn_secret=None, user="bob", now=100, ttl_s=600)
    assert [s["urls"] for s in without] == [shown[0]["urls"], shown[1]["urls"]]


ANSWER = "\r\n".join(
    [
        "v=0",
        "o=- 1 1 IN IP4 0.0.0.0",
        "m=audio 40001 UDP/TLS/RTP/SAVPF 96",
        "c=IN IP4 10.0.0.5",
        "a=candidate:1 1 udp 2130706431 10.0.0.5 40001 typ host",
        "a=candidate:2 1 udp 1694498815 198.51.100.9 40001 typ srflx raddr 10.0.0.5 rport 40001",
        "",
    ]
)


def test_the_public_address_replaces_host_candidates_only() -> None:
    announced = announce_public_ip(ANSWER, "203.0.113.7")
    lines = announced.split("\r\n")
    assert "a=candidate:1 1 udp 2130706431 203.0.113.7 40001 typ host" in lines
    assert "c=IN IP4 203.0.113.7" in lines
    assert any("198.51.100.9 40001 typ srflx" in line for line in lines)  # left as it was
    assert announced.endswith("\r\n")
