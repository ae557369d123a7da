"""``python -m gateway chat``: a small terminal client of the client protocol (text mode).

Each input line is sent as ``text.send`` and the client waits for the assistant's answer before
reading the next one, so piped input works as a script. Lines handled here, not sent:

    /approve [ID] [{json}]   approve a confirmation (the latest one by default), optionally
                             with modified arguments
    /reject [ID]             reject it
    /quit                    end the session

Anything else, including the local model's directives (``/tool NAME {json}``, ``/say …``), goes
to the model. ``render`` (pure) turns one server event into the lines to print.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

import aiohttp

__all__ = ["ChatState", "parse_command", "render", "run_chat"]

# How long to wait for an answer before giving the prompt back.
ANSWER_TIMEOUT_S = 60.0


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


@dataclass(slots=True)
class ChatState:
    """What the client remembers between events: open confirmations, tool-only responses."""

    confirmations: list[str] = field(default_factory=list)
    tool_responses: set[str] = field(default_factory=set)
    current_response: str | None = None
    streamed: bool = False


def render(event: dict[str, Any], state: ChatState) -> tuple[str, bool]:
    """The text to print for ``event`` (exactly; streamed deltas have no newline), and whether
    the answer the user waits for is complete."""
    kind = event.get("type")
    if kind == "session.started":
        tools = ", ".join(t["name"] for t in event.get("tools", []))
        return _lines(
            f"connected: session {event['session_id']} ({event['mode']}, {event['provider']}, "
            f"registry {event['registry_version']})",
            f"tools: {tools or 'none'}",
        ), True
    if kind == "response.started":
        state.current_response = event["response_id"]
        state.streamed = False
        return "", False
    if kind == "text.delta" or (kind == "transcript.delta" and event.get("role") == "assistant"):
        prefix = "" if state.streamed else "assistant> "
        state.streamed = True
        return prefix + event["delta"], False
    if kind == "tool.started":
        if state.current_response:
            state.tool_responses.add(state.current_response)
        return _lines(f"  [tool] {event['name']} {_compact(event.get('arguments', {}))}"), False
    if kind == "tool.finished":
        took = f"{event.get('duration_ms', 0)} ms"
        if event.get("ok"):
            return _lines(
                f"  [tool ok] {event['name']} ({took}) -> {_compact(event.get('data'))}"
            ), False
        error = event.get("error") or {}
        label = "needs confirmation" if error.get("type") == "CONFIRMATION_REQUIRED" else "failed"
        return _lines(
            f"  [tool {label}] {event['name']}: {error.get('type')}: {error.get('message')}"
        ), False
    if kind == "confirmation.requested":
        state.confirmations.append(event["confirmation_id"])
        return _lines(
            f"  [confirm] {event['prompt']}",
            f"  ({event['sensitivity']}; id {event['confirmation_id']}; type /approve or /reject)",
        ), False
    if kind == "confirmation.resolved":
        with contextlib.suppress(ValueError):
            state.confirmations.remove(event["confirmation_id"])
        return _lines(f"  [confirmation {event['decision']}] {event['confirmation_id']}"), False
    if kind == "response.done":
        response_id = event.get("response_id")
        text = "\n" if state.streamed else ""
        state.streamed = False
        if response_id in state.tool_responses:
            state.tool_responses.discard(response_id)
            return text, False  # the model answers once the tools are done
        if not text and event.get("text"):
            text = _lines(f"assistant> {event['text']}")
        if event.get("status") not in (None, "completed"):
            text += _lines(f"  (response {event['status']})")
        return text, True
    if kind == "error":
        where = f" (event {event['event_id']})" if event.get("event_id") else ""
        # The event the user sent is answered by this error, except a model error in the middle
        # of a response, whose response.done follows.
        return _lines(f"  [error] {event['code']}: {event['message']}{where}"), (
            event.get("code") != "upstream_error" or bool(event.get("fatal"))
        )
    if kind == "session.ended":
        detail = f": {event['detail']}" if event.get("detail") else ""
        return _lines(f"session ended ({event['reason']}){detail}"), True
    return "", False


def _lines(*lines: str) -> str:
    return "".join(line + "\n" for line in lines)


def parse_command(line: str, state: ChatState) -> dict[str, Any] | str | None:
    """A client command as the event to send, an error text, or None for a message to send."""
    word, _, rest = line.strip().partition(" ")
    if word not in ("/approve", "/reject"):
        return None
    rest = rest.strip()
    confirmation_id = state.confirmations[-1] if state.confirmations else None
    if rest and not rest.startswith(("{", "[")):
        confirmation_id, _, rest = rest.partition(" ")
        rest = rest.strip()
    if confirmation_id is None:
        return "no confirmation is waiting"
    event: dict[str, Any] = {
        "type": "confirmation.respond",
        "confirmation_id": confirmation_id,
        "decision": "approve" if word == "/approve" else "reject",
    }
    if rest:
        try:
            parameters = json.loads(rest)
        except json.JSONDecodeError as exc:
            return f"modified arguments are not JSON: {exc.msg}"
        if not isinstance(parameters, dict):
            return "modified arguments must be a JSON object"
        event["parameters"] = parameters
    return event


@dataclass(slots=True)
class _Chat:
    ws: aiohttp.ClientWebSocketResponse
    out: TextIO
    state: ChatState = field(default_factory=ChatState)
    answered: asyncio.Event = field(default_factory=asyncio.Event)
    ended: bool = False
    end_reason: str | None = None

    def print(self, text: str) -> None:
        if not text:
            return
        try:
            self.out.write(text)
            self.out.flush()
        except OSError:  # nobody reads our output any more (a closed pipe): stop chatting
            self.ended = True
            self.answered.set()

    async def read_events(self) -> None:
        async for msg in self.ws:
            if msg.type != aiohttp.WSMsgType.TEXT:
                continue  # assistant audio is not played by this client
            try:
                event = json.loads(msg.data)
                text, done = render(event, self.state)
            except (ValueError, KeyError, TypeError, AttributeError):
                self.print(f"  [chat] unreadable event from the gateway: {msg.data[:200]!r}\n")
                continue
            self.print(text)
            if event.get("type") == "session.ended":
                self.ended = True
                self.end_reason = str(event.get("reason"))
            if done:
                self.answered.set()
        self.ended = True
        self.answered.set()

    async def exchange(self, event: dict[str, Any]) -> None:
        if self.ended:
            return
        self.answered.clear()
        try:
            await self.ws.send_str(json.dumps(event))
        except (ConnectionError, aiohttp.ClientError):
            self.ended = True
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.answered.wait(), ANSWER_TIMEOUT_S)


async def run_chat(
    url: str,
    token: str | None,
    *,
    read_line: Callable[[], str],
    out: TextIO = sys.stdout,
    mode: str = "text",
) -> int:
    """Chat until end of input, ``/quit`` or the end of the session; the exit code."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as http:
        try:
            ws = await http.ws_connect(url, headers=headers)
        except aiohttp.WSServerHandshakeError as exc:
            print(f"chat: the gateway refused the connection (HTTP {exc.status})", file=out)
            return 2
        except aiohttp.ClientError as exc:
            print(f"chat: cannot connect to {url}: {exc}", file=out)
            return 2
        async with ws:
            chat = _Chat(ws, out)
            reader = asyncio.create_task(chat.read_events())
            await chat.exchange({"type": "session.start", "mode": mode})
            loop = asyncio.get_running_loop()
            while not chat.ended:
                line = await loop.run_in_executor(None, read_line)
                if not line:
                    break  # end of input
                line = line.rstrip("\n")
                if not line.strip():
                    continue
                if line.strip() == "/quit":
                    break
                command = parse_command(line, chat.state)
                if isinstance(command, str):
                    chat.print(f"  [chat] {command}\n")
                    continue
                await chat.exchange(command or {"type": "text.send", "text": line})
            if not chat.ended:
                await chat.exchange({"type": "session.end", "reason": "chat client quit"})
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
    # 0 when the session ended as sessions should (the user, or an intent); 1 otherwise.
    return 0 if chat.end_reason in (None, "client", "intent") else 1
