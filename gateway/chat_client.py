"""``python -m gateway chat``: a small terminal client of the client protocol (text mode).

Each input line is sent as ``text.send`` and the client waits for the assistant's answer before
reading the next one, so piped input works as a script. Lines handled here, not sent:

    /approve [ID] [{json}]   approve a confirmation (the latest one by default), optionally
                             with modified arguments
    /reject [ID]             reject it
    /quit                    end the session

Anything else, including the local model's directives (``/tool NAME {json}``, ``/say …``), goes
to the model. ``render`` (pure) turns one server event into the lines to print.

The session outlives its socket: when the gateway moves it to another node (``session.moving``,
a deploy) the client reconnects to the same URL after the event's ``retry_after_ms`` and resumes
it with the new token; when the socket drops, it does the same at once, then with backoff, for
as long as the resume window lasts.
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
# How long a session can be resumed after its socket is gone (the gateway's default window).
RESUME_WINDOW_S = 30.0


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
    if kind == "session.started" and event.get("resumed"):
        lines = [f"resumed: session {event['session_id']}"]
        recovery = event.get("recovery") or {}
        lost = (recovery.get("lost_turn") or {}).get("text")
        if lost:
            lines.append(f"  [chat] the node serving it stopped: not answered: {lost}")
        for call_id in recovery.get("failed_calls", []):
            lines.append(f"  [chat] tool call {call_id} stopped with that node")
        return _lines(*lines), True
    if kind == "session.started":
        tools = ", ".join(t["name"] for t in event.get("tools", []))
        return _lines(
            f"connected: session {event['session_id']} ({event['mode']}, {event['provider']}, "
            f"registry {event['registry_version']})",
            f"tools: {tools or 'none'}",
        ), True
    if kind == "session.moving":
        return _lines("  [chat] the gateway is moving this session to another node…"), False
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
        where = " (in the background)" if event.get("background") else ""
        return _lines(
            f"  [tool] {event['name']} {_compact(event.get('arguments', {}))}{where}"
        ), False
    if kind == "tool.slow":
        cue = f"; the caller hears a holding {event['cue']}" if event.get("cue") != "none" else ""
        return _lines(f"  [tool slow] {event['name']}: {event['elapsed_ms']} ms{cue}"), False
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
    http: aiohttp.ClientSession
    url: str
    headers: dict[str, str]
    out: TextIO
    mode: str
    ws: aiohttp.ClientWebSocketResponse | None = None
    state: ChatState = field(default_factory=ChatState)
    answered: asyncio.Event = field(default_factory=asyncio.Event)
    live: asyncio.Event = field(default_factory=asyncio.Event)  # a socket to send on
    resume: dict[str, str] | None = None  # session_id and resume_token, once started
    resume_after_s: float = 0.0  # session.moving's retry_after_ms: when to resume
    waiting_for: dict[str, Any] | None = None  # the event whose answer has not come yet
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

    def show(self, event: dict[str, Any]) -> None:
        """Print one server event and keep what a resume needs."""
        text, done = render(event, self.state)
        self.print(text)
        kind = event.get("type")
        if kind == "session.started":
            self.resume = {
                "session_id": str(event["session_id"]),
                "resume_token": str(event["resume_token"]),
            }
            self.mode = str(event.get("mode", self.mode))
        elif kind == "session.updated" and event.get("mode"):
            self.mode = str(event["mode"])
        elif kind == "session.moving" and self.resume is not None:
            self.resume["resume_token"] = str(event["resume_token"])
            self.resume_after_s = max(0.0, float(event.get("retry_after_ms") or 0) / 1000)
            self.live.clear()  # this socket is about to close: wait for the next one
        elif kind == "session.ended":
            self.ended = True
            self.end_reason = str(event.get("reason"))
        if done:
            self.waiting_for = None
            self.answered.set()

    async def read(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        async for msg in ws:
            if msg.type != aiohttp.WSMsgType.TEXT:
                continue  # assistant audio is not played by this client
            try:
                self.show(json.loads(msg.data))
            except (ValueError, KeyError, TypeError, AttributeError):
                self.print(f"  [chat] unreadable event from the gateway: {msg.data[:200]!r}\n")

    async def run(self) -> None:
        """Read the session's sockets one after the other: when one closes before the session
        ended, reconnect and resume."""
        while self.ws is not None:
            await self.read(self.ws)
            self.live.clear()
            if self.ended or self.resume is None or not await self.reconnect():
                break
        self.ended = True
        self.answered.set()
        self.live.set()  # nobody waits for a socket that will not come

    async def reconnect(self) -> bool:
        """Resume on a new socket (any node behind the URL): first after ``session.moving``'s
        ``retry_after_ms`` (at once after a drop), then with backoff; False when the session
        cannot be resumed."""
        assert self.resume is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + RESUME_WINDOW_S
        await asyncio.sleep(self.resume_after_s)  # the drain's spread of its sessions' resumes
        self.resume_after_s = 0.0
        delay = 0.0
        while loop.time() + delay < deadline:
            await asyncio.sleep(delay)
            delay = min(max(delay * 2, 0.25), 4.0)
            with contextlib.suppress(aiohttp.ClientError, TimeoutError, ValueError):
                ws = await self.http.ws_connect(self.url, headers=self.headers)
                start = {"type": "session.start", "mode": self.mode, "resume": self.resume}
                await ws.send_str(json.dumps(start))
                msg = await ws.receive(timeout=10)
                answer = json.loads(msg.data) if msg.type == aiohttp.WSMsgType.TEXT else {}
                if answer.get("type") == "session.started":
                    self.ws = ws
                    self.show(answer)
                    self.live.set()
                    if self.waiting_for is not None:  # sent as the old socket went away
                        await ws.send_str(json.dumps(self.waiting_for))
                    return True
                await ws.close()
                if answer.get("code") == "resume_failed":
                    self.show(answer)
                    return False
        self.print(f"  [chat] the session could not be resumed within {RESUME_WINDOW_S:.0f} s\n")
        return False

    async def exchange(self, event: dict[str, Any]) -> None:
        """Send one event and wait for its answer (through a reconnection if one happens)."""
        self.answered.clear()
        self.waiting_for = event
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.live.wait(), RESUME_WINDOW_S)
        if self.ended or self.ws is None:
            return
        with contextlib.suppress(ConnectionError, aiohttp.ClientError):
            await self.ws.send_str(json.dumps(event))  # else: sent again after the resume
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.answered.wait(), ANSWER_TIMEOUT_S)
        self.waiting_for = None


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
        chat = _Chat(http, url, headers, out, mode, ws)
        chat.live.set()
        reader = asyncio.create_task(chat.run())
        try:
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
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
            if chat.ws is not None:
                await chat.ws.close()
    # 0 when the session ended as sessions should (the user, or an intent); 1 otherwise.
    return 0 if chat.end_reason in (None, "client", "intent") else 1
