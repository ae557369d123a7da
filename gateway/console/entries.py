"""What a session's timeline records of the events it sends its client. Pure.

The timeline is made of the events the session emits, so it shows exactly what its client was
shown: tool arguments after redaction, results projected through each tool's allowlist, never
audio. ``Entries.of`` turns one event into the timeline's entries (``{"at", "kind", …}``),
keeping what it needs across events: the arguments of calls still running, whether a response
is being spoken (a user's speech then is a barge-in), the count of failovers. Transcripts are
kept only when the operator asked for them (``GATEWAY_CONSOLE_TRANSCRIPTS``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gateway.protocol import (
    ConfirmationRequested,
    ConfirmationResolved,
    ErrorEvent,
    ProviderChanged,
    ResponseDone,
    ResponseStarted,
    ServerEvent,
    SessionEnded,
    SessionMoving,
    SessionStarted,
    SpeechStarted,
    ToolFinished,
    ToolStarted,
    TranscriptDone,
)

__all__ = ["Entries", "Entry"]

Entry = dict[str, Any]
_RUNNING_KEPT = 64  # arguments of calls not finished yet, at most


@dataclass(slots=True)
class Entries:
    transcripts: bool = False
    failovers: int = 0
    responding: bool = False
    responses: int = 0
    _arguments: dict[str, Any] = field(default_factory=dict)

    def of(self, event: ServerEvent, at: str) -> list[Entry]:
        match event:
            case ResponseStarted(response_id=response_id):
                self.responding = True
                self.responses += 1
                entry = {"at": at, "kind": "turn", "turn": self.responses}
                return [{**entry, "response_id": response_id}]
            case ResponseDone():
                self.responding = False
                return [self._usage(event, at)]
            case SpeechStarted():
                return [{"at": at, "kind": "barge_in"}] if self.responding else []
            case ToolStarted(call_id=call_id, arguments=arguments):
                if len(self._arguments) >= _RUNNING_KEPT:
                    del self._arguments[next(iter(self._arguments))]
                self._arguments[call_id] = arguments
                return []
            case ToolFinished():
                return self._finished(event, at)
            case ConfirmationRequested():
                entry = {"at": at, "kind": "confirmation", "state": "requested"}
                entry.update(confirmation_id=event.confirmation_id, tool=event.tool)
                return [entry]
            case ConfirmationResolved(confirmation_id=confirmation_id, decision=decision):
                entry = {"at": at, "kind": "confirmation", "confirmation_id": confirmation_id}
                entry["state"] = str(decision)
                found = [entry]
                if event.result is not None:
                    found += self._finished(event.result, at)
                return found
            case TranscriptDone(role=role, text=text) if self.transcripts:
                return [{"at": at, "kind": "transcript", "role": str(role), "text": text}]
            case ErrorEvent():
                entry = {"at": at, "kind": "error", "code": str(event.code)}
                return [{**entry, "message": event.message}]
            case ProviderChanged(provider=provider, model=model, previous=previous):
                self.failovers += 1
                entry = {"at": at, "kind": "failover", "provider": provider, "model": model}
                entry["previous"] = previous
                return [entry]
            case SessionMoving(reason=reason):
                return [{"at": at, "kind": "move", "reason": reason}]
            case SessionStarted(resumed=True):
                return [{"at": at, "kind": "resumed"}]
            case SessionEnded(reason=reason):
                return [{"at": at, "kind": "ended", "reason": str(reason)}]
            case _:
                return []

    def _finished(self, event: ToolFinished, at: str) -> list[Entry]:
        entry: Entry = {
            "at": at,
            "kind": "tool",
            "call_id": event.call_id,
            "name": event.name,
            "arguments": self._arguments.pop(event.call_id, None),
            "ok": event.ok,
            "duration_ms": event.duration_ms,
        }
        if event.ok:
            entry["data"] = event.data
        elif event.error is not None:
            entry["error"] = {"type": event.error.type, "message": event.error.message}
        found = [entry]
        found += [{"at": at, "kind": "intent", "name": name} for name in event.intents]
        return found

    @staticmethod
    def _usage(event: ResponseDone, at: str) -> Entry:
        entry: Entry = {"at": at, "kind": "usage", "response_id": event.response_id}
        entry["status"] = str(event.status)
        entry["usage"] = event.usage
        return entry
