"""Store records as JSON bytes and back (for stores outside the process). Pure.

A record that does not read back (a newer or corrupt writer) is refused with ``ValueError``,
never half-read.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import orjson

from gateway.orchestrator import PendingConfirmation
from gateway.store.base import LedgerEntry, LedgerState, SessionSnapshot
from transports.base import ConversationItem

__all__ = [
    "FORMAT",
    "ledger_from_json",
    "ledger_to_json",
    "snapshot_from_json",
    "snapshot_to_json",
]

FORMAT = 1


def _confirmation(pending: PendingConfirmation) -> dict[str, Any]:
    return {
        "confirmation_id": pending.confirmation_id,
        "call_id": pending.call_id,
        "tool_id": pending.tool_id,
        "args": pending.args,
        "args_hash": pending.args_hash,
        "sensitivity": pending.sensitivity,
        "prompt": pending.prompt,
        "expires_at": pending.expires_at.isoformat(),
    }


def snapshot_to_json(snapshot: SessionSnapshot) -> bytes:
    return orjson.dumps(
        {
            "format": FORMAT,
            "provider": snapshot.provider,
            "mode": snapshot.mode,
            "input_rate": snapshot.input_rate,
            "output_rate": snapshot.output_rate,
            "enabled_tools": snapshot.enabled_tools,
            "instructions": snapshot.instructions,
            "model": snapshot.model,
            "voice": snapshot.voice,
            "locale": snapshot.locale,
            "tool_dialect": snapshot.tool_dialect,
            "audio_encoding": snapshot.audio_encoding,
            "turn_number": snapshot.turn_number,
            "retrieval_calls": snapshot.retrieval_calls,
            "rounds": snapshot.rounds,
            "last_user_text": snapshot.last_user_text,
            "pending_confirmations": [_confirmation(p) for p in snapshot.pending_confirmations],
            "pending_messages": snapshot.pending_messages,
            "history": [[item.role, item.text] for item in snapshot.history],
            "usage": dict(snapshot.usage),
            "client_tools": [dict(tool) for tool in snapshot.client_tools],
            "turn_detection": snapshot.turn_detection,
            "tool_choice": snapshot.tool_choice,
            "alias": snapshot.alias,
        }
    )


def snapshot_from_json(data: bytes | str) -> SessionSnapshot:
    try:
        raw = orjson.loads(data)
        if raw.get("format") != FORMAT:
            raise ValueError(f"snapshot format {raw.get('format')!r}, expected {FORMAT}")
        enabled = raw["enabled_tools"]
        return SessionSnapshot(
            provider=str(raw["provider"]),
            mode=str(raw["mode"]),
            input_rate=int(raw["input_rate"]),
            output_rate=int(raw["output_rate"]),
            enabled_tools=None if enabled is None else tuple(str(t) for t in enabled),
            instructions=str(raw["instructions"]),
            model=raw["model"],
            voice=raw["voice"],
            locale=raw["locale"],
            tool_dialect=raw["tool_dialect"],
            audio_encoding=str(raw.get("audio_encoding", "pcm16")),  # absent before it existed
            turn_number=int(raw["turn_number"]),
            retrieval_calls=int(raw["retrieval_calls"]),
            rounds=int(raw["rounds"]),
            last_user_text=str(raw["last_user_text"]),
            pending_confirmations=tuple(
                PendingConfirmation(
                    confirmation_id=p["confirmation_id"],
                    call_id=p["call_id"],
                    tool_id=p["tool_id"],
                    args=dict(p["args"]),
                    args_hash=p["args_hash"],
                    sensitivity=p["sensitivity"],
                    prompt=p["prompt"],
                    expires_at=datetime.fromisoformat(p["expires_at"]),
                )
                for p in raw["pending_confirmations"]
            ),
            pending_messages=tuple(str(m) for m in raw["pending_messages"]),
            history=tuple(ConversationItem(role, str(text)) for role, text in raw["history"]),
            usage=_usage_of(raw.get("usage")),  # absent before usage was kept
            client_tools=tuple(dict(tool) for tool in raw.get("client_tools", ())),
            turn_detection=raw.get("turn_detection"),  # absent before they existed
            tool_choice=raw.get("tool_choice"),
            alias=_alias_of(raw.get("alias")),  # absent before aliases existed
        )
    except (KeyError, TypeError, ValueError, orjson.JSONDecodeError) as exc:
        raise ValueError(f"unreadable snapshot: {exc}") from None


def _alias_of(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _usage_of(raw: Any) -> dict[str, Any]:
    return dict(raw) if isinstance(raw, dict) else {}


def ledger_to_json(entry: LedgerEntry) -> bytes:
    return orjson.dumps(
        {
            "tool_id": entry.tool_id,
            "state": entry.state.value,
            "node": entry.node,
            "epoch": entry.epoch,
            "started_at": entry.started_at,
            "envelope": entry.envelope,
        }
    )


def ledger_from_json(call_id: str, data: bytes | str) -> LedgerEntry:
    try:
        raw = orjson.loads(data)
        envelope = raw.get("envelope")
        return LedgerEntry(
            call_id=call_id,
            tool_id=str(raw["tool_id"]),
            state=LedgerState(raw["state"]),
            node=str(raw["node"]),
            epoch=int(raw["epoch"]),
            started_at=float(raw["started_at"]),
            envelope=None if envelope is None else dict(envelope),
        )
    except (KeyError, TypeError, ValueError, orjson.JSONDecodeError) as exc:
        raise ValueError(f"unreadable ledger entry: {exc}") from None
