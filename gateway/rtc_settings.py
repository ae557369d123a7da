"""The WebRTC edges' network settings (``GATEWAY_WEBRTC_*``): ICE servers, a TURN secret for
browsers' credentials, the UDP ports the gateway's side may use, its public address.

Checked here, at start, so a typo stops the gateway with the setting's name instead of a call
that never connects. What each is for, and a deployment: docs/webrtc.md.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Annotated

import orjson
from pydantic import SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

__all__ = ["IceServer", "RtcSettings", "parse_ice_servers", "parse_port_range"]

_SCHEMES = ("stun:", "stuns:", "turn:", "turns:")


@dataclass(frozen=True, slots=True)
class IceServer:
    urls: tuple[str, ...]
    username: str | None = None
    credential: str | None = field(default=None, repr=False)  # never in a log line

    @property
    def is_turn(self) -> bool:
        return any(url.startswith(("turn:", "turns:")) for url in self.urls)

    def as_json(
        self, username: str | None = None, credential: str | None = None
    ) -> dict[str, object]:
        shown: dict[str, object] = {"urls": list(self.urls)}
        username = username if username is not None else self.username
        credential = credential if credential is not None else self.credential
        if username is not None:
            shown["username"] = username
        if credential is not None:
            shown["credential"] = credential
        return shown


def parse_ice_servers(text: str | bytes) -> tuple[IceServer, ...]:
    """``[{"urls": "stun:…" | [...], "username"?, "credential"?}, …]``; ValueError names what
    is wrong (never the credential itself)."""
    try:
        value = orjson.loads(text or b"[]")
    except orjson.JSONDecodeError:
        raise ValueError("must be a JSON list of {urls, username?, credential?}") from None
    if not isinstance(value, list):
        raise ValueError("must be a JSON list of {urls, username?, credential?}")
    servers = []
    for index, entry in enumerate(value):
        where = f"server {index}"
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: must be an object with urls")
        unknown = set(entry) - {"urls", "username", "credential"}
        if unknown:
            raise ValueError(f"{where}: unknown field {sorted(unknown)[0]!r}")
        urls = entry.get("urls")
        urls = [urls] if isinstance(urls, str) else urls
        if not isinstance(urls, list) or not urls or not all(isinstance(u, str) for u in urls):
            raise ValueError(f"{where}: urls must be a URL or a list of them")
        for url in urls:
            if not url.startswith(_SCHEMES) or len(url) <= len(url.split(":", 1)[0]) + 1:
                raise ValueError(f"{where}: {url!r} is not a stun:, stuns:, turn: or turns: URL")
        username, credential = entry.get("username"), entry.get("credential")
        for name, given in (("username", username), ("credential", credential)):
            if given is not None and (not isinstance(given, str) or not given):
                raise ValueError(f"{where}: {name} must be a non-empty string")
        server = IceServer(tuple(urls), username, credential)
        if not server.is_turn and (username or credential):
            raise ValueError(f"{where}: only TURN servers take a username and credential")
        if (username is None) != (credential is None):
            raise ValueError(f"{where}: give both username and credential, or neither")
        servers.append(server)
    return tuple(servers)


def parse_port_range(text: str) -> tuple[int, int] | None:
    """``"LOW-HIGH"`` (inclusive, 1024–65535, at least 2 ports); empty means any port."""
    text = text.strip()
    if not text:
        return None
    low_text, dash, high_text = text.partition("-")
    try:
        low, high = int(low_text), int(high_text)
    except ValueError:
        raise ValueError('must be "LOW-HIGH", e.g. "50000-50999"') from None
    if not dash or not 1024 <= low < high <= 65535:
        raise ValueError('must be "LOW-HIGH" with 1024 <= LOW < HIGH <= 65535')
    return low, high


class RtcSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="GATEWAY_", extra="ignore", case_sensitive=False, populate_by_name=True
    )

    # JSON, as a browser's RTCPeerConnection takes it: [{"urls": "stun:…"}, {"urls": "turn:…",
    # "username": …, "credential": …}]. Used by the gateway's side and handed to browsers.
    webrtc_ice_servers: Annotated[tuple[IceServer, ...], NoDecode] = ()
    # coturn's use-auth-secret: each browser gets its own TURN credentials, valid for
    # webrtc_turn_ttl_s, for the TURN servers listed without a username.
    webrtc_turn_secret: SecretStr | None = None
    webrtc_turn_ttl_s: int = 3600
    # "LOW-HIGH": the UDP ports the gateway's ICE candidates bind to (one per peer connection).
    webrtc_udp_ports: Annotated[tuple[int, int] | None, NoDecode] = None
    # The address browsers reach this machine at, behind a 1:1 NAT (a cloud instance's public
    # IP): announced in place of the host candidates' private addresses.
    webrtc_public_ip: str | None = None
    # A peer connection not connected within this many seconds of the answer is given up.
    webrtc_connect_timeout_s: float = 15.0

    @field_validator("webrtc_ice_servers", mode="before")
    @classmethod
    def _servers(cls, value: object) -> object:
        if isinstance(value, str | bytes):
            return parse_ice_servers(value)
        return value

    @field_validator("webrtc_udp_ports", mode="before")
    @classmethod
    def _ports(cls, value: object) -> object:
        if isinstance(value, str):
            return parse_port_range(value)
        return value

    @field_validator("webrtc_public_ip")
    @classmethod
    def _an_address(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        try:
            return str(ipaddress.ip_address(value.strip()))
        except ValueError:
            raise ValueError(
                "must be an IP address (the one browsers reach this machine at)"
            ) from None

    @field_validator("webrtc_turn_ttl_s")
    @classmethod
    def _ttl(cls, value: int) -> int:
        if not 60 <= value <= 7 * 24 * 3600:
            raise ValueError("must be between 60 s and a week")
        return value

    @field_validator("webrtc_connect_timeout_s")
    @classmethod
    def _timeout(cls, value: float) -> float:
        if not 1 <= value <= 120:
            raise ValueError("must be between 1 and 120 seconds")
        return value
