"""Project a result through a tool's ``resultAllowlist``: nothing else reaches clients or logs.
And a call's arguments as people may see them: its tool's ``secretArguments`` blanked."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["project", "redact_arguments"]


def redact_arguments(args: Mapping[str, Any] | None, secret_names: Iterable[str]) -> dict[str, Any]:
    """The arguments with each of ``secret_names`` (a tool's ``secretArguments``) replaced."""
    shown = dict(args or {})
    for name in secret_names:
        if name in shown:
            shown[name] = "[redacted]"
    return shown


def project(data: Mapping[str, Any], allowlist: Iterable[str]) -> dict[str, Any]:
    """Keep only the dotted paths listed; a path through a list applies to each element.

    ``project({"a": {"b": 1, "c": 2}}, ["a.b"]) == {"a": {"b": 1}}``, and
    ``project({"r": [{"t": 1, "s": 2}]}, ["r.t"]) == {"r": [{"t": 1}]}``.
    """
    out: dict[str, Any] = {}
    for path in allowlist:
        _merge(out, _pick(data, path.split(".")))
    return out


_MISSING = object()


def _pick(value: Any, parts: list[str]) -> Any:
    if not parts:
        return value
    if isinstance(value, Mapping):
        if parts[0] not in value:
            return {}
        inner = _pick(value[parts[0]], parts[1:])
        return {} if inner is _MISSING else {parts[0]: inner}
    if isinstance(value, list):
        picked = [_pick(item, parts) for item in value]
        if picked and all(p is _MISSING for p in picked):
            return _MISSING
        return [{} if p is _MISSING else p for p in picked]
    return _MISSING  # a path that goes below a scalar selects nothing


def _merge(into: dict[str, Any], picked: Any) -> None:
    if not isinstance(picked, dict):
        return
    for key, value in picked.items():
        if key in into:
            into[key] = _merged(into[key], value)
        else:
            into[key] = value


def _merged(left: Any, right: Any) -> Any:
    if isinstance(left, dict) and isinstance(right, dict):
        out = dict(left)
        _merge(out, right)
        return out
    if isinstance(left, list) and isinstance(right, list) and len(left) == len(right):
        return [_merged(a, b) for a, b in zip(left, right, strict=True)]
    return right
