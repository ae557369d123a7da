"""What the fake chat-completions API rejects, as the real one does: a 400 with the message that
names the mistake (a missing model, a bad role, a tool call left unanswered or answered twice…).
These checks catch the gateway's own mistakes in building the history. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["ROLES", "message_text", "validate"]

ROLES = ("system", "developer", "user", "assistant", "tool")

_EMPTY = "Invalid '{}': empty array. Expected an array with minimum length 1."
_MISSING = "Missing required parameter: '{}'."
_ONLY_WITH = "Invalid value for '{}': it is only allowed when '{}' is {}."
_WRONG_TYPE = "Invalid type for '{}': expected {}."
_WRONG_VALUE = "Invalid value for '{}': {!r}. Supported values are: {}."


def validate(body: Mapping[str, Any]) -> str | None:
    """What the real API would reject this body for (its 400 message), or None."""
    model, messages = body.get("model"), body.get("messages")
    if not isinstance(model, str) or not model:
        return "you must provide a model parameter"
    if messages is None:
        return _MISSING.format("messages")
    if not isinstance(messages, list):
        return _WRONG_TYPE.format("messages", "an array of objects")
    if not messages:
        return _EMPTY.format("messages")
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if not isinstance(message, dict):
            return _WRONG_TYPE.format(f"messages[{i}]", "an object")
        if role not in ROLES:
            supported = ", ".join(repr(r) for r in ROLES)
            return _WRONG_VALUE.format(f"messages[{i}].role", role, supported)
        if role != "assistant" and not isinstance(message.get("content"), str | list):
            return _WRONG_TYPE.format(f"messages[{i}].content", "a string or an array")
    return _validate_options(body, messages) or _validate_pairing(messages)


def function_names(tools: Any) -> tuple[str, ...]:
    """The names of a request's function tools, in order (validated ones)."""
    return tuple(
        tool["function"]["name"]
        for tool in tools
        if isinstance(tool, dict) and isinstance(tool.get("function"), dict)
    )


def _validate_options(body: Mapping[str, Any], messages: list[dict[str, Any]]) -> str | None:
    tools, choice = body.get("tools"), body.get("tool_choice")
    response_format = body.get("response_format")
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    if tools is not None and not isinstance(tools, list):
        return _WRONG_TYPE.format("tools", "an array")
    if tools is not None and not tools:
        return _EMPTY.format("tools")
    for i, tool in enumerate(tools or ()):
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            return _MISSING.format(f"tools[{i}].function.name")
    if choice is not None and tools is None:
        return _ONLY_WITH.format("tool_choice", "tools", "given")
    if isinstance(choice, str) and choice not in ("auto", "none", "required"):
        return _WRONG_VALUE.format("tool_choice", choice, "'none', 'auto', 'required'")
    if isinstance(choice, dict):
        function = choice.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        if choice.get("type") != "function" or not isinstance(name, str):
            return _MISSING.format("tool_choice.function.name")
        if name not in function_names(tools or ()):
            return f"Invalid value for 'tool_choice': no function named '{name}' in 'tools'."
    if body.get("stream_options") is not None and not body.get("stream"):
        return _ONLY_WITH.format("stream_options", "stream", "true")
    if response_format is not None and kind not in ("text", "json_object", "json_schema"):
        supported = "'text', 'json_object', 'json_schema'"
        return _WRONG_VALUE.format("response_format.type", kind, supported)
    if kind == "json_object" and not any("json" in message_text(m).lower() for m in messages):
        return (
            "'messages' must contain the word 'json' in some form, to use 'response_format' "
            "of type 'json_object'."
        )
    return None


def _validate_pairing(messages: list[dict[str, Any]]) -> str | None:
    """Each assistant ``tool_calls`` is answered at once, one ``tool`` message per id."""
    open_ids: list[str] | None = None  # the calls of the assistant message the tools answer
    answered: set[str] = set()
    for i, message in enumerate(messages):
        if message["role"] == "tool":
            call_id = message.get("tool_call_id")
            if not isinstance(call_id, str) or not call_id:
                return _MISSING.format(f"messages[{i}].tool_call_id")
            if open_ids is None or call_id not in open_ids:
                return (
                    f"Invalid parameter: messages with role 'tool' must be a response to a "
                    f"preceding message with 'tool_calls' (messages[{i}].tool_call_id "
                    f"{call_id!r} answers none of them)."
                )
            if call_id in answered:
                return f"Invalid 'messages[{i}]': tool_call_id {call_id!r} is answered twice."
            answered.add(call_id)
            continue
        if problem := _unanswered(open_ids, answered):
            return problem
        open_ids, answered = None, set()
        if message["role"] == "assistant" and message.get("tool_calls") is not None:
            calls = message["tool_calls"]
            if not isinstance(calls, list) or not calls:
                return _EMPTY.format(f"messages[{i}].tool_calls")
            open_ids = []
            for j, call in enumerate(calls):
                where = f"messages[{i}].tool_calls[{j}]"
                function = call.get("function") if isinstance(call, dict) else None
                if not isinstance(call, dict) or not isinstance(call.get("id"), str):
                    return _MISSING.format(f"{where}.id")
                if not isinstance(function, dict) or not isinstance(function.get("name"), str):
                    return _MISSING.format(f"{where}.function.name")
                if not isinstance(function.get("arguments"), str):
                    return _WRONG_TYPE.format(f"{where}.function.arguments", "a string")
                open_ids.append(call["id"])
    return _unanswered(open_ids, answered)


def _unanswered(open_ids: list[str] | None, answered: set[str]) -> str | None:
    missing = [call_id for call_id in open_ids or () if call_id not in answered]
    if not missing:
        return None
    return (
        "An assistant message with 'tool_calls' must be followed by tool messages responding "
        "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        + ", ".join(missing)
    )


# Reading the request ---------------------------------------------------------------------------


def message_text(message: Mapping[str, Any]) -> str:
    """A message's text: a string content, or its ``text`` parts joined."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part["text"]
            for part in content
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""
