"""Tool arguments are measured before anything recursive touches them (arguments.py): pure."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from gateway.toolrun import ArgumentError, arguments_hash, measure_arguments, parse_arguments
from gateway.toolrun.arguments import MAX_BYTES, MAX_DEPTH


def nested(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = [value]
    return value


def test_300_levels_are_refused_as_text_and_as_an_object() -> None:
    deep = {"title": nested(300)}
    with pytest.raises(ArgumentError, match="nested deeper"):
        parse_arguments(deep)  # Gemini hands arguments over as an object
    text = '{"title":' + "[" * 300 + "]" * 300 + "}"
    with pytest.raises(ArgumentError, match="nested deeper"):
        parse_arguments(text)


def test_the_depth_limit_is_exact() -> None:
    parse_arguments({"a": nested(MAX_DEPTH - 1)})  # the object itself is level 1
    with pytest.raises(ArgumentError):
        parse_arguments({"a": nested(MAX_DEPTH)})


def test_deeper_than_orjson_parses_is_a_validation_error_too() -> None:
    text = '{"a":' + "[" * 5000 + "]" * 5000 + "}"
    with pytest.raises(ArgumentError):
        parse_arguments(text)


def test_size_is_bounded_before_parsing_and_for_objects() -> None:
    with pytest.raises(ArgumentError, match="larger than"):
        parse_arguments('{"a":"' + "x" * MAX_BYTES + '"}')
    with pytest.raises(ArgumentError, match="larger than"):
        parse_arguments({"a": ["x"] * (MAX_BYTES // 2)})
    with pytest.raises(ArgumentError, match="larger than"):
        parse_arguments({f"k{i}": i for i in range(MAX_BYTES // 8)})


def test_values_that_are_not_json_are_refused() -> None:
    with pytest.raises(ArgumentError, match="out of range"):
        parse_arguments({"n": 2**70})
    with pytest.raises(ArgumentError, match="not a string"):
        measure_arguments({1: "one"})
    with pytest.raises(ArgumentError, match="not JSON"):
        parse_arguments({"b": b"bytes"})


def test_what_passes_can_be_hashed_and_encoded() -> None:
    args = parse_arguments({"a": nested(MAX_DEPTH - 1), "n": 2**63, "f": 1.5}).args
    assert len(arguments_hash("t", args)) == 32
    assert orjson.loads(orjson.dumps(args)) == args
