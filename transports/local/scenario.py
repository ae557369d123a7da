"""Scripted conversations for the local model: the file format, its loader, and step matching.

A scenario is a list of steps; each step says what input the model expects next and what it
replies. The format (documented with an example in ``README.md``)::

    {"name": "...",
     "steps": [{"expect": {"text": "..."} | {"text_regex": "..."} | {"utterance": true}
                          | {"tool_results": ["NAME", ...]},
                "reply": {"say": "...", "delay_ms": 0}
                       | {"tools": [{"name": "...", "arguments": {...},
                                     "with_confirmation": false, "call_id": "..."}]}}]}

Loading validates everything up front and raises ``ScenarioError`` naming the faulty field, so a
broken script fails when it is loaded, not in the middle of a test.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from transports.base import TransportError

__all__ = [
    "ExpectText",
    "ExpectTextRegex",
    "ExpectToolResults",
    "ExpectUtterance",
    "Expectation",
    "Scenario",
    "ScenarioError",
    "ScenarioInput",
    "ScenarioStep",
    "ScriptedCall",
    "TextInput",
    "ToolResultsInput",
    "UtteranceInput",
    "describe_expectation",
    "describe_input",
    "expectation_matches",
]


class ScenarioError(TransportError, ValueError):
    """A scenario file that does not follow the format."""


# What the model may receive, as far as a scenario cares.
@dataclass(frozen=True, slots=True)
class TextInput:
    text: str


@dataclass(frozen=True, slots=True)
class UtteranceInput:
    transcript: str


@dataclass(frozen=True, slots=True)
class ToolResultsInput:
    names: tuple[str, ...]  # in call order


ScenarioInput = TextInput | UtteranceInput | ToolResultsInput


@dataclass(frozen=True, slots=True)
class ExpectText:
    text: str


@dataclass(frozen=True, slots=True)
class ExpectTextRegex:
    pattern: re.Pattern[str]


@dataclass(frozen=True, slots=True)
class ExpectUtterance:
    pass


@dataclass(frozen=True, slots=True)
class ExpectToolResults:
    names: tuple[str, ...]


Expectation = ExpectText | ExpectTextRegex | ExpectUtterance | ExpectToolResults


@dataclass(frozen=True, slots=True)
class ScriptedCall:
    name: str
    arguments: str  # compact JSON text of the step's ``arguments`` object
    # Add the ``confirmation_id`` of the last CONFIRMATION_REQUIRED result for this tool.
    with_confirmation: bool = False
    # The call's id as given (tests of an upstream that reuses ids); None: the model numbers it.
    call_id: str | None = None


@dataclass(frozen=True, slots=True)
class ScenarioStep:
    expect: Expectation
    say: str | None  # exactly one of ``say`` and ``calls`` is set
    calls: tuple[ScriptedCall, ...] = ()
    delay_ms: int = 0


@dataclass(frozen=True, slots=True)
class Scenario:
    name: str
    steps: tuple[ScenarioStep, ...]

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Scenario:
        try:
            data = orjson.loads(Path(path).read_bytes())
        except (OSError, orjson.JSONDecodeError) as exc:
            raise ScenarioError(f"{path}: cannot read the scenario: {exc}") from exc
        return cls.from_dict(data, source=str(path))

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "scenario") -> Scenario:
        root = _object(data, source)
        name = root.get("name", "")
        if not isinstance(name, str):
            raise ScenarioError(f"{source}: 'name' must be a string")
        steps = root.get("steps")
        if not isinstance(steps, list) or not steps:
            raise ScenarioError(f"{source}: 'steps' must be a non-empty list")
        parsed = tuple(_step(item, f"{source}: steps[{i}]") for i, item in enumerate(steps))
        return cls(name=name, steps=parsed)


def expectation_matches(expect: Expectation, given: ScenarioInput) -> bool:
    match expect, given:
        case ExpectText(text), TextInput(actual):
            return actual == text
        case ExpectTextRegex(pattern), TextInput(actual):
            return pattern.search(actual) is not None
        case ExpectUtterance(), UtteranceInput():
            return True
        case ExpectToolResults(names), ToolResultsInput(actual_names):
            return actual_names == names
    return False


def describe_expectation(expect: Expectation) -> str:
    match expect:
        case ExpectText(text):
            return f"text {text!r}"
        case ExpectTextRegex(pattern):
            return f"text matching {pattern.pattern!r}"
        case ExpectUtterance():
            return "an utterance"
        case ExpectToolResults(names):
            return f"tool results [{', '.join(names)}]"


def describe_input(given: ScenarioInput) -> str:
    match given:
        case TextInput(text):
            return f"text {text!r}"
        case UtteranceInput(transcript):
            return f"an utterance ({transcript})"
        case ToolResultsInput(names):
            return f"tool results [{', '.join(names)}]"


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise ScenarioError(f"{where}: expected a JSON object")
    return value


def _step(item: Any, where: str) -> ScenarioStep:
    step = _object(item, where)
    expect = _expectation(_object(step.get("expect"), f"{where}.expect"), f"{where}.expect")
    reply = _object(step.get("reply"), f"{where}.reply")
    delay_ms = reply.get("delay_ms", 0)
    if not isinstance(delay_ms, int) or isinstance(delay_ms, bool) or delay_ms < 0:
        raise ScenarioError(f"{where}.reply.delay_ms: expected a non-negative integer")
    if ("say" in reply) == ("tools" in reply):
        raise ScenarioError(f"{where}.reply: expected exactly one of 'say' and 'tools'")
    if "say" in reply:
        if not isinstance(reply["say"], str):
            raise ScenarioError(f"{where}.reply.say: expected a string")
        return ScenarioStep(expect=expect, say=reply["say"], delay_ms=delay_ms)
    if delay_ms:
        raise ScenarioError(f"{where}.reply.delay_ms: only a 'say' reply can be delayed")
    calls = reply["tools"]
    if not isinstance(calls, list) or not calls:
        raise ScenarioError(f"{where}.reply.tools: expected a non-empty list")
    scripted = tuple(_call(call, f"{where}.reply.tools[{i}]") for i, call in enumerate(calls))
    return ScenarioStep(expect=expect, say=None, calls=scripted)


def _expectation(expect: Mapping[str, Any], where: str) -> Expectation:
    if len(expect) != 1:
        raise ScenarioError(
            f"{where}: expected exactly one of 'text', 'text_regex', 'utterance', 'tool_results'"
        )
    (kind, value), *_ = expect.items()
    if kind == "text" and isinstance(value, str):
        return ExpectText(value)
    if kind == "text_regex" and isinstance(value, str):
        try:
            return ExpectTextRegex(re.compile(value))
        except re.error as exc:
            raise ScenarioError(f"{where}.text_regex: invalid regular expression: {exc}") from exc
    if kind == "utterance" and value is True:
        return ExpectUtterance()
    if (
        kind == "tool_results"
        and isinstance(value, list)
        and value
        and all(isinstance(name, str) for name in value)
    ):
        return ExpectToolResults(tuple(value))
    raise ScenarioError(f"{where}.{kind}: unexpected key or value")


def _call(item: Any, where: str) -> ScriptedCall:
    call = _object(item, where)
    name = call.get("name")
    if not isinstance(name, str) or not name:
        raise ScenarioError(f"{where}.name: expected a non-empty string")
    arguments = _object(call.get("arguments", {}), f"{where}.arguments")
    with_confirmation = call.get("with_confirmation", False)
    if not isinstance(with_confirmation, bool):
        raise ScenarioError(f"{where}.with_confirmation: expected a boolean")
    call_id = call.get("call_id")
    if call_id is not None and (not isinstance(call_id, str) or not call_id):
        raise ScenarioError(f"{where}.call_id: expected a non-empty string")
    return ScriptedCall(name, orjson.dumps(arguments).decode(), with_confirmation, call_id)
