"""An HTTP tool's ``http`` section as the runtime knows it, and the endpoint it names.

The build (``registry_build.http_checks``) has checked the section against the tool's arguments
and recorded it with every default explicit; ``HttpToolSection.from_artifact`` only re-reads it
(a hand-edited artifact that does not parse is a ``ValueError``, which the loader reports).

``resolve_endpoint`` reads this process's environment once, when the registry is loaded: the
base URL (``baseUrlEnv``) and, for service auth, the token (``auth.serviceTokenEnv``). When one
is missing or unusable the tool is *unavailable*: it is not offered to the model, and
``python -m gateway check`` prints the reason. Reasons name the variable, never its value.

A service token shorter than ``MIN_SERVICE_TOKEN_CHARS`` is unusable: a secret that short is
guessable, and the executor blanks the token out of the API's answers only from that length on
(blanking a shorter string would mangle ordinary words of the data), so an echo of it would reach
the model, the client and the logs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from yarl import URL

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "HTTP_METHODS",
    "MAX_RESPONSE_BYTES_CAP",
    "MIN_SERVICE_TOKEN_CHARS",
    "EndpointUnavailable",
    "HttpEndpoint",
    "HttpToolSection",
    "is_usable_token",
    "path_placeholders",
    "resolve_endpoint",
]

HttpMethod = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
HTTP_METHODS: tuple[HttpMethod, ...] = ("GET", "POST", "PUT", "PATCH", "DELETE")
DEFAULT_MAX_RESPONSE_BYTES = 1024 * 1024
MAX_RESPONSE_BYTES_CAP = 4 * 1024 * 1024
MIN_SERVICE_TOKEN_CHARS = 8

_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
# What an Authorization header value may hold: visible ASCII, no spaces (RFC 6750 b64token and
# then some); anything else (a newline, a space) is refused rather than sent.
_TOKEN = re.compile(r"[\x21-\x7e]+")


def path_placeholders(path: str) -> list[str]:
    """The ``{name}`` placeholders of a path template, in order (repeats kept)."""
    return _PLACEHOLDER.findall(path)


def is_usable_token(token: str) -> bool:
    return _TOKEN.fullmatch(token) is not None


def _names(raw: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = raw.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"http.{key} must be a list of argument names")
    return tuple(value)


@dataclass(frozen=True, slots=True)
class HttpToolSection:
    method: HttpMethod
    path: str  # the template, e.g. "/v1/appointments/{appointment_id}"
    path_arguments: tuple[str, ...]
    query: tuple[str, ...]
    body: tuple[str, ...]
    base_url_env: str
    service_token_env: str | None  # None: the user's own bearer token
    max_response_bytes: int

    @property
    def auth(self) -> Literal["user", "service"]:
        return "user" if self.service_token_env is None else "service"

    @classmethod
    def from_artifact(cls, raw: Mapping[str, Any]) -> HttpToolSection:
        """The artifact's ``http`` entry; ``ValueError`` naming what is wrong."""
        method = raw.get("method")
        if method not in HTTP_METHODS:
            raise ValueError(f"http.method must be one of {', '.join(HTTP_METHODS)}")
        path = raw.get("path")
        if not isinstance(path, str) or not path.startswith("/"):
            raise ValueError("http.path must be a string starting with '/'")
        base_url_env = raw.get("baseUrlEnv")
        if not isinstance(base_url_env, str) or not base_url_env:
            raise ValueError("http.baseUrlEnv must name an environment variable")
        auth = raw.get("auth", "user")
        if auth == "user":
            service_token_env = None
        elif isinstance(auth, Mapping) and isinstance(auth.get("serviceTokenEnv"), str):
            service_token_env = auth["serviceTokenEnv"]
        else:
            raise ValueError('http.auth must be "user" or {"serviceTokenEnv": NAME}')
        limit = raw.get("maxResponseBytes", DEFAULT_MAX_RESPONSE_BYTES)
        if not isinstance(limit, int) or not 1 <= limit <= MAX_RESPONSE_BYTES_CAP:
            raise ValueError(f"http.maxResponseBytes must be 1..{MAX_RESPONSE_BYTES_CAP}")
        return cls(
            method=method,
            path=path,
            path_arguments=tuple(dict.fromkeys(path_placeholders(path))),
            query=_names(raw, "query"),
            body=_names(raw, "body"),
            base_url_env=base_url_env,
            service_token_env=service_token_env,
            max_response_bytes=limit,
        )


@dataclass(frozen=True, slots=True)
class HttpEndpoint:
    """Where the requests go: an absolute http(s) URL without query, fragment or credentials,
    its path without a trailing ``/``; and the service token, for service auth."""

    base_url: URL
    service_token: str | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class EndpointUnavailable:
    reason: str


def _base_url(name: str, value: str | None) -> URL | EndpointUnavailable:
    if value is None or not value.strip():
        return EndpointUnavailable(f"{name} is not set")
    wrong = EndpointUnavailable(f"{name} is not an absolute http(s) URL")
    try:
        url = URL(value.strip())
    except (ValueError, TypeError):
        return wrong
    if url.scheme not in ("http", "https") or not url.host:
        return wrong
    if url.user is not None or url.password is not None:
        return EndpointUnavailable(f"{name} must not carry credentials (user:password@)")
    if url.query_string or url.fragment:
        return EndpointUnavailable(f"{name} must not have a query or a fragment")
    return url.with_path(url.raw_path.rstrip("/"), encoded=True)


def resolve_endpoint(
    section: HttpToolSection, environ: Mapping[str, str]
) -> HttpEndpoint | EndpointUnavailable:
    """The endpoint the environment gives this section, or why there is none."""
    base = _base_url(section.base_url_env, environ.get(section.base_url_env))
    if isinstance(base, EndpointUnavailable):
        return base
    if section.service_token_env is None:
        return HttpEndpoint(base)
    token = environ.get(section.service_token_env, "").strip()
    if not token:
        return EndpointUnavailable(f"{section.service_token_env} is not set")
    if not is_usable_token(token):
        return EndpointUnavailable(
            f"{section.service_token_env} does not hold a usable token "
            "(visible ASCII characters, no spaces)"
        )
    if len(token) < MIN_SERVICE_TOKEN_CHARS:
        return EndpointUnavailable(
            f"{section.service_token_env} holds a token shorter than {MIN_SERVICE_TOKEN_CHARS} "
            "characters: too short to be a secret, and to be blanked out of the API's answers"
        )
    return HttpEndpoint(base, token)
