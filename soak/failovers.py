"""The soak's failovers, and the judgment of the server-wide faults that caused them. Pure:
what the run left behind in, violations and a summary out.

The OpenAI fake's server-wide faults (``openai_refuse``, ``openai_429``: its next connections;
``openai_stall_first``, ``openai_stall_mid``: its next response) are aimed at no session:
whichever comes next meets them. Each time one applied, the fake wrote it down (``Applied``:
when, and for a stall the tag of the soak session whose connection it stalled). The gateway
writes each failover down too (the audit line ``upstream_failover``, ``GatewayFailover``: its
session, reason and time), phone calls' included, whose Twilio stream never shows it; and the
clients saw ``session.provider_changed`` (``SessionRecord.failovers``).

``failover``, the invariant:

- every stall that met a session led to a failover of that session (reason ``stall_*``) within
  the deadline that applies plus a second (``soak.routing.stall_deadline``), counted from the
  moment the fake stalled the response (the gateway's deadline runs from the end of the user's
  turn, which came before). Not judged: a stall the session's own doing made moot before the
  deadline (the user talked over the reply, the session moved, lost its socket or ended), and
  a stall on a connection with no soak tag (a phone call: its instructions are the node's);
  these are matched to a phone call's failover when one came in time, and listed otherwise;
- no session ended ``upstream_failed``, and no start was refused ``upstream_unavailable``, while
  its alias had a target the soak never made fail (``soak.routing.fallbacks``).

A connection fault (refuse, 429) is attributed, for the report only, to the session that started
on a fallback, or failed over at a reconnect, soonest after it (within ``CONNECT_WITHIN_S``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from soak.invariants import Violation
from soak.records import SessionRecord
from soak.routing import fallbacks, first_provider, stall_deadline

__all__ = [
    "STALL_REASONS",
    "Applied",
    "GatewayFailover",
    "applications",
    "check_failovers",
    "parse_node_log",
]

STALLS = frozenset({"stall_first", "stall_mid"})
STALL_REASONS = frozenset({"stall_first_output", "stall_mid_response"})
EARLY_S = 0.25  # clock tolerance: two processes' stamps of nearly the same moment
CONNECT_WITHIN_S = 5.0
VOICE_KINDS = frozenset({"voice_openai", "phone"})
_BREAK_EARLY_S = 0.5  # a barge-in stamped as its reply's first audio came, just before the stall


@dataclass(frozen=True)
class Applied:
    """One time a fault mode of the OpenAI fake applied (``soak.upstreams`` ``GET /applied``)."""

    kind: str  # "refuse", "status", "stall_first", "stall_mid"
    at: float  # the soak's clock
    tag: str | None = None  # the soak session whose connection it stalled
    connection: int | None = None


@dataclass(frozen=True)
class GatewayFailover:
    """A node's audit line ``upstream_failover``."""

    at: float  # the soak's clock
    session_id: str
    reason: str
    previous: str
    target: str


def applications(raw: Iterable[Mapping[str, Any]], origin: float) -> list[Applied]:
    """The fakes' ``applied`` entries, their monotonic times on the soak's clock (``origin``:
    its start on the machine's monotonic clock)."""
    found = [
        Applied(
            str(a["kind"]),
            float(a["at"]) - origin,
            None if a.get("tag") is None else str(a["tag"]),
            None if a.get("connection") is None else int(a["connection"]),
        )
        for a in raw
    ]
    return sorted(found, key=lambda a: a.at)


def parse_node_log(text: str, wall_origin: float) -> tuple[list[GatewayFailover], dict[str, str]]:
    """A node's log: its failovers (times on the soak's clock: ``wall_origin`` is its start on
    the wall clock), and its phone calls (the carrier's call id → the gateway's session id)."""
    failovers: list[GatewayFailover] = []
    calls: dict[str, str] = {}
    for line in text.splitlines():
        if "upstream_failover" not in line and "phone_call_started" not in line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict):
            continue
        event = entry.get("event")
        if event == "phone_call_started":
            calls[str(entry.get("call_id"))] = str(entry.get("session_id"))
        elif event == "upstream_failover":
            stamp = datetime.fromisoformat(str(entry["timestamp"]).replace("Z", "+00:00"))
            failovers.append(
                GatewayFailover(
                    stamp.timestamp() - wall_origin,
                    str(entry.get("session_id")),
                    str(entry.get("reason")),
                    str(entry.get("previous")),
                    str(entry.get("target")),
                )
            )
    return failovers, calls


def _voice(record: SessionRecord) -> bool:
    return record.kind in VOICE_KINDS


def _excuse(record: SessionRecord, low: float, high: float) -> str | None:
    """What of the session's own made a stall moot between ``low`` and ``high``, if anything."""
    for at, what in record.breaks:
        if low - _BREAK_EARLY_S <= at <= high:
            return f"{what} at {at:.1f} s"
    if record.ended_at is not None and low - EARLY_S <= record.ended_at <= high:
        return f"ended at {record.ended_at:.1f} s"
    return None


def _name(record: SessionRecord | None, session_id: str | None = None) -> str:
    if record is None:
        return session_id or "?"
    return f"s{record.number} ({record.kind})"


class _Ledger:
    """The gateway's failovers by session, each matched to one fault at most."""

    def __init__(self, failovers: Sequence[GatewayFailover]) -> None:
        self.failovers = sorted(failovers, key=lambda f: f.at)
        self.used: set[int] = set()

    def first(
        self, since: float, reasons: frozenset[str], session_ids: Iterable[str] | None = None
    ) -> tuple[int, GatewayFailover] | None:
        wanted = None if session_ids is None else set(session_ids)
        for index, failover in enumerate(self.failovers):
            if index in self.used or failover.at < since - EARLY_S:
                continue
            if failover.reason not in reasons:
                continue
            if wanted is not None and failover.session_id not in wanted:
                continue
            return index, failover
        return None


def _client_saw(record: SessionRecord | None, at: float) -> float | None:
    """When the client saw the failover the gateway logged at ``at`` (None: it did not)."""
    if record is None:
        return None
    seen = [f.at for f in record.failovers if abs(f.at - at) <= 2.0]
    return min(seen, key=lambda s: abs(s - at)) if seen else None


def check_failovers(
    applied: Sequence[Applied],
    records: Sequence[SessionRecord],
    gateway: Sequence[GatewayFailover],
    calls: Mapping[str, str],
    requested: Mapping[str, int] | None = None,
) -> tuple[list[Violation], dict[str, Any]]:
    """``calls``: a phone call's ``CallSid`` (its record's ``session_id``) → the gateway's
    session id. ``requested``: the server-wide faults asked for, by kind."""
    violations: list[Violation] = []
    by_tag = {r.tag: r for r in records}
    gateway_id = {
        r.number: calls.get(r.session_id or "", r.session_id or "") for r in records if r.session_id
    }
    by_gateway_id = {sid: r for r in records if (sid := gateway_id.get(r.number))}
    phones = {gateway_id[r.number] for r in records if r.kind == "phone" and r.number in gateway_id}
    ledger = _Ledger(gateway)
    rows: list[dict[str, Any]] = []
    verdicts: Counter[str] = Counter()
    for fault in sorted(applied, key=lambda a: (a.tag is None, a.at)):  # tagged ones first
        if fault.kind not in STALLS:
            continue
        record = by_tag.get(fault.tag or "")
        voice = record is None or _voice(record)  # untagged: a phone call's, spoken
        deadline = stall_deadline(fault.kind, voice)
        row: dict[str, Any] = {
            "at_s": round(fault.at, 3),
            "kind": fault.kind,
            "deadline_s": deadline,
            "met_by": _name(record, fault.tag),
        }
        if record is None:
            found = ledger.first(fault.at, STALL_REASONS, phones)
            if found is not None and found[1].at <= fault.at + deadline:
                ledger.used.add(found[0])
                failover = found[1]
                phone = by_gateway_id.get(failover.session_id)
                row.update(
                    met_by=_name(phone, failover.session_id),
                    verdict="ok",
                    reason=failover.reason,
                    after_s=round(failover.at - fault.at, 2),
                    client_saw=False,
                )
            else:
                row.update(
                    verdict="not judged",
                    note="no soak tag on its connection and no phone call failed over in time",
                )
            verdicts[row["verdict"]] += 1
            rows.append(row)
            continue
        sid = gateway_id.get(record.number, "")
        found = ledger.first(fault.at, STALL_REASONS, [sid])
        if found is not None and found[1].at <= fault.at + deadline:
            ledger.used.add(found[0])
            failover = found[1]
            seen = _client_saw(record, failover.at)
            row.update(
                verdict="ok",
                reason=failover.reason,
                after_s=round(failover.at - fault.at, 2),
                client_saw=seen is not None,
            )
            if seen is not None:
                row["client_after_s"] = round(seen - fault.at, 2)
        else:
            excuse = _excuse(record, fault.at, fault.at + deadline)
            if excuse is not None:
                row.update(verdict="not judged", note=f"moot: {excuse}")
            elif found is not None:
                ledger.used.add(found[0])
                late = found[1].at - fault.at
                row.update(verdict="late", reason=found[1].reason, after_s=round(late, 2))
                violations.append(
                    Violation(
                        "failover",
                        f"{_name(record)}: an OpenAI {fault.kind} at {fault.at:.1f} s, failed "
                        f"over ({found[1].reason}) {late:.1f} s later, past {deadline:g} s",
                    )
                )
            else:
                row.update(verdict="missing")
                violations.append(
                    Violation(
                        "failover",
                        f"{_name(record)}: an OpenAI {fault.kind} at {fault.at:.1f} s, no "
                        f"failover within {deadline:g} s (failovers seen: "
                        f"{[f.as_dict() for f in record.failovers]})",
                    )
                )
        verdicts[row["verdict"]] += 1
        rows.append(row)
    rows.sort(key=lambda r: r["at_s"])
    rows += _connect_rows(applied, records, ledger)
    violations += _healthy_fallbacks(records)
    summary = _summary(applied, records, ledger, by_gateway_id, requested or {})
    summary["stall_verdicts"] = dict(verdicts)
    summary["applications"] = sorted(rows, key=lambda r: r["at_s"])
    return violations, summary


def _connect_rows(
    applied: Sequence[Applied], records: Sequence[SessionRecord], ledger: _Ledger
) -> list[dict[str, Any]]:
    """Refusals and 429s, attributed to the session that started on a fallback (or resumed,
    or failed over on a reconnect) soonest after each, when there is one."""
    starts = sorted(
        (r.started_at, r)
        for r in records
        if r.started_at is not None
        and r.alias is not None
        and r.started_on is not None
        and r.started_on != first_provider(r.alias)
    )
    claimed: set[int] = set()
    rows = []
    for fault in applied:
        if fault.kind in STALLS:
            continue
        row: dict[str, Any] = {"at_s": round(fault.at, 3), "kind": fault.kind, "verdict": "shown"}
        start = next(
            (
                (at, r)
                for at, r in starts
                if r.number not in claimed
                and fault.at - EARLY_S <= at <= fault.at + CONNECT_WITHIN_S
            ),
            None,
        )
        lost = ledger.first(fault.at, frozenset({"lost", "closed", "connect"}))
        if lost is not None and lost[1].at > fault.at + CONNECT_WITHIN_S:
            lost = None
        if start is not None and (lost is None or start[0] <= lost[1].at):
            claimed.add(start[1].number)
            row.update(
                met_by=_name(start[1]),
                note=f"started on {start[1].started_on}, {start[0] - fault.at:.1f} s later",
            )
        elif lost is not None:
            ledger.used.add(lost[0])
            row.update(
                met_by=lost[1].session_id,
                note=f"failed over ({lost[1].reason}) {lost[1].at - fault.at:.1f} s later",
            )
        else:
            row.update(met_by=None, note="no session seen starting or moving on a fallback")
        rows.append(row)
    return rows


def _healthy_fallbacks(records: Sequence[SessionRecord]) -> list[Violation]:
    found = []
    for record in records:
        healthy = fallbacks(record.alias)
        if not healthy:
            continue
        name = f"{_name(record)} on {record.alias}"
        if record.end_reason == "upstream_failed":
            found.append(
                Violation(
                    "failover",
                    f"{name} ended upstream_failed while {', '.join(healthy)} was healthy",
                )
            )
        refused = [at for at, code in record.start_errors if code == "upstream_unavailable"]
        if refused:
            found.append(
                Violation(
                    "failover",
                    f"{name}: its start was refused upstream_unavailable at {refused[0]:.1f} s "
                    f"while {', '.join(healthy)} was healthy",
                )
            )
    return found


def _summary(
    applied: Sequence[Applied],
    records: Sequence[SessionRecord],
    ledger: _Ledger,
    by_gateway_id: Mapping[str, SessionRecord],
    requested: Mapping[str, int],
) -> dict[str, Any]:
    unexplained = [
        f
        for i, f in enumerate(ledger.failovers)
        if i not in ledger.used and f.reason in STALL_REASONS
    ]
    on_fallback = [
        r
        for r in records
        if r.alias is not None
        and r.started_on is not None
        and r.started_on != first_provider(r.alias)
    ]
    seen = [
        {"session": f"s{r.number}", "kind": r.kind, **f.as_dict()}
        for r in records
        for f in r.failovers
    ]
    return {
        "requested": dict(requested),
        "applied": dict(Counter(a.kind for a in applied)),
        "by_reason": dict(Counter(f.reason for f in ledger.failovers)),
        "by_reason_phone": dict(
            Counter(
                f.reason
                for f in ledger.failovers
                if (r := by_gateway_id.get(f.session_id)) is not None and r.kind == "phone"
            )
        ),
        "seen_by_clients": dict(Counter(f.reason for r in records for f in r.failovers)),
        "started_on_fallback": dict(Counter(f"{r.kind} on {r.started_on}" for r in on_fallback)),
        "stalls_without_fault": [
            {
                "at_s": round(f.at, 3),
                "session": _name(by_gateway_id.get(f.session_id), f.session_id),
                "reason": f.reason,
            }
            for f in unexplained
        ],
        "client_failovers": seen,
    }
