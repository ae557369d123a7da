"""A call's arguments → the one HTTP request an HTTP tool sends (pure: no I/O, no event loop).

- Path: each ``{name}`` placeholder becomes the argument's text percent-encoded as *one* path
  segment (``quote(value, safe="")``): ``../../admin`` becomes ``..%2F..%2Fadmin`` and
  ``http://elsewhere/x`` stays inside its segment. A value that is empty, ``.`` or ``..`` would
  name another resource once a server normalises the path, so it is refused (``VALIDATION``).
- The URL is built already encoded (``yarl.URL(..., encoded=True)``), so nothing re-normalises
  it on the way out, and it is checked to keep the base URL's scheme, host, port and path
  prefix; a request that would leave is refused and never sent.
- Query: the ``query`` arguments, in the section's order; an array is the key repeated; a
  boolean is ``true``/``false``; an absent or null argument is left out.
- Body: the ``body`` arguments present, as one JSON object (``None`` when the section has none).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import orjson
from yarl import URL

from gateway.http_tools.section import HttpToolSection
from tools._core import ToolError, ToolErrorType

__all__ = ["PreparedRequest", "fill_path", "prepare_request", "query_pairs"]

_DOT_SEGMENTS = frozenset({".", ".."})
_UNUSABLE_SEGMENTS = _DOT_SEGMENTS | {""}


@dataclass(frozen=True, slots=True)
class PreparedRequest:
    method: str
    url: URL  # encoded, with its query
    body: bytes | None  # a JSON object, or no body


def _text(value: Any) -> str:
    if isinstance(value, bool):  # before int: bool is an int
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    raise ToolError(ToolErrorType.VALIDATION, f"a {type(value).__name__} cannot be sent in a URL")


def fill_path(template: str, arguments: tuple[str, ...], args: Mapping[str, Any]) -> str:
    """The template with each ``{name}`` replaced by its argument as one encoded segment."""
    path = template
    for name in arguments:
        if name not in args or args[name] is None:
            raise ToolError(
                ToolErrorType.VALIDATION, f"argument '{name}' is required (it is part of the URL)"
            )
        text = _text(args[name])
        if text in _UNUSABLE_SEGMENTS:
            raise ToolError(
                ToolErrorType.VALIDATION,
                f"argument '{name}' cannot be empty, '.' or '..' (it is one segment of the "
                "API's URL path)",
            )
        path = path.replace("{" + name + "}", quote(text, safe=""))
    return path


def query_pairs(names: tuple[str, ...], args: Mapping[str, Any]) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for name in names:
        value = args.get(name)
        if value is None:
            continue
        items = value if isinstance(value, list) else [value]
        pairs.extend((name, _text(item)) for item in items if item is not None)
    return pairs


def _same_place(url: URL, base: URL) -> bool:
    """Same scheme, host and port, under the base path, no dot segment to climb out of it."""
    prefix = base.raw_path.rstrip("/") + "/"
    return (
        url.scheme == base.scheme
        and url.host == base.host
        and url.port == base.port
        and url.raw_path.startswith(prefix)
        and not _DOT_SEGMENTS.intersection(url.raw_path[len(prefix) :].split("/"))
    )


def prepare_request(
    section: HttpToolSection, base_url: URL, args: Mapping[str, Any]
) -> PreparedRequest:
    """The request for ``args`` (already validated against the tool's schema).

    Raises ``ToolError``: ``VALIDATION`` for a value that cannot be a path segment,
    ``PERMANENT`` if the URL would leave the base URL (the build makes that impossible: this is
    the last guard, so nothing is sent)."""
    path = fill_path(section.path, section.path_arguments, args)
    url = URL(str(base_url).rstrip("/") + path, encoded=True)
    pairs = query_pairs(section.query, args)
    if pairs:
        url = url.extend_query(pairs)
    if not _same_place(url, base_url):
        raise ToolError(
            ToolErrorType.PERMANENT, "the request would leave the API's base URL; it was not sent"
        )
    body = None
    if section.body:
        body = orjson.dumps({name: args[name] for name in section.body if name in args})
    return PreparedRequest(section.method, url, body)
