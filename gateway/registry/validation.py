"""One compiled argument validator per tool, built once at load time.

The registry build only admits ``parameters`` inside the keyword subset Gemini can express, and
every keyword of that subset means the same in JSON Schema draft-07 and 2020-12. So the fast path
compiles the schema to Python code with ``fastjsonschema`` (about 1.5 µs per typical call, against
about 30 µs for ``jsonschema``'s interpreter). A schema outside the subset (a hand-written
artifact) falls back to ``jsonschema``'s 2020-12 validator, so correctness never depends on it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import fastjsonschema
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

from gateway.registry.format import gemini_unsupported_keywords

__all__ = ["ArgumentValidator", "compile_validator"]

_ANNOTATIONS = frozenset({"$schema", "$id", "$comment"})


class ArgumentValidator:
    """``problem(args)`` returns None when valid, else one message naming the field."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        self.fast = not gemini_unsupported_keywords(schema)
        self._check: Callable[[Any], Any] | None = None
        self._slow: Draft202012Validator | None = None
        if self.fast:
            stripped = {k: v for k, v in schema.items() if k not in _ANNOTATIONS}
            self._check = fastjsonschema.compile(stripped)
        else:
            self._slow = Draft202012Validator(schema)

    def problem(self, args: dict[str, Any]) -> str | None:
        if self._check is not None:
            try:
                self._check(args)
            except fastjsonschema.JsonSchemaValueException as exc:
                return _rename_root(exc.message)
            return None
        assert self._slow is not None
        error = best_match(self._slow.iter_errors(args))
        if error is None:
            return None
        where = ".".join(str(p) for p in error.absolute_path)
        return f"arguments.{where}: {error.message}" if where else f"arguments: {error.message}"


def _rename_root(message: str) -> str:
    # fastjsonschema calls the instance "data"; the model knows it as its arguments.
    if message.startswith("data"):
        return "arguments" + message[len("data") :]
    return message


def compile_validator(schema: dict[str, Any]) -> ArgumentValidator:
    return ArgumentValidator(schema)
