"""The fake chat-completions model's mind: a request body in, what to answer out.

Pure (no I/O, no clock): ``decide`` validates the body like the real API does (a 400 that names
the gateway's mistake in building the history), finds the turn, and picks a ``FakeReply``; the
aiohttp shell (``server``) streams it. Theory of operation:

- **Style**: what the request lets the model call tools with. ``native`` (``tools`` given and
  ``tool_choice`` not ``"none"``): ``Calls``, as ``tool_choice`` asks (``required``: every
  reply calls a function, the first one with ``{}`` unless the user's words call one; a named
  function: every reply calls that one; the replies to results too, as the API forces them;
  ``none`` with tools: the user's words are answered, ``You said: <text>``); ``json``
  (``response_format`` ``json_object``): a JSON plan text ``{"toolCalls": [...], "reasoning":
  ...}``; ``inline`` (a system/developer message mentions ``[TOOL_CALL:``): markers written
  into the text; ``none``: text only.
- **Turn**: the user text is the last ``user`` message not starting with ``[TOOL_RESULT:``; the
  results are the ``tool`` messages and ``[TOOL_RESULT:id:status] message`` user messages after
  both it and the last assistant message; rounds so far = assistant messages after the user text.
- **Rules**, in order: results present → ``/chain`` calls again while rounds < N, else
  ``Tool results: NAME=content; …``; the fake's own directives (``/http``, ``/cut``, ``/chain``,
  ``/unsure``, ``/json``, ``/unknown TEXT``: TEXT with a chunk and fields the API reference does
  not list, as providers add them without notice); ``yes``/``confirm`` after a
  ``CONFIRMATION_REQUIRED`` result calls that tool again with ``confirmation_id``; anything else
  goes to a fresh ``LocalBrain``.
- A reply that calls tools in a style that cannot answers the latest results, or
  ``You said: <text>``.

Call ids are ``call_`` + 24 hex digits, fresh per call, so they never repeat across requests.
"""

from __future__ import annotations

import json
import re
import string
import uuid
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from fakes.chat.validation import ROLES, function_names, message_text, validate
from transports.base import ForcedTool, ToolChoice
from transports.chat.inline import MARKER, InlineCall, InlineMarkerFilter
from transports.local.brain import (
    FAIL_MESSAGE,
    CallTools,
    Fail,
    LocalBrain,
    ResponseError,
    ToolOffer,
    compact_json,
    merge_confirmation_id,
)
from transports.local.brain import Say as LocalSay

__all__ = [
    "RESULT_MARKER",
    "ROLES",
    "Calls",
    "Cut",
    "FakeCall",
    "FakeReply",
    "HttpError",
    "Style",
    "Text",
    "decide",
    "error_code",
    "message_text",
    "new_call_id",
    "request_style",
    "validate",
]

RESULT_MARKER = "[TOOL_RESULT:"
# How the chat transport replays tool activity of a conversation it did not hold itself.
EARLIER_ACTIVITY = "Earlier tool activity:"
Style = Literal["native", "json", "inline", "none"]
_CODES = {400: "invalid_request_error", 401: "invalid_api_key", 429: "rate_limit_exceeded"}
_RESULT_LINE = re.compile(r"^\[TOOL_RESULT:([^:\]]*):(success|error)\][ \t]*", re.MULTILINE)
_YES_WORDS = frozenset({"yes", "confirm"})
_TRAILING = string.punctuation + string.whitespace
_UNSURE = 0.4


@dataclass(frozen=True, slots=True)
class FakeCall:
    call_id: str
    name: str
    arguments_text: str  # passed on verbatim (invalid on purpose for ``/badjson``)


@dataclass(frozen=True, slots=True)
class Text:
    text: str
    delay_ms: int = 0  # the shell waits this long before the first chunk
    unannounced: bool = False  # a chunk and fields the API reference does not list (``/unknown``)
    type: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class Calls:
    calls: tuple[FakeCall, ...]
    type: Literal["calls"] = "calls"


@dataclass(frozen=True, slots=True)
class HttpError:
    status: int
    message: str
    code: str
    type: Literal["http_error"] = "http_error"


@dataclass(frozen=True, slots=True)
class Cut:
    """Stream ``text``, then drop the connection: no ``finish_reason``, no ``[DONE]``."""

    text: str
    type: Literal["cut"] = "cut"


FakeReply = Text | Calls | HttpError | Cut


def new_call_id() -> str:
    return "call_" + uuid.uuid4().hex[:24]


def error_code(status: int) -> str:
    return _CODES.get(status, "server_error" if status >= 500 else "invalid_request_error")


def request_style(body: Mapping[str, Any]) -> Style:
    if body.get("tools") and body.get("tool_choice") != "none":
        return "native"
    response_format = body.get("response_format")
    if isinstance(response_format, dict) and response_format.get("type") == "json_object":
        return "json"
    for message in body.get("messages") or ():
        if message.get("role") in ("system", "developer") and MARKER in message_text(message):
            return "inline"
    return "none"


def _is_result(message: Mapping[str, Any]) -> bool:
    role = message.get("role")
    return role == "tool" or (
        role == "user" and message_text(message).lstrip().startswith(RESULT_MARKER)
    )


def _results_of(message: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(call_id, content)`` of a ``tool`` message or of ``[TOOL_RESULT:…]`` lines."""
    if message.get("role") == "tool":
        return [(str(message.get("tool_call_id")), message_text(message))]
    text = message_text(message)
    found = list(_RESULT_LINE.finditer(text))
    return [
        (match.group(1), text[match.end() : ends].strip())
        for match, ends in zip(found, [m.start() for m in found[1:]] + [len(text)], strict=True)
    ]


def _calls_of(message: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """``{call_id: (name, arguments)}`` of an assistant message: native, inline or a plan."""
    calls: dict[str, tuple[str, str]] = {}
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        calls[call.get("id", "")] = (function.get("name", ""), function.get("arguments", ""))
    text = message_text(message)
    marker_filter = InlineMarkerFilter()
    found = marker_filter.feed(text)[1] + marker_filter.finish()[1]
    for item in found:
        if isinstance(item, InlineCall):
            calls[item.call_id] = (item.tool, _json_text(item.parameters))
    try:
        plan = json.loads(text)
    except ValueError:
        plan = None
    planned = plan.get("toolCalls") if isinstance(plan, dict) else None
    for entry in planned if isinstance(planned, list) else ():
        if isinstance(entry, dict) and isinstance(entry.get("id"), str):
            calls[entry["id"]] = (str(entry.get("tool", "")), _json_text(entry.get("parameters")))
    return calls


def _json_text(parameters: Any) -> str:
    return json.dumps({} if parameters is None else parameters, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class _Batch:
    calls: dict[str, tuple[str, str]]  # the assistant's calls: {call_id: (name, arguments)}
    results: list[tuple[str, str]]  # (call_id, content), in order

    def summary(self) -> str:
        parts = []
        for call_id, content in self.results:
            name = self.calls.get(call_id, (call_id, ""))[0]
            parts.append(f"{name}={_compact_if_json(content)}")
        return "Tool results: " + "; ".join(parts)


def _compact_if_json(content: str) -> str:
    try:
        return compact_json(json.loads(content))
    except (ValueError, TypeError):  # not JSON, or JSON orjson cannot write (huge integers)
        return content


@dataclass(frozen=True, slots=True)
class _Turn:
    user_text: str
    rounds: int  # assistant messages after the user text
    results: _Batch | None  # results after the last assistant message and the user text
    before: _Batch | None  # the last results before the user text
    # System text given after the model's last reply, with no new user message (a late tool
    # result, an expired confirmation): the model acknowledges it.
    context: str | None = None

    @classmethod
    def read(cls, messages: Sequence[Mapping[str, Any]]) -> _Turn:
        user_at = next(
            (
                i
                for i in range(len(messages) - 1, -1, -1)
                if messages[i].get("role") == "user" and not _is_result(messages[i])
            ),
            -1,
        )
        assistant_at = max(
            (i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=-1
        )
        start = max(user_at, assistant_at) + 1
        current = [r for m in messages[start:] if _is_result(m) for r in _results_of(m)]
        calls = _calls_of(messages[assistant_at]) if assistant_at >= 0 else {}
        after_user = [
            m for m in messages[user_at + 1 :] if m.get("role") in ("system", "developer")
        ]
        # The user text was acted on already: a reply follows it, or (a conversation replayed
        # to this model after another's failure) the earlier model's tool activity does.
        acted_on = assistant_at > user_at or any(
            message_text(m).startswith(EARLIER_ACTIVITY) for m in after_user
        )
        notes = [
            message_text(m)
            for m in messages[start:]
            if m.get("role") in ("system", "developer")
            and acted_on
            and not message_text(m).startswith(EARLIER_ACTIVITY)
        ]
        return cls(
            user_text=message_text(messages[user_at]).strip() if user_at >= 0 else "",
            rounds=sum(1 for m in messages[user_at + 1 :] if m.get("role") == "assistant"),
            results=_Batch(calls, current) if current and assistant_at >= 0 else None,
            before=_batch_before(messages, user_at),
            context=notes[-1] if notes else None,
        )


def _batch_before(messages: Sequence[Mapping[str, Any]], user_at: int) -> _Batch | None:
    """The results nearest before the user text, with the calls they answer."""
    results: list[tuple[str, str]] = []
    for i in range(user_at - 1, -1, -1):
        message = messages[i]
        if _is_result(message):
            results[:0] = _results_of(message)
        elif message.get("role") == "user":
            break
        elif message.get("role") == "assistant" and results and (calls := _calls_of(message)):
            return _Batch(calls, results)
    return None


# Deciding --------------------------------------------------------------------------------------


def decide(body: Mapping[str, Any], counters: MutableMapping[str, int]) -> FakeReply:
    """What to answer this request; ``counters`` is the server-wide state of ``/http TIMES``."""
    if (problem := validate(body)) is not None:
        return HttpError(400, problem, error_code(400))
    style = request_style(body)
    turn = _Turn.read(body["messages"])
    command, _, rest = turn.user_text.partition(" ")
    rest = rest.strip()
    if turn.results is not None:
        chain = _parse_chain(rest) if command == "/chain" else None
        if chain is not None and turn.rounds < chain[0] and style != "none":
            return _in_style(style, turn, [chain[1:]])
        offer = _offer(body, style)
        if offer is not None and offer.choice not in ("auto", "none") and offer.names:
            forced = offer.choice.name if isinstance(offer.choice, ForcedTool) else offer.names[0]
            return _in_style(style, turn, [(forced, "{}")])
        return Text(turn.results.summary())
    if turn.context is not None:
        return _text_in_style(style, f"Noted: {turn.context}", 0)
    if (own := _own_directive(style, turn, command, rest, counters)) is not None:
        return own
    if _is_yes(turn.user_text) and turn.before is not None:
        again = [
            (name, merge_confirmation_id(arguments, confirmation_id))
            for call_id, content in turn.before.results
            if (confirmation_id := _confirmation_id(content)) is not None
            for name, arguments in [turn.before.calls.get(call_id, ("", ""))]
            if name
        ]
        if again:
            return _in_style(style, turn, again)
    match LocalBrain().reply_to_text(turn.user_text, _offer(body, style)):
        case LocalSay(text=text, delay_ms=delay_ms):
            return _text_in_style(style, text, delay_ms)
        case CallTools(calls=calls):
            return _in_style(style, turn, [(c.name, c.arguments) for c in calls])
        case ResponseError(message=message):
            return HttpError(500, message, error_code(500))
        case Fail():
            return HttpError(500, FAIL_MESSAGE, error_code(500))
    raise AssertionError("unreachable")  # pragma: no cover


def _offer(body: Mapping[str, Any], style: Style) -> ToolOffer | None:
    """The functions offered and ``tool_choice`` (``none``: a reply calls nothing and answers
    the user's words; ``required``: it calls one; a named function: that one), which the model
    follows; None without tools."""
    if body.get("tool_choice") == "none" and body.get("tools"):
        return ToolOffer(function_names(body["tools"]), "none")
    if style != "native":
        return None
    choice: ToolChoice = "auto"
    raw = body.get("tool_choice")
    if raw == "required":
        choice = "required"
    elif isinstance(raw, dict):
        choice = ForcedTool(raw["function"]["name"])
    return ToolOffer(function_names(body["tools"]), choice)


def _own_directive(
    style: Style, turn: _Turn, command: str, rest: str, counters: MutableMapping[str, int]
) -> FakeReply | None:
    match command:
        case "/http":
            return _http(turn.user_text, rest, counters, style)
        case "/cut":
            return Cut(rest)
        case "/chain":
            if (chain := _parse_chain(rest)) is not None:
                return _in_style(style, turn, [chain[1:]])
        case "/unsure" if rest:
            return _in_style(style, turn, [_name_and_arguments(rest)], _UNSURE)
        case "/json" if style == "json":
            return Text(rest)
        case "/unknown":
            return replace(_text_in_style(style, rest, 0), unannounced=True)
    return None


def _http(
    user_text: str, rest: str, counters: MutableMapping[str, int], style: Style
) -> FakeReply | None:
    status, _, rest = rest.partition(" ")
    if not status.isdigit() or not 400 <= int(status) <= 599:
        return None
    times, _, message = rest.strip().partition(" ")
    if not times.isdigit():
        times, message = "", rest.strip()
    if times:
        key = f"http:{user_text}"
        counters[key] = counters.get(key, 0) + 1
        if counters[key] > int(times):
            return _text_in_style(style, f"You said: {user_text}", 0)
    code = int(status)
    return HttpError(code, message or f"fake HTTP {code} error", error_code(code))


def _parse_chain(rest: str) -> tuple[int, str, str] | None:
    count, _, spec = rest.partition(" ")
    if not count.isdigit() or int(count) < 1 or not spec.strip():
        return None
    return (int(count), *_name_and_arguments(spec))


def _name_and_arguments(spec: str) -> tuple[str, str]:
    name, _, arguments = spec.strip().partition(" ")
    return name, arguments.strip() or "{}"


def _is_yes(text: str) -> bool:
    return text.strip().rstrip(_TRAILING).lower() in _YES_WORDS


def _confirmation_id(content: str) -> str | None:
    try:
        envelope = json.loads(content)
    except ValueError:
        return None
    error = envelope.get("error") if isinstance(envelope, dict) else None
    if not isinstance(error, dict) or envelope.get("ok") is not False:
        return None
    confirmation_id = error.get("confirmationId")
    if error.get("type") != "CONFIRMATION_REQUIRED" or not isinstance(confirmation_id, str):
        return None
    return confirmation_id


# Styles ----------------------------------------------------------------------------------------


def _text_in_style(style: Style, text: str, delay_ms: int) -> Text:
    if style == "json":
        return Text(_plan([], text), delay_ms)
    return Text(text, delay_ms)


def _in_style(
    style: Style, turn: _Turn, calls: Sequence[tuple[str, str]], confidence: float = 1.0
) -> FakeReply:
    """Calls ``(name, arguments)`` as the style writes them, with fresh ids."""
    made = [FakeCall(new_call_id(), name, arguments) for name, arguments in calls]
    if style == "native":
        return Calls(tuple(made))
    entries = [
        f'{{"id":{json.dumps(c.call_id)},"tool":{json.dumps(c.name)},'
        f'"parameters":{c.arguments_text},"confidence":{json.dumps(confidence)}}}'
        for c in made
    ]
    if style == "json":
        return Text(_plan(entries, "Calling " + ", ".join(c.name for c in made) + "."))
    if style == "inline":
        return Text("Let me check that. " + " ".join(f"{MARKER}{e}]" for e in entries))
    if turn.before is not None:
        return Text(turn.before.summary())
    return Text(f"You said: {turn.user_text}")


def _plan(entries: Sequence[str], reasoning: str) -> str:
    """The JSON plan; entries are JSON texts, kept verbatim (a ``/badjson`` one is invalid)."""
    return f'{{"toolCalls":[{",".join(entries)}],"reasoning":{json.dumps(reasoning)}}}'
