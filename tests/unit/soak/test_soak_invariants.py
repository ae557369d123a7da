"""The soak's checks on what a run left behind: tools, sessions, latency, memory, logs; and
the plan of its fleet faults. Pure: made-up records in, violations out."""

from __future__ import annotations

import json

from soak.invariants import check_latency, check_sessions, check_tools, percentile
from soak.logscan import scan_log
from soak.monitor import ResourceSample
from soak.procfs import parse_tcp_table
from soak.records import CallSeen, LatencySample, SessionRecord
from soak.resources import growth_rows
from soak.schedule import plan_fleet_faults


def record(number: int = 1, kind: str = "text_openai", provider: str = "openai") -> SessionRecord:
    r = SessionRecord(number, kind, provider, f"s{number}", created_at=0.0)
    r.started_at, r.end_reason = 1.0, "client"
    return r


def finished_call(run: str, *, answered: bool = True) -> CallSeen:
    return CallSeen("soak_count", 1.0, 2.0, True, run, answered_after=answered)


def journal(*lines: tuple[str, str]) -> list[dict[str, str]]:
    return [
        {"run": run, "phase": phase, "tool": "soak_count", "label": run} for run, phase in lines
    ]


def test_a_call_that_ran_twice_or_a_result_given_twice_or_answered_twice_is_a_violation() -> None:
    lines = journal(("r1", "start"), ("r1", "end"), ("r1", "start"), ("r2", "start"), ("r2", "end"))
    tally = {
        "given": {"r1": 1, "r2": 1},
        "answered": {"r2": 2},
        "duplicates": [{"run": "r2", "upstream": "openai", "tag": "s1"}],
    }
    violations, summary = check_tools(lines, tally, [])
    assert [(v.invariant, v.detail.split()[0]) for v in violations] == [
        ("tool_once", "r1"),
        ("result_once", "r2"),
        ("result_once", "the"),
    ]
    assert summary["executions"] == 3


def test_one_request_run_under_two_call_ids_is_a_violation_but_not_the_phones_greeting() -> None:
    lines = [
        {"run": run, "phase": "start", "tool": "soak_count", "label": label}
        for run, label in (("k1", "s1t1"), ("k2", "s1t1"), ("k3", "phone"), ("k4", "phone"))
    ]
    violations, _ = check_tools(lines, {}, [])
    assert [v.detail for v in violations] == ["the request s1t1 ran as 2 calls: ['k1', 'k2']"]


def test_a_finished_result_that_never_reached_the_model_is_a_violation_but_not_on_local() -> None:
    remote, local = record(1), record(2, "text_local", "local")
    remote.calls["c1"] = finished_call("r1")
    remote.calls["c2"] = finished_call("r2", answered=False)  # nothing answered after it yet
    local.calls["c3"] = finished_call("r3")
    lines = journal(*[(r, p) for r in ("r1", "r2", "r3") for p in ("start", "end")])
    violations, _ = check_tools(lines, {"given": {}}, [remote, local])
    assert [v.detail for v in violations] == [
        "s1 c1 (soak_count): the client saw it finish and the model reply after, but the "
        "result never reached the model"
    ]


def test_sessions_must_end_as_their_kind_expects_and_their_problems_are_named() -> None:
    fine, lost, shut, phone = record(1), record(2), record(3), record(4, "phone", "twilio")
    lost.end_reason, lost.lost = None, "resume_failed: gone"
    shut.end_reason = "shutdown"
    phone.end_reason = "shutdown"  # a call does not move: a drain ends it
    fine.problem("error invalid_json without bad input of its own: x")
    refused = SessionRecord(5, "text_chat", "chat", "s5", 0.0, refused="store_unavailable")
    violations, summary = check_sessions([fine, lost, shut, phone, refused])
    assert [v.invariant for v in violations] == ["session_end", "session_end", "isolation"]
    assert "s2 (text_openai, None) lost" in violations[0].detail
    assert "reason shutdown" in violations[1].detail
    assert summary["began"] == 4
    assert summary["refused"] == {"store_unavailable": 1}


def test_latency_under_faults_is_judged_on_untouched_turns_against_the_calm_phase() -> None:
    quiet, hit = record(1), record(2)
    hit.disturb(60.0)
    calm = [LatencySample("text", "openai", t / 10, t / 10, 10.0, 1) for t in range(100)]
    faulty = [
        LatencySample("text", "openai", 40 + t / 10, 40 + t / 10, 25.0, 1) for t in range(100)
    ]
    touched = [LatencySample("text", "openai", 60.5, 60.0, 900.0, 2)]
    violations, (row,) = check_latency([*calm, *faulty, *touched], [quiet, hit], calm_end=30.0)
    assert row["faults_all"]["n"] == 101  # the touched turn counts there only
    assert row["faults_undisturbed"]["n"] == 100
    assert row["ratio_p99"] == 2.5
    assert [v.invariant for v in violations] == ["latency"]
    few = [LatencySample("voice", "openai", t, t, 500.0 + t, 1) for t in range(99)]
    assert check_latency(few, [quiet], 0.5)[0] == []  # a p99 of fewer turns is their slowest
    assert percentile([5.0, 1.0, 3.0], 0.5) == 3.0


def samples(role: str, pid: int, points: list[tuple[float, int, int]]) -> list[ResourceSample]:
    return [ResourceSample(at, role, pid, rss, fds, 0.0) for at, rss, fds in points]


def test_a_node_whose_memory_grows_is_a_violation_files_may_follow_its_sessions() -> None:
    steady = [(float(t), 100_000, 100) for t in range(0, 200, 5)]
    growing = [(float(t), 100_000 + t * 200, 100 + t // 4) for t in range(0, 200, 5)]
    # Node a peaks at 30 s (node b drained), then holds fewer sessions, slowly more again.
    sessions = [(float(t), "a", 90 if t == 30 else 40 + t // 10) for t in range(0, 200, 5)]
    load = [*samples("node-a", 1, growing), *samples("node-b", 2, steady)]
    load += samples("driver", 3, growing)  # shown, not judged
    violations, rows = growth_rows(load, sessions, 20.0, 190.0, 60.0)
    assert [v.detail.split(":")[0] for v in violations] == ["node-a (pid 1)"]
    assert "rss grew" in violations[0].detail
    node_a = rows[0]
    assert node_a["from_s"] == 35.0  # after its peak
    assert node_a["fds_growth"] > 0.10 > node_a["fds_growth_beyond_sessions"]
    short = growth_rows(samples("node-b", 4, steady[:5]), [], 20.0, 190.0, 60.0)[1]
    assert short[0]["measured"] is False
    # Its busiest moment near the end: nothing left to judge after it.
    late = [(float(t), "b", 80 if t == 180 else 40) for t in range(0, 200, 5)]
    assert (
        growth_rows(samples("node-b", 2, steady), late, 20.0, 190.0, 60.0)[1][0]["measured"]
        is False
    )


def test_logs_with_tracebacks_or_lines_that_are_not_json_are_not_clean() -> None:
    lines = [
        json.dumps({"event": "ok", "level": "info"}),
        json.dumps({"event": "tool_handler_crashed", "level": "error"}),
        json.dumps(
            {
                "event": "x_failed",
                "level": "error",
                "exception": "Traceback (most recent call last):\n...",
            }
        ),
        "Task was destroyed but it is pending!",
    ]
    found = scan_log("node-a.1", "\n".join(lines), json_lines=True)
    assert (found.traceback_count, found.not_json_count, len(found.suspicious)) == (1, 1, 1)
    assert found.errors == {"tool_handler_crashed": 1, "x_failed": 1}
    assert not found.clean
    assert scan_log("node-b.1", lines[0], json_lines=True).clean


def test_fleet_faults_alternate_nodes_and_keep_redis_between_and_clear_of_the_end() -> None:
    plan = plan_fleet_faults(calm_end=180.0, end=600.0, restart_every_s=180.0, redis=True)
    assert plan.restarts == ((270.0, "a"), (450.0, "b"))
    assert plan.redis_at == 360.0
    short = plan_fleet_faults(calm_end=18.0, end=60.0, restart_every_s=25.0, redis=True)
    assert short.restarts == ((30.5, "a"),)
    assert short.redis_at is not None
    assert abs(short.redis_at - 30.5) >= 10
    assert plan_fleet_faults(18.0, 60.0, 0.0, redis=False) == type(plan)((), None)


def test_the_tcp_table_names_each_socket_by_its_inode() -> None:
    text = (
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
        "timeout inode\n"
        "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  0  0 111 1\n"
        "   1: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000  0  0 222 1\n"
    )
    table = parse_tcp_table(text)
    assert table[111].listening
    assert table[111].local_port == 8080
    assert (table[222].remote_port, table[222].listening) == (50000, False)
