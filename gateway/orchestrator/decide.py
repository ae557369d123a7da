"""``decide_call``: what to do with one tool call the model made. Pure: state, call, clock in;
a decision out. The session carries the decision out (run it, or refuse it through the runner).

Checks, in this order, each producing the error type the model receives (docs/tools.md 7.1):

    1. registry lookup                       NOT_FOUND
    2. the user's roles, the session filter  FORBIDDEN
    3. the session's mode                    MODE_RESTRICTED
    4. arguments parse and validate          VALIDATION
    5. tool rounds this turn                 BUDGET_EXCEEDED
    6. retrieval calls this turn             BUDGET_EXCEEDED
    7. a re-call with confirmation_id        (spoken yes) → execute, or refused
    8. explicit intent (high, critical)      INTENT_NOT_EXPLICIT
    9. confirmation gate                     CONFIRMATION_REQUIRED (a confirmation opens)

The retrieval budget is checked before any confirmation opens (a confirmation the budget would
refuse anyway only annoys the user) and a retrieval call is counted when it is executed, whatever
path got it there (``count_execution``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gateway.orchestrator.confirmations import (
    ConfirmationBook,
    LookupResult,
    PendingConfirmation,
)
from gateway.orchestrator.turns import TurnState
from gateway.registry import Registry, ToolSpec
from gateway.toolrun import ArgumentError, Mode, ModeBudget, ToolCall, arguments_hash
from gateway.toolrun import parse_arguments as _parse
from gateway.toolrun.projection import redact_arguments
from tools._core import ToolErrorType

__all__ = [
    "CallPolicy",
    "Execute",
    "Refuse",
    "availability_refusal",
    "count_execution",
    "decide_call",
    "has_explicit_intent",
    "redacted",
]


@dataclass(frozen=True, slots=True)
class Execute:
    call: ToolCall
    args: dict[str, Any]
    # Set when a spoken yes (model re-call) approved an open confirmation.
    confirmation: PendingConfirmation | None = None


@dataclass(frozen=True, slots=True)
class Refuse:
    call: ToolCall
    error_type: ToolErrorType
    message: str
    reason: str
    args: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # A confirmation this refusal opened: the client gets ``confirmation.requested``.
    opened: PendingConfirmation | None = None


Decision = Execute | Refuse


@dataclass(frozen=True, slots=True)
class CallPolicy:
    """The session facts a decision depends on."""

    registry: Registry
    mode: Mode
    roles: frozenset[str]
    enabled: frozenset[str] | None
    budget: ModeBudget


def has_explicit_intent(keywords: tuple[str, ...], utterance: str) -> bool:
    """One keyword (a word or phrase) appears in the user's last words, as whole words."""
    text = " ".join(re.findall(r"[\w']+", utterance.lower()))
    for keyword in keywords:
        phrase = " ".join(re.findall(r"[\w']+", keyword.lower()))
        if phrase and re.search(rf"(?<![\w']){re.escape(phrase)}(?![\w'])", text):
            return True
    return False


def _first_sentence(text: str) -> str:
    flat = " ".join(text.split())
    match = re.match(r"(.+?[.!?])(?:\s|$)", flat)
    return (match.group(1) if match else flat).rstrip(".")


def redacted(spec: ToolSpec | None, args: dict[str, Any] | None) -> dict[str, Any]:
    """Arguments as people may see them: the tool's ``secretArguments`` replaced (the same
    rule a call's traced content follows, ``gateway.toolrun.projection``)."""
    return redact_arguments(args, spec.secret_arguments if spec else ())


def _prompt(spec: ToolSpec, args: dict[str, Any]) -> str:
    visible = redacted(spec, args)
    shown = ", ".join(f"{k}: {v}" for k, v in sorted(visible.items())) or "no arguments"
    action = _first_sentence(spec.summary) if spec.summary else ""
    does = f" It will {action[:1].lower()}{action[1:]}." if action else ""
    where = " Approve it on your device." if spec.sensitivity == "critical" else ""
    return f"Confirm {spec.tool_id} with {shown}?{does}{where}"


def availability_refusal(call: ToolCall, policy: CallPolicy) -> Refuse | None:
    """Checks 1-3: may this user call this tool, here, now? Also asked again when an approved
    confirmation is about to run (roles may have dropped on a resume, the mode may have
    changed since the call was made)."""
    spec = policy.registry.get(call.tool_id)
    if spec is None:
        return Refuse(call, ToolErrorType.NOT_FOUND, f"no tool named '{call.tool_id}'", "unknown")
    if not spec.allowed_for(policy.roles) or (
        policy.enabled is not None and spec.tool_id not in policy.enabled
    ):
        return Refuse(
            call,
            ToolErrorType.FORBIDDEN,
            f"'{spec.tool_id}' is not available to this user in this session",
            "forbidden",
        )
    if policy.mode not in spec.modes:
        return Refuse(
            call,
            ToolErrorType.MODE_RESTRICTED,
            f"'{spec.tool_id}' cannot be used in {policy.mode} mode",
            "mode",
        )
    return None


def decide_call(
    call: ToolCall,
    policy: CallPolicy,
    turn: TurnState,
    book: ConfirmationBook,
    *,
    now: datetime,
    new_id: Callable[[], str],
) -> Decision:
    """Decide one call. Mutates ``turn`` (counts) and ``book`` (opens or takes confirmations)."""
    refusal = availability_refusal(call, policy)
    if refusal is not None:
        return refusal
    spec = policy.registry.get(call.tool_id)
    assert spec is not None
    try:
        parsed = _parse(call.arguments)
    except ArgumentError as exc:
        return Refuse(call, ToolErrorType.VALIDATION, str(exc), "validation")
    args = parsed.args
    problem = spec.validator.problem(args)
    if problem is not None:
        return Refuse(call, ToolErrorType.VALIDATION, problem, "validation", args)
    if turn.rounds > policy.budget.rounds_per_turn:
        return Refuse(
            call,
            ToolErrorType.BUDGET_EXCEEDED,
            f"no more tool use this turn (limit {policy.budget.rounds_per_turn} rounds); "
            "answer the user with what you have",
            "rounds",
            args,
        )

    limit = policy.budget.retrieval_calls_per_turn
    if spec.category == "retrieval" and turn.retrieval_calls >= limit:
        return Refuse(
            call,
            ToolErrorType.BUDGET_EXCEEDED,
            f"retrieval budget spent: at most {limit} retrieval calls per turn in "
            f"{policy.mode} mode; answer with what you have",
            "budget",
            args,
        )

    digest = arguments_hash(spec.tool_id, args)
    if parsed.confirmation_id is not None and spec.needs_confirmation:
        decision = _spoken_yes(call, spec, args, digest, parsed.confirmation_id, book, now)
        if isinstance(decision, Execute):
            count_execution(spec, turn)
        return decision

    needs_intent = spec.intent_keywords and spec.sensitivity in ("high", "critical")
    if needs_intent and not has_explicit_intent(spec.intent_keywords, turn.last_user_text):
        return Refuse(
            call,
            ToolErrorType.INTENT_NOT_EXPLICIT,
            f"the user did not explicitly ask for this; '{spec.tool_id}' needs them to say "
            f"so (e.g. {', '.join(repr(k) for k in spec.intent_keywords[:3])})",
            "intent",
            args,
        )
    if spec.needs_confirmation:
        pending = book.open(
            confirmation_id=new_id(),
            call_id=call.call_id,
            tool_id=spec.tool_id,
            args=args,
            args_hash=digest,
            sensitivity=spec.sensitivity,
            prompt=_prompt(spec, args),
            now=now,
        )
        how = (
            "ask the user to approve it on their device"
            if pending.critical
            else "ask the user; if they say yes, call the tool again with the same arguments "
            "and this confirmation_id"
        )
        return Refuse(
            call,
            ToolErrorType.CONFIRMATION_REQUIRED,
            f"confirmation required before '{spec.tool_id}' runs: {how}",
            "confirmation",
            args,
            extra={
                "confirmationId": pending.confirmation_id,
                "prompt": pending.prompt,
                "expiresAt": pending.expires_at.isoformat(),
            },
            opened=pending,
        )
    count_execution(spec, turn)
    return Execute(call, args)


def count_execution(spec: ToolSpec, turn: TurnState) -> None:
    """A call of ``spec`` is about to run this turn: spend its share of the budget."""
    if spec.category == "retrieval":
        turn.retrieval_calls += 1


def _spoken_yes(
    call: ToolCall,
    spec: ToolSpec,
    args: dict[str, Any],
    digest: str,
    confirmation_id: str,
    book: ConfirmationBook,
    now: datetime,
) -> Decision:
    found = book.lookup(confirmation_id, now)
    if found.result is LookupResult.NOT_FOUND:
        return Refuse(
            call,
            ToolErrorType.VALIDATION,
            f"confirmation_not_found: '{confirmation_id}' is not an open confirmation (used, "
            "rejected or unknown); call the tool without confirmation_id to ask again",
            "confirmation_not_found",
            args,
        )
    if found.result is LookupResult.EXPIRED:
        return Refuse(
            call,
            ToolErrorType.VALIDATION,
            f"confirmation_expired: '{confirmation_id}' expired; call the tool without "
            "confirmation_id to ask the user again",
            "confirmation_expired",
            args,
        )
    pending = found.pending
    assert pending is not None
    if pending.tool_id != spec.tool_id or pending.args_hash != digest:
        return Refuse(
            call,
            ToolErrorType.VALIDATION,
            f"confirmation '{confirmation_id}' was for other arguments or another tool; call "
            "again with exactly the confirmed arguments",
            "confirmation_mismatch",
            args,
        )
    if pending.critical:
        return Refuse(
            call,
            ToolErrorType.CONFIRMATION_REQUIRED,
            f"'{spec.tool_id}' is critical: a spoken yes is not enough; ask the user to approve "
            "it on their device",
            "critical_needs_client",
            args,
            extra={
                "confirmationId": pending.confirmation_id,
                "prompt": pending.prompt,
                "expiresAt": pending.expires_at.isoformat(),
            },
        )
    book.take(confirmation_id, now)
    return Execute(call, args, confirmation=pending)
