"""The soak's failovers: its model aliases resolve as the soak means them (the OpenAI kinds may
move, every other kind keeps its provider alone), and the judgment of the OpenAI fake's
server-wide faults: a stall that met a session must have moved it within the deadline plus a
second, unless the session's own doing made it moot; no session on an alias with a healthy
target may end ``upstream_failed``. Pure: made-up records, fake applications, log lines."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from gateway.routing import parse_catalog, pick_alias
from soak.failovers import (
    Applied,
    GatewayFailover,
    applications,
    check_failovers,
    parse_node_log,
)
from soak.records import FailoverSeen, SessionRecord
from soak.routing import (
    DEFAULT_ALIAS,
    PHONE_ALIASES,
    alias_document,
    alias_of,
    fallbacks,
    stall_deadline,
)
from soak.schedule import FAULT_KINDS, SERVER_WIDE, UPSTREAM_KINDS

PROVIDERS = ("openai", "gemini", "chat", "local")


def session(
    number: int, kind: str = "text_openai", provider: str = "openai", alias: str | None = None
) -> SessionRecord:
    record = SessionRecord(number, kind, provider, f"s{number}", created_at=0.0)
    record.session_id = f"sess_{number}"
    record.started_at, record.end_reason = 1.0, "client"
    record.alias = alias if alias is not None else alias_of(kind)
    record.started_on = provider
    return record


def failover(at: float, sid: str, reason: str = "stall_first_output") -> GatewayFailover:
    return GatewayFailover(at, sid, reason, "openai/*", "gemini/*")


# The alias file ---------------------------------------------------------------------------------


def test_the_openai_kinds_name_an_alias_that_fails_over_and_the_others_keep_their_provider() -> (
    None
):
    catalog = parse_catalog(alias_document(), PROVIDERS)
    assert catalog.default == DEFAULT_ALIAS
    roles = ("caregiver",)

    def targets(model: str | None, provider: str | None) -> list[str] | None:
        alias = pick_alias(catalog, model, provider, roles, None)
        return None if alias is None else [t.provider for t in alias.targets]

    assert targets(alias_of("voice_openai"), None) == ["openai", "gemini"]
    assert targets(alias_of("text_openai"), None) == ["openai", "chat"]
    # Named by provider, no model: outside the default alias, that provider alone.
    for kind, provider in (
        ("text_gemini", "gemini"),
        ("text_chat", "chat"),
        ("text_local", "local"),
    ):
        assert alias_of(kind) is None
        assert targets(None, provider) is None
    # Node a's calls fail over to Gemini; node b's stay on Gemini alone (no model, gemini).
    assert targets(PHONE_ALIASES["a"], "openai") == ["openai", "gemini"]
    assert "b" not in PHONE_ALIASES
    assert targets(None, "gemini") is None
    assert fallbacks("soak-voice") == ("gemini",)
    assert fallbacks(DEFAULT_ALIAS) == ()


def test_the_server_wide_faults_are_upstream_kinds_of_the_schedule() -> None:
    assert {"openai_refuse", "openai_429", "openai_stall_first", "openai_stall_mid"} == SERVER_WIDE
    assert set(UPSTREAM_KINDS) >= SERVER_WIDE
    assert set(FAULT_KINDS) >= SERVER_WIDE


def test_a_stall_deadline_is_the_one_that_applies_plus_a_second() -> None:
    assert stall_deadline("stall_first", voice=True) == 3.5
    assert stall_deadline("stall_first", voice=False) == 6.0
    # Mid-response: the gap (3 s), or the first output's when nothing counted as output yet.
    assert stall_deadline("stall_mid", voice=True) == 4.0
    assert stall_deadline("stall_mid", voice=False) == 6.0


# What the run left behind ---------------------------------------------------------------------


def test_the_nodes_logs_give_each_failover_on_the_soaks_clock_and_each_calls_session() -> None:
    origin = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC).timestamp()
    lines = [
        json.dumps(
            {
                "session_id": "sess_1",
                "previous": "openai/*",
                "target": "gemini/*",
                "reason": "stall_mid_response",
                "event": "upstream_failover",
                "logger": "audit",
                "timestamp": "2026-01-01T12:00:42.500000Z",
            }
        ),
        "not json: upstream_failover",
        json.dumps({"call_id": "CA1", "session_id": "sess_9", "event": "phone_call_started"}),
        json.dumps({"event": "tool_call", "session_id": "sess_1"}),
    ]
    failovers, calls = parse_node_log("\n".join(lines), origin)
    assert failovers == [
        GatewayFailover(42.5, "sess_1", "stall_mid_response", "openai/*", "gemini/*")
    ]
    assert calls == {"CA1": "sess_9"}


def test_the_fakes_applications_come_on_the_soaks_clock_in_order() -> None:
    raw = [
        {"kind": "stall_mid", "at": 1010.0, "tag": "s3", "connection": 7},
        {"kind": "refuse", "at": 1005.5, "tag": None, "connection": None},
    ]
    assert applications(raw, origin=1000.0) == [
        Applied("refuse", 5.5),
        Applied("stall_mid", 10.0, "s3", 7),
    ]


# The judgment -----------------------------------------------------------------------------------


def test_a_stall_the_session_failed_over_from_in_time_holds_and_is_attributed_to_it() -> None:
    voice = session(1, "voice_openai")
    voice.failovers.append(FailoverSeen(23.1, "stall_first_output", "gemini", "openai/*", False))
    text = session(2)
    applied = [Applied("stall_first", 20.0, "s1", 4), Applied("stall_mid", 30.0, "s2", 5)]
    gateway = [failover(23.0, "sess_1"), failover(35.5, "sess_2", "stall_mid_response")]
    violations, summary = check_failovers(applied, [voice, text], gateway, {})
    assert violations == []
    first, mid = summary["applications"]
    assert (first["met_by"], first["verdict"], first["after_s"]) == (
        "s1 (voice_openai)",
        "ok",
        3.0,
    )
    assert first["client_saw"]
    assert first["client_after_s"] == 3.1
    assert (mid["met_by"], mid["verdict"], mid["reason"], mid["client_saw"]) == (
        "s2 (text_openai)",
        "ok",
        "stall_mid_response",
        False,
    )
    assert summary["by_reason"] == {"stall_first_output": 1, "stall_mid_response": 1}
    assert summary["seen_by_clients"] == {"stall_first_output": 1}
    assert summary["stall_verdicts"] == {"ok": 2}


def test_a_stall_with_no_failover_or_a_late_one_is_a_violation() -> None:
    voice, text = session(1, "voice_openai"), session(2)
    applied = [Applied("stall_first", 20.0, "s1"), Applied("stall_first", 40.0, "s2")]
    gateway = [failover(47.5, "sess_2")]  # text: 5 s + 1 s allowed, 7.5 s taken
    violations, summary = check_failovers(applied, [voice, text], gateway, {})
    assert [v.invariant for v in violations] == ["failover", "failover"]
    assert "no failover within 3.5 s" in violations[0].detail
    assert "7.5 s later, past 6 s" in violations[1].detail
    assert summary["stall_verdicts"] == {"missing": 1, "late": 1}


def test_a_stall_made_moot_by_the_sessions_own_doing_is_not_judged() -> None:
    barged, moved, ended = session(1, "voice_openai"), session(2), session(3)
    barged.broke(20.1, "barge-in")  # the user talked over the reply that had just begun
    moved.broke(32.0, "moved")
    ended.ended_at = 51.0
    before = session(4, "voice_openai")
    before.broke(55.0, "barge-in")  # long before: the stall met the reply to what came after
    applied = [
        Applied("stall_mid", 20.0, "s1"),
        Applied("stall_first", 30.0, "s2"),
        Applied("stall_first", 50.0, "s3"),
        Applied("stall_first", 60.0, "s4"),
    ]
    violations, summary = check_failovers(applied, [barged, moved, ended, before], [], {})
    assert [r["verdict"] for r in summary["applications"]] == [
        "not judged",
        "not judged",
        "not judged",
        "missing",
    ]
    assert summary["applications"][0]["note"] == "moot: barge-in at 20.1 s"
    assert len(violations) == 1
    assert violations[0].detail.startswith("s4 (voice_openai)")


def test_an_untagged_stall_is_a_phone_calls_when_one_failed_over_in_time() -> None:
    call = session(1, "phone", "twilio", alias="soak-voice")
    call.session_id = "CA1"
    applied = [Applied("stall_first", 10.0), Applied("stall_first", 40.0)]
    gateway = [failover(12.6, "sess_9")]
    violations, summary = check_failovers(applied, [call], gateway, {"CA1": "sess_9"})
    assert violations == []
    met, unmet = summary["applications"]
    assert (met["met_by"], met["verdict"], met["after_s"]) == ("s1 (phone)", "ok", 2.6)
    assert unmet["verdict"] == "not judged"
    assert summary["by_reason_phone"] == {"stall_first_output": 1}


def test_one_failover_answers_for_one_stall_only() -> None:
    text = session(1)
    applied = [Applied("stall_first", 10.0, "s1"), Applied("stall_first", 11.0, "s1")]
    violations, _ = check_failovers(applied, [text], [failover(13.0, "sess_1")], {})
    assert len(violations) == 1
    assert "at 11.0 s, no failover" in violations[0].detail


def test_a_stall_failover_no_fault_explains_is_shown_not_judged() -> None:
    text = session(1)
    violations, summary = check_failovers([], [text], [failover(13.0, "sess_1")], {})
    assert violations == []
    assert summary["stalls_without_fault"] == [
        {"at_s": 13.0, "session": "s1 (text_openai)", "reason": "stall_first_output"}
    ]


def test_ending_upstream_failed_or_a_refused_start_while_the_alias_had_a_healthy_target() -> None:
    failed, refused = session(1, "voice_openai"), session(2)
    failed.end_reason = "upstream_failed"
    refused.start_errors.append((12.0, "upstream_unavailable"))
    alone = session(3, "text_gemini", "gemini")  # no alias: its own provider's failure is not this
    alone.end_reason = "upstream_failed"
    retried = session(4)
    retried.start_errors.append((15.0, "store_unavailable"))
    violations, _ = check_failovers([], [failed, refused, alone, retried], [], {})
    assert [v.detail for v in violations] == [
        "s1 (voice_openai) on soak-voice ended upstream_failed while gemini was healthy",
        "s2 (text_openai) on soak-text-openai: its start was refused upstream_unavailable at "
        "12.0 s while chat was healthy",
    ]


def test_a_refusal_is_attributed_to_the_session_that_started_on_a_fallback_after_it() -> None:
    early, fallback, other = session(1), session(2, "voice_openai"), session(3)
    early.started_at, early.started_on = 9.0, "chat"  # before the fault: not its doing
    fallback.started_at, fallback.started_on = 11.2, "gemini"
    other.started_at = 11.5  # started on OpenAI: it did not meet it
    applied = [Applied("refuse", 10.0), Applied("status", 30.0)]
    violations, summary = check_failovers(
        applied, [early, fallback, other], [failover(31.0, "sess_3", "lost")], {}
    )
    assert violations == []
    refuse, status = summary["applications"]
    assert (refuse["met_by"], refuse["note"]) == (
        "s2 (voice_openai)",
        "started on gemini, 1.2 s later",
    )
    assert (status["met_by"], status["note"]) == ("sess_3", "failed over (lost) 1.0 s later")
    assert summary["started_on_fallback"] == {"text_openai on chat": 1, "voice_openai on gemini": 1}
