"""Build-time checks of an HTTP tool's ``http`` section against its arguments.

The section's shape (types, enums, the ``auth`` forms) is the meta-schema's job
(``registry_build.metaschema.HTTP_SECTION_SCHEMA``); here is what the meta-schema cannot say:
every ``{name}`` placeholder of ``path`` is a declared, required, scalar argument; every
declared argument is sent exactly once (a placeholder, ``query`` or ``body``); no body with
GET or DELETE; a literal path that stays one plain URL path; a deadline (``timeoutMs``); and
environment names that are not the gateway's own settings. Each function returns every problem
it finds, as text for a ``BuildError``; they read the section defensively because a section that
failed the meta-schema is still checked here, so one build reports everything.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from gateway.http_tools.section import DEFAULT_MAX_RESPONSE_BYTES, path_placeholders

__all__ = ["check_http_section", "normalized_http_section"]

_PLACEHOLDER = re.compile(r"\{([^{}]*)\}")
_ARGUMENT_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Outside placeholders: RFC 3986 path characters (pchar and "/"), "%" only as an escape.
_LITERAL_PATH = re.compile(r"^(?:[A-Za-z0-9\-._~!$&'()*+,;=:@/]|%[0-9A-Fa-f]{2})*$")
_PATH_TYPES = frozenset({"string", "integer", "number"})
_QUERY_SCALARS = frozenset({"string", "integer", "number", "boolean"})
_RESERVED_ENV_PREFIX = "GATEWAY_"


def _names(value: Any) -> list[str]:
    """A list of argument names as given, or [] for anything else (the meta-schema says why)."""
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, str)]


def _types(schema: Any) -> set[str]:
    if not isinstance(schema, Mapping):
        return set()
    declared = schema.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        return {t for t in declared if isinstance(t, str)}
    return set()


def _path_problems(path: str) -> list[str]:
    problems: list[str] = []
    literal = _PLACEHOLDER.sub("", path)
    if "{" in literal or "}" in literal:
        problems.append(f"http.path has an unbalanced '{{' or '}}': {path!r}")
    if "?" in literal or "#" in literal:
        problems.append(
            "http.path must not hold a query or a fragment: list query arguments in http.query"
        )
    elif not _LITERAL_PATH.match(literal.replace("{", "").replace("}", "")):
        problems.append(
            f"http.path has characters that are not allowed in a URL path: {path!r} (use %-escapes)"
        )
    segments = path.split("/")[1:]
    if any(segment in (".", "..") for segment in segments):
        problems.append("http.path must not have '.' or '..' segments")
    if any(segment == "" for segment in segments[:-1]):
        problems.append("http.path must not have an empty segment ('//')")
    seen: set[str] = set()
    for name in path_placeholders(path):
        if not _ARGUMENT_NAME.match(name):
            problems.append(f"http.path placeholder {{{name}}} is not an argument name")
        elif name in seen:
            problems.append(f"http.path has the placeholder {{{name}}} twice")
        seen.add(name)
    return problems


def _argument_problems(http: Mapping[str, Any], parameters: Mapping[str, Any]) -> list[str]:
    properties = parameters.get("properties")
    declared: Mapping[str, Any] = properties if isinstance(properties, Mapping) else {}
    required = set(_names(parameters.get("required")))
    path = http.get("path")
    in_path = list(dict.fromkeys(path_placeholders(path))) if isinstance(path, str) else []
    places: dict[str, list[str]] = {}
    for place, names in (
        ("http.path", in_path),
        ("http.query", _names(http.get("query"))),
        ("http.body", _names(http.get("body"))),
    ):
        for name in names:
            places.setdefault(name, []).append(place)
    problems: list[str] = []
    for name, where in places.items():
        if name not in declared:
            problems.append(
                f"{where[0]} names '{name}', which is not a declared argument "
                "(parameters.properties)"
            )
        if len(where) > 1:
            problems.append(f"argument '{name}' is listed twice ({' and '.join(where)})")
    for name in in_path:
        if name not in declared:
            continue
        if name not in required:
            problems.append(f"http.path placeholder {{{name}}} must be a required argument")
        types = _types(declared[name])
        if not types or not types <= _PATH_TYPES:
            problems.append(
                f"http.path placeholder {{{name}}} must be a string, integer or number argument"
            )
    for name in _names(http.get("query")):
        if name not in declared:
            continue
        schema = declared[name]
        types = _types(schema)
        items = _types(schema.get("items")) if isinstance(schema, Mapping) else set()
        scalar = bool(types) and types <= _QUERY_SCALARS
        scalar_list = types == {"array"} and bool(items) and items <= _QUERY_SCALARS
        if not (scalar or scalar_list):
            problems.append(
                f"http.query argument '{name}' must be a string, number, integer or boolean, "
                "or an array of those"
            )
    for name in declared:
        if name not in places:
            problems.append(
                f"argument '{name}' is declared but never sent: list it in http.query or "
                f"http.body, or use it as {{{name}}} in http.path"
            )
    return problems


def _auth_problems(http: Mapping[str, Any]) -> list[str]:
    auth = http.get("auth", "user")
    if auth == "user" or (isinstance(auth, Mapping) and "serviceTokenEnv" in auth):
        return []  # the meta-schema checks the variable's name
    return ['http.auth must be "user" (the default) or {"serviceTokenEnv": "NAME"}']


def _env_problems(http: Mapping[str, Any]) -> list[str]:
    names = {"http.baseUrlEnv": http.get("baseUrlEnv")}
    auth = http.get("auth")
    if isinstance(auth, Mapping):
        names["http.auth.serviceTokenEnv"] = auth.get("serviceTokenEnv")
    problems = [
        f"{field} '{value}' is reserved for the gateway's own settings (GATEWAY_*)"
        for field, value in names.items()
        if isinstance(value, str) and value.startswith(_RESERVED_ENV_PREFIX)
    ]
    values = [value for value in names.values() if isinstance(value, str)]
    if len(values) == 2 and values[0] == values[1]:
        problems.append("http.baseUrlEnv and http.auth.serviceTokenEnv must be different variables")
    return problems


def check_http_section(meta: Mapping[str, Any]) -> list[str]:
    """Every problem of ``meta["http"]`` (a tool's ``schema.json``) beyond the meta-schema."""
    http = meta.get("http")
    if not isinstance(http, Mapping):
        return []  # the meta-schema has said it is not an object
    problems: list[str] = []
    path = http.get("path")
    if isinstance(path, str):
        problems.extend(_path_problems(path))
    parameters = meta.get("parameters")
    if isinstance(parameters, Mapping):
        problems.extend(_argument_problems(http, parameters))
    method = http.get("method")
    if method in ("GET", "DELETE") and _names(http.get("body")):
        problems.append(
            f"http.body is not allowed with {method}: send those arguments in http.query"
        )
    problems.extend(_auth_problems(http))
    problems.extend(_env_problems(http))
    if meta.get("timeoutMs") is None:
        problems.append("an HTTP tool needs timeoutMs: its requests are cancelled at that deadline")
    return problems


def normalized_http_section(http: Mapping[str, Any]) -> dict[str, Any]:
    """The section as the artifact records it: every default made explicit."""
    return {
        "method": http["method"],
        "path": http["path"],
        "query": list(http.get("query", [])),
        "body": list(http.get("body", [])),
        "baseUrlEnv": http["baseUrlEnv"],
        "auth": http.get("auth", "user"),
        "maxResponseBytes": http.get("maxResponseBytes", DEFAULT_MAX_RESPONSE_BYTES),
    }
