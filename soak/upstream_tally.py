"""What the upstream fakes saw of the soak tools' results, frame by frame. Pure.

Every soak tool returns its execution's key (``soakrun:<session>:<call>``, ``soak.journal``) in
its result, so wherever that result goes it can be recognised:

- **given**: a frame from the gateway to a fake that carries a result (OpenAI Realtime: a
  ``conversation.item.create`` of a function output or of a message that is not the model's
  own, since a replayed answer quotes the results it answered; Gemini Live: a ``toolResponse``
  or the user turns of ``clientContent``; chat completions: the messages of a request after
  the model's last reply). Counted per upstream connection (per session for chat, whose requests
  each carry the whole history): one result given twice to one upstream session is a
  duplicate. A new connection of the same session may carry it again (OpenAI replays the
  conversation after a reconnect), so across connections only "at least once" is checked;
- **answered**: a reply of the model that completed (OpenAI ``response.done`` ``completed``,
  Gemini a turn that ended without ``interrupted``, a chat reply) and that answers results
  (``Tool results: …`` or ``Result of the earlier …``) naming the key. A replayed result that was
  answered before is not answered again; a result delivered twice is. At most once.

Connections carry the soak session's tag (``soak-tag:<tag>``, from the session's instructions),
so a fault can be aimed at one session's upstream.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = ["RUN_KEY", "TAG", "ConnectionView", "Tally", "answers_results", "tag_in"]

# Up to the quote (or backslash, bracket, comma) that ends it, however deep the JSON.
RUN_KEY = re.compile(r"soakrun:[^\s\"\\,}\])]+")
TAG = re.compile(r"soak-tag:([A-Za-z0-9_-]+)")
# The chat transport words a late result "The result of the earlier call …"; the others
# "Result of the earlier …".
_ANSWER_MARKS = ("Tool results:", "Result of the earlier", "result of the earlier")


def tag_in(text: str) -> str | None:
    found = TAG.search(text)
    return found.group(1) if found else None


def answers_results(text: str) -> set[str]:
    """The keys a reply answers: only replies that answer tool results count."""
    if not any(mark in text for mark in _ANSWER_MARKS):
        return set()
    return set(RUN_KEY.findall(text))


def _carries_results(item: Any) -> bool:
    """An item the gateway gives the model: a function output, or a message that is not the
    model's own (a replayed answer quotes the results it answered)."""
    if not isinstance(item, dict):
        return False
    if item.get("type") == "function_call_output":
        return True
    return item.get("role") not in ("assistant", "model")


def _text(value: Any) -> str:
    return orjson.dumps(value).decode()


@dataclass
class ConnectionView:
    upstream: str  # "openai" | "gemini"
    tag: str | None = None
    given: Counter[str] = field(default_factory=Counter)
    frames: int = 0  # frames from the gateway so far
    first_given: dict[str, str] = field(default_factory=dict)  # run → where it came first
    turn_text: list[str] = field(default_factory=list)  # Gemini: the turn so far
    turn_interrupted: bool = False


@dataclass
class Tally:
    given: Counter[str] = field(default_factory=Counter)  # connections (chat: sessions) given
    answered: Counter[str] = field(default_factory=Counter)
    duplicates: list[dict[str, Any]] = field(default_factory=list)
    connections: Counter[str] = field(default_factory=Counter)  # opened, per upstream
    completed_replies: Counter[str] = field(default_factory=Counter)
    _open: dict[int, ConnectionView] = field(default_factory=dict)
    _chat_given: dict[str, Counter[str]] = field(default_factory=dict)

    # Realtime connections (OpenAI, Gemini) ------------------------------------------------------

    def frame(self, key: int, upstream: str, direction: str, message: Mapping[str, Any]) -> None:
        view = self._open.get(key)
        if view is None:
            view = self._open[key] = ConnectionView(upstream)
            self.connections[upstream] += 1
        if direction == "in":
            view.frames += 1
        if upstream == "openai":
            self._openai(view, direction, message)
        else:
            self._gemini(view, direction, message)

    def tag_of(self, key: int) -> str | None:
        view = self._open.get(key)
        return view.tag if view else None

    def closed(self, key: int) -> None:
        self._open.pop(key, None)

    def _give(self, view: ConnectionView, text: str) -> None:
        where = f"frame {view.frames}: {text[:160]}"
        for run in set(RUN_KEY.findall(text)):
            view.given[run] += 1
            if view.given[run] == 1:
                self.given[run] += 1
                view.first_given[run] = where
            else:
                self.duplicates.append(
                    {
                        "run": run,
                        "upstream": view.upstream,
                        "tag": view.tag,
                        "first": view.first_given.get(run, ""),
                        "again": where,
                    }
                )

    def _answer(self, upstream: str, text: str) -> None:
        self.completed_replies[upstream] += 1
        for run in answers_results(text):
            self.answered[run] += 1

    def _openai(self, view: ConnectionView, direction: str, message: Mapping[str, Any]) -> None:
        kind = message.get("type")
        if direction == "in":
            if kind == "session.update" and view.tag is None:
                view.tag = tag_in(_text(message.get("session")))
            elif kind == "conversation.item.create":
                item = message.get("item")
                if _carries_results(item):
                    self._give(view, _text(item))
        elif kind == "response.done":
            response = message.get("response")
            if isinstance(response, dict) and response.get("status") == "completed":
                self._answer("openai", _text(response.get("output")))

    def _gemini(self, view: ConnectionView, direction: str, message: Mapping[str, Any]) -> None:
        if direction == "in":
            if "setup" in message and view.tag is None:
                view.tag = tag_in(_text(message["setup"]))
            elif "toolResponse" in message:
                self._give(view, _text(message["toolResponse"]))
            elif isinstance(content := message.get("clientContent"), dict):
                turns = [t for t in content.get("turns") or () if _carries_results(t)]
                if turns:
                    self._give(view, _text(turns))
            return
        content = message.get("serverContent")
        if not isinstance(content, dict):
            return
        model_turn = content.get("modelTurn")
        if isinstance(model_turn, dict):
            for part in model_turn.get("parts") or ():
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    view.turn_text.append(part["text"])
        transcription = content.get("outputTranscription")
        if isinstance(transcription, dict) and isinstance(transcription.get("text"), str):
            view.turn_text.append(transcription["text"])
        if content.get("interrupted"):
            view.turn_interrupted = True
        if content.get("turnComplete"):
            if not view.turn_interrupted:
                self._answer("gemini", "".join(view.turn_text))
            view.turn_text.clear()
            view.turn_interrupted = False

    # Chat completions: every request carries the history ------------------------------------------

    def chat_exchange(self, body: Mapping[str, Any], reply_text: str | None) -> None:
        messages = body.get("messages")
        if not isinstance(messages, list):
            return
        tag = next(
            (
                found
                for m in messages
                if isinstance(m, dict) and m.get("role") in ("system", "developer")
                for found in [tag_in(_text(m.get("content")))]
                if found
            ),
            "?",
        )
        last_reply = max(
            (
                i
                for i, m in enumerate(messages)
                if isinstance(m, dict) and m.get("role") == "assistant"
            ),
            default=-1,
        )
        seen = self._chat_given.setdefault(tag, Counter())
        for run in set(RUN_KEY.findall(_text(messages[last_reply + 1 :]))):
            seen[run] += 1
            if seen[run] == 1:
                self.given[run] += 1
            else:
                self.duplicates.append({"run": run, "upstream": "chat", "tag": tag, "times": 2})
        self.connections["chat"] += 1
        if reply_text is not None:
            self._answer("chat", reply_text)

    def forget_chat_session(self, tag: str) -> None:
        self._chat_given.pop(tag, None)

    # The report -----------------------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        return {
            "given": dict(self.given),
            "answered": dict(self.answered),
            "duplicates": list(self.duplicates),
            "connections": dict(self.connections),
            "completed_replies": dict(self.completed_replies),
        }
