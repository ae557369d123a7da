"""Calls the gateway places (``POST /v1/calls``): the request, checked whole, and the call's
record through its life. Pure: every rule is a unit test.

A request names who to call and how the call's session runs: ``to`` and ``from`` (E.164),
the carrier (Twilio or Telnyx; optional when one is configured for calls), the model alias or
provider, instructions, the greeting the assistant starts from, the tools it may use (within
what the caller's key allows), what to do when a machine answers (``hangup``, or ``message``:
speak the greeting as a message after the beep, then end), the ring timeout, metadata. A bad
field raises ``CallInputError`` naming it, and nothing is placed.

A record moves ``queued`` → ``ringing`` (the carrier took it) → ``in-progress`` (answered) → one
terminal status: ``completed``, ``busy``, ``no-answer``, ``failed`` or ``canceled``. A terminal
record never changes status again (a carrier's late or repeated callback is ignored), though its
usage may still be added when the session's last response is accounted.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal, get_args

__all__ = [
    "AnsweredBy",
    "CallInputError",
    "CallRecord",
    "CallRequest",
    "CallStatus",
    "parse_call_request",
]

CallStatus = Literal[
    "queued", "ringing", "in-progress", "completed", "busy", "no-answer", "failed", "canceled"
]
AnsweredBy = Literal["human", "machine", "unknown"]
MachineBehaviour = Literal["hangup", "message"]
TERMINAL: frozenset[str] = frozenset({"completed", "busy", "no-answer", "failed", "canceled"})
CARRIERS = ("twilio", "telnyx")

_E164 = re.compile(r"^\+[1-9][0-9]{6,14}$")
MAX_INSTRUCTIONS = 16_000
MAX_GREETING = 1_000
MAX_TOOLS = 64
MAX_METADATA = 16
_KNOWN = {
    "to", "from", "carrier", "model", "provider", "instructions", "greeting", "tools",
    "machine", "timeout_s", "metadata",
}  # fmt: skip


class CallInputError(ValueError):
    """A request to place a call that cannot be used; the message names the field."""


@dataclass(frozen=True, slots=True)
class CallRequest:
    to: str
    from_: str
    carrier: str | None = None
    model: str | None = None
    provider: str | None = None
    instructions: str | None = None
    greeting: str | None = None
    tools: tuple[str, ...] | None = None
    machine: MachineBehaviour = "hangup"
    timeout_s: int = 30
    metadata: Mapping[str, str] = field(default_factory=dict)


def parse_call_request(body: object, *, default_from: str | None = None) -> CallRequest:
    """The request's JSON body, checked whole; raises ``CallInputError``."""
    if not isinstance(body, dict):
        raise CallInputError("the body must be a JSON object")
    unknown = sorted(set(body) - _KNOWN)
    if unknown:
        raise CallInputError(f"{unknown[0]}: unknown field")
    to = _number(body.get("to"), "to")
    sender = body.get("from", default_from)
    from_ = _number(sender, "from")
    carrier = _optional_text(body, "carrier", 16)
    if carrier is not None and carrier not in CARRIERS:
        raise CallInputError(f"carrier: must be one of {', '.join(CARRIERS)}")
    model = _optional_text(body, "model", 128)
    provider = _optional_text(body, "provider", 64)
    if model is not None and provider is not None:
        raise CallInputError("model: name a model alias or a provider, not both")
    machine = body.get("machine", "hangup")
    if machine not in get_args(MachineBehaviour):
        raise CallInputError('machine: must be "hangup" or "message"')
    timeout = body.get("timeout_s", 30)
    if type(timeout) is not int or not 5 <= timeout <= 120:
        raise CallInputError("timeout_s: must be an integer from 5 to 120")
    return CallRequest(
        to=to,
        from_=from_,
        carrier=carrier,
        model=model,
        provider=provider,
        instructions=_optional_text(body, "instructions", MAX_INSTRUCTIONS),
        greeting=_optional_text(body, "greeting", MAX_GREETING),
        tools=_tools(body.get("tools")),
        machine=machine,
        timeout_s=timeout,
        metadata=_metadata(body.get("metadata")),
    )


def _number(value: object, name: str) -> str:
    if not isinstance(value, str) or not _E164.match(value):
        raise CallInputError(f"{name}: must be a phone number in E.164 form, e.g. +14155550100")
    return value


def _optional_text(body: Mapping[str, Any], name: str, limit: int) -> str | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise CallInputError(f"{name}: must be a non-empty string")
    if len(value) > limit:
        raise CallInputError(f"{name}: at most {limit} characters")
    return value


def _tools(value: object) -> tuple[str, ...] | None:
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(t, str) and t for t in value):
        raise CallInputError("tools: must be a list of tool names")
    if len(value) > MAX_TOOLS:
        raise CallInputError(f"tools: at most {MAX_TOOLS}")
    return tuple(dict.fromkeys(value))


def _metadata(value: object) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and len(k) <= 64 and len(v) <= 512
        for k, v in value.items()
    ):
        raise CallInputError("metadata: must be an object of short strings")
    if len(value) > MAX_METADATA:
        raise CallInputError(f"metadata: at most {MAX_METADATA} pairs")
    return dict(value)


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One placed call. ``owner``/``key_id``/``team``/``roles``/``tenant`` are who placed it:
    the call's session runs as them (their budgets count it)."""

    call_id: str
    carrier: str
    to: str
    from_: str
    owner: str
    created_at: float
    key_id: str | None = None
    team: str | None = None
    roles: tuple[str, ...] = ()
    tenant: str | None = None
    model: str | None = None
    provider: str | None = None
    instructions: str | None = None
    greeting: str | None = None
    tools: tuple[str, ...] | None = None
    machine: MachineBehaviour = "hangup"
    timeout_s: int = 30
    metadata: Mapping[str, str] = field(default_factory=dict)
    status: CallStatus = "queued"
    carrier_call_id: str | None = None
    answered_by: AnsweredBy | None = None
    answered_at: float | None = None
    ended_at: float | None = None
    duration_s: float | None = None
    session_id: str | None = None
    usage: Mapping[str, float] = field(default_factory=dict)
    error: str | None = None

    @staticmethod
    def new_id() -> str:
        return "call_" + secrets.token_hex(12)

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def placed(self, carrier_call_id: str) -> CallRecord:
        """The carrier accepted the call and named it."""
        if self.terminal:
            return self
        return replace(self, status="ringing", carrier_call_id=carrier_call_id)

    def answered(self, now: float, answered_by: AnsweredBy = "unknown") -> CallRecord:
        if self.terminal or self.status == "in-progress":
            return self
        return replace(self, status="in-progress", answered_at=now, answered_by=answered_by)

    def ended(
        self,
        status: CallStatus,
        now: float,
        *,
        duration_s: float | None = None,
        error: str | None = None,
    ) -> CallRecord:
        """The call is over: ``status`` is terminal. Without the carrier's duration, it is the
        time since the answer (0 for a call never answered)."""
        if status not in TERMINAL:
            raise ValueError(f"{status!r} is not a terminal status")
        if self.terminal:
            return self
        if duration_s is None:
            duration_s = 0.0 if self.answered_at is None else max(now - self.answered_at, 0.0)
        return replace(
            self,
            status=status,
            ended_at=now,
            duration_s=round(duration_s, 3),
            error=error or self.error,
        )

    def merged(self, newer: CallRecord) -> CallRecord:
        """What two writers' views of one call make together (a carrier's callback on one node,
        the session's end on another): the status further along, a terminal one never undone
        nor replaced, and every fact either view has (the newer one's first)."""
        rank = {"queued": 0, "ringing": 1, "in-progress": 2}
        keep_status = self.terminal or rank.get(self.status, 3) > rank.get(newer.status, 3)
        base = newer
        if keep_status:
            base = replace(
                newer,
                status=self.status,
                ended_at=self.ended_at,
                duration_s=self.duration_s,
                error=self.error,
            )
        return replace(
            base,
            carrier_call_id=base.carrier_call_id or self.carrier_call_id,
            answered_by=base.answered_by or self.answered_by,
            answered_at=base.answered_at if base.answered_at is not None else self.answered_at,
            session_id=base.session_id or self.session_id,
            usage=base.usage or self.usage,
            error=base.error or self.error,
        )

    def with_session(self, session_id: str) -> CallRecord:
        return replace(self, session_id=session_id)

    def with_usage(self, usage: Mapping[str, float]) -> CallRecord:
        return replace(self, usage=dict(usage))

    def to_record(self) -> dict[str, Any]:
        """What the store keeps (everything)."""
        record = asdict(self)
        record["tools"] = None if self.tools is None else list(self.tools)
        record["roles"] = list(self.roles)
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> CallRecord:
        values = dict(record)
        values["roles"] = tuple(values.get("roles", ()))
        tools = values.get("tools")
        values["tools"] = None if tools is None else tuple(tools)
        return cls(**values)

    def as_json(self) -> dict[str, Any]:
        """What ``GET /v1/calls/{id}`` shows: the call, never the instructions' text."""
        return {
            "id": self.call_id,
            "carrier": self.carrier,
            "carrier_call_id": self.carrier_call_id,
            "to": self.to,
            "from": self.from_,
            "status": self.status,
            "answered_by": self.answered_by,
            "created_at": self.created_at,
            "answered_at": self.answered_at,
            "ended_at": self.ended_at,
            "duration_s": self.duration_s,
            "session_id": self.session_id,
            "usage": dict(self.usage),
            "machine": self.machine,
            "model": self.model,
            "provider": self.provider,
            "metadata": dict(self.metadata),
            "error": self.error,
        }
