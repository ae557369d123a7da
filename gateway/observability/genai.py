"""OpenTelemetry's GenAI semantic conventions, as the gateway's spans carry them (pure).

LLM-observability backends (Langfuse, Arize Phoenix, Datadog, Dash0, …) recognise a model call
and a tool call by these names. The conventions are at Development status and change between
versions (``gen_ai.system`` became ``gen_ai.provider.name`` in 1.37; after 1.41 they left the
core repository for one of their own, with breaking changes), so the gateway follows one
version, ``GENAI_SEMCONV_VERSION``, and its tracer declares that version's schema URL.

- A model's response is a ``chat {model}`` span: ``gen_ai.operation.name`` ``chat``,
  ``gen_ai.provider.name``, ``gen_ai.request.model``, ``gen_ai.response.id``, the usage
  counts and the finish reason.
- A tool call is an ``execute_tool {tool}`` span: ``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
  ``gen_ai.tool.type`` ``function`` (the model names a function, the gateway runs it).
- Every one of them, and the session's span, carries ``gen_ai.conversation.id``: the session id.

Content (``CONTENT_ATTRIBUTES``: what the user said, what the model answered, a call's arguments
and result) is recorded only when the operator turns capture on (``GATEWAY_TRACE_CONTENT``), and
then only as people may already see it: arguments with the tool's ``secretArguments`` blanked,
a result projected through its ``resultAllowlist``, a transcript not while it is suppressed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from gateway.providers import PROVIDERS

__all__ = [
    "CONTENT_ATTRIBUTES",
    "CONVERSATION_ID",
    "FINISH_REASONS",
    "GENAI_SEMCONV_VERSION",
    "INPUT_MESSAGES",
    "INPUT_TOKENS",
    "OPERATION",
    "OUTPUT_MESSAGES",
    "OUTPUT_TOKENS",
    "PROVIDER",
    "REQUEST_MODEL",
    "RESPONSE_ID",
    "SCHEMA_URL",
    "TOOL_CALL_ARGUMENTS",
    "TOOL_CALL_ID",
    "TOOL_CALL_RESULT",
    "TOOL_NAME",
    "TOOL_TYPE",
    "chat_attributes",
    "chat_span_name",
    "content_json",
    "finish_reason",
    "input_messages",
    "output_messages",
    "provider_name",
    "tool_attributes",
    "tool_content",
    "tool_span_name",
]

GENAI_SEMCONV_VERSION = "1.41.0"
SCHEMA_URL = f"https://opentelemetry.io/schemas/{GENAI_SEMCONV_VERSION}"

OPERATION = "gen_ai.operation.name"
PROVIDER = "gen_ai.provider.name"
REQUEST_MODEL = "gen_ai.request.model"
RESPONSE_ID = "gen_ai.response.id"
FINISH_REASONS = "gen_ai.response.finish_reasons"
CONVERSATION_ID = "gen_ai.conversation.id"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
TOOL_NAME = "gen_ai.tool.name"
TOOL_CALL_ID = "gen_ai.tool.call.id"
TOOL_TYPE = "gen_ai.tool.type"
INPUT_MESSAGES = "gen_ai.input.messages"
OUTPUT_MESSAGES = "gen_ai.output.messages"
TOOL_CALL_ARGUMENTS = "gen_ai.tool.call.arguments"
TOOL_CALL_RESULT = "gen_ai.tool.call.result"
CONTENT_ATTRIBUTES = frozenset(
    {INPUT_MESSAGES, OUTPUT_MESSAGES, TOOL_CALL_ARGUMENTS, TOOL_CALL_RESULT}
)

# ``completed`` is ``stop`` (or ``tool_call`` when it called tools); the rest keep their names.
_FINISH = {"completed": "stop", "failed": "error"}


def provider_name(provider: str) -> str:
    """``gen_ai.provider.name`` of a gateway provider: its record's (the conventions'
    well-known value where one applies); one the gateway does not know keeps its own name."""
    record = PROVIDERS.get(provider)
    return provider if record is None else record.genai_name


def chat_span_name(model: str) -> str:
    return f"chat {model}"


def tool_span_name(tool_id: str) -> str:
    return f"execute_tool {tool_id}"


def chat_attributes(
    *, provider: str, model: str, response_id: str, conversation_id: str
) -> dict[str, str]:
    return {
        OPERATION: "chat",
        PROVIDER: provider_name(provider),
        REQUEST_MODEL: model,
        RESPONSE_ID: response_id,
        CONVERSATION_ID: conversation_id,
    }


def tool_attributes(*, tool_id: str, call_id: str, conversation_id: str) -> dict[str, str]:
    return {
        OPERATION: "execute_tool",
        TOOL_NAME: tool_id,
        TOOL_CALL_ID: call_id,
        TOOL_TYPE: "function",
        CONVERSATION_ID: conversation_id,
    }


def finish_reason(status: str, *, called_tools: bool) -> str:
    """A response status (``completed``, ``interrupted``, ``cancelled``, ``failed``) as the
    conventions' finish reason."""
    if status == "completed" and called_tools:
        return "tool_call"
    return _FINISH.get(status, status)


def content_json(value: Any) -> str:
    """A content attribute's value: JSON text (span attributes hold no structures)."""
    return orjson.dumps(value, default=str).decode()


def input_messages(user_text: str) -> str:
    """``gen_ai.input.messages`` of a turn's input: the user's words."""
    return content_json([{"role": "user", "parts": [{"type": "text", "content": user_text}]}])


def output_messages(text: str, reason: str) -> str:
    """``gen_ai.output.messages`` of a response: the words the client received."""
    return content_json(
        [
            {
                "role": "assistant",
                "parts": [{"type": "text", "content": text}],
                "finish_reason": reason,
            }
        ]
    )


def tool_content(
    arguments: Mapping[str, Any] | None, result: Mapping[str, Any] | None
) -> dict[str, str]:
    """The content attributes of a tool call, from what people may see of it (already
    redacted and projected by the caller); a part that is None is left out."""
    content = {}
    if arguments is not None:
        content[TOOL_CALL_ARGUMENTS] = content_json(arguments)
    if result is not None:
        content[TOOL_CALL_RESULT] = content_json(result)
    return content
