"""Type aliases for JSON values as orjson reads and writes them."""

from __future__ import annotations

from typing import TypeAlias

__all__ = ["JsonObject", "JsonScalar", "JsonValue"]

JsonScalar: TypeAlias = str | int | float | bool | None
JsonValue: TypeAlias = "str | int | float | bool | list[JsonValue] | dict[str, JsonValue] | None"
JsonObject: TypeAlias = "dict[str, JsonValue]"
