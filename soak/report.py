"""The soak's report: ``report.json`` (everything) and ``report.md`` (what a reader needs: the
verdict, sessions by kind, turns, tool calls, faults by kind with each one's time, failovers by
reason and the server-wide faults each with the session that met it, violations, latency with
and without faults, memory and open files, cleanup), and the plots."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from soak.config import SoakConfig
from soak.monitor import Monitor
from soak.plots import render_plots

__all__ = ["markdown", "write_report"]


def write_report(report: dict[str, Any], monitor: Monitor, config: SoakConfig) -> None:
    config.out.mkdir(parents=True, exist_ok=True)
    plots: list[Path] = []
    if config.plots is not None:
        plots = render_plots(
            monitor.samples,
            monitor.node_sessions,
            report["faults"],
            config.calm_end_s,
            config.plots,
        )
    report["plots"] = [str(p) for p in plots]
    report["samples"] = [
        {"at_s": round(s.at, 1), "role": s.role, "pid": s.pid, "rss_kb": s.rss_kb, "fds": s.fds}
        for s in monitor.samples
    ]
    (config.out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    (config.out / "report.md").write_text(markdown(report))


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join("" if v is None else str(v) for v in row) + " |" for row in rows]
    return [*lines, ""]


def _fds_growth(row: dict[str, Any]) -> str:
    beyond = row.get("fds_growth_beyond_sessions")
    text = f"{row['fds_growth']:+.1%}"
    return text if beyond is None else f"{text} ({beyond:+.1%})"


def _counts(mapping: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(mapping.items())) or "none"


def markdown(report: dict[str, Any]) -> str:
    config, sessions, tools = report["config"], report["sessions"], report["tools"]
    violations = report["violations"]
    verdict = "PASS" if not violations else f"FAIL: {len(violations)} invariant violations"
    out = [
        f"# Soak report: {verdict}",
        "",
        f"{config['minutes']:g} minute{'' if config['minutes'] == 1 else 's'}, "
        f"{config['sessions']} sessions kept alive, faults at "
        f"{config['fault_rate_per_min']:g}/min after {config['calm_end_s']:.0f} s of calm "
        f"(its latency baseline from {config['calm_from_s']:.0f} s, once the sessions started); "
        f"a node restarted every {config['restart_every_s']:g} s; Redis restarted "
        f"{'once' if config['redis_restart'] else 'never'}; seed {config['seed']}. "
        f"The load stopped at {report['timeline']['load_end_s']} s; every session had ended "
        f"{report['timeline']['wind_down_s']} s later.",
        "",
        "## Sessions",
        "",
        f"{sessions['sessions']} sessions, {sessions['began']} began "
        f"(refused: {_counts(sessions['refused'])}); {sessions['turns']} turns; "
        f"{sessions['tool_calls']} tool calls; {sessions['barge_ins']} barge-ins; "
        f"{sessions['resumes']} resumes ({sessions['recoveries']} after a node was lost).",
        "",
    ]
    kinds = sorted(set(sessions["by_kind"]) | set(sessions["turns_by_kind"]))
    out += _table(
        ["kind", "began", "turns"],
        [[k, sessions["by_kind"].get(k, 0), sessions["turns_by_kind"].get(k, 0)] for k in kinds],
    )
    out += [
        f"End reasons: {_counts(sessions['end_reasons'])}. Errors the clients got, by code: "
        f"{_counts(sessions['errors_by_code'])}.",
        "",
        f"Tool calls by tool: {_counts(sessions['tool_calls_by_tool'])}. Executions journaled: "
        f"{tools['executions']} ({_counts(tools['executions_by_tool'])}); finished "
        f"{tools['finished']}; results given to a model {tools['results_given']}, answered "
        f"{tools['results_answered']}.",
        "",
        "## Faults injected",
        "",
    ]
    by_kind: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    for fault in report["faults"]:
        by_kind[fault["kind"]] += 1
        failed[fault["kind"]] += 0 if fault["ok"] else 1
    out += _table(
        ["kind", "injected", "not carried out"],
        [[kind, count, failed[kind]] for kind, count in sorted(by_kind.items())],
    )
    out += _schedule(report.get("schedule"))
    out += _failovers(report.get("failovers"))
    out += ["## Invariant violations", ""]
    out += [f"- **{v['invariant']}**: {v['detail']}" for v in violations] or ["None."]
    out += ["", "## Relay latency (ms): calm phase against the fault phase", ""]
    rows = []
    for row in report["latency"]:
        calm, every, clean = row["calm"], row["faults_all"], row["faults_undisturbed"]
        rows.append(
            [
                row["kind"],
                calm["n"],
                calm["p50_ms"],
                calm["p99_ms"],
                every["n"],
                every["p50_ms"],
                every["p99_ms"],
                clean["n"],
                clean["p50_ms"],
                clean["p99_ms"],
                row.get("ratio_p99") if row["checked"] else "not enough samples",
                row["faults_away_from_fleet"]["n"],
                row["faults_away_from_fleet"]["p99_ms"],
            ]
        )
    out += _table(
        [
            "kind",
            "calm n",
            "p50",
            "p99",
            "faults n",
            "p50",
            "p99",
            "untouched n",
            "p50",
            "p99",
            "p99 ratio",
            "away from fleet faults n",
            "p99",
        ],
        rows,
    )
    out += [
        "Text: from `text.send` to the first `text.delta` (plain messages). Voice: from the "
        "last speech frame sent to the first audio of the reply (server VAD's silence "
        'included). Phone: the same on a Twilio stream. "Untouched": turns of sessions no '
        "fault, move or resume touched within 2 s; the p99 ratio is theirs against calm (judged "
        'with 100 turns or more in both phases). "Away from fleet faults": of those, the '
        "turns outside the 15 s after a node's restart began and the 10 s after Redis's.",
        "",
        "## Memory and open files",
        "",
    ]
    out += _table(
        [
            "process",
            "pid",
            "window (s)",
            "RSS MB",
            "RSS growth",
            "files (pools apart)",
            "growth (beyond sessions)",
            "judged",
        ],
        [
            [
                r["role"],
                r["pid"],
                f"{r['from_s']}–{r['to_s']}",
                f"{r['rss_mb'][0]} → {r['rss_mb'][1]}",
                f"{r['rss_growth']:+.1%}",
                f"{r['fds'][0]} → {r['fds'][1]}",
                _fds_growth(r),
                "yes" if r["judged"] else r.get("note", "shown"),
            ]
            if r["measured"]
            else [r["role"], r["pid"], r["note"], "", "", "", "", ""]
            for r in report["resources"]
        ],
    )
    out += [f"![{Path(p).stem}]({p})" for p in report.get("plots", [])] + [""]
    driver = report["driver"]
    out += [
        "## The driver",
        "",
        f"CPU {driver['cpu_s']} s over the load ({driver['cpu_share_of_a_core']:.0%} of a "
        f"core); event-loop lag p99 {driver['loop_lag_p99_ms']} ms. The upstream fakes run in "
        "processes of their own, one per fake (the `upstreams-*` rows).",
        "",
        "## After the load",
        "",
    ]
    for name, node in report["cleanup"]["nodes"].items():
        out.append(
            f"- node {name}: {node['active_sessions']} sessions, {node['client_sockets']} client "
            f"sockets, upstream sockets {_counts(node['upstream_sockets'])}, "
            f"{node['redis_sockets']} to Redis, {node['fds']} open files "
            f"({node['fds_at_start']} at its start)"
        )
    cleanup_driver = report["cleanup"]["driver"]
    out += [
        f"- driver: {len(cleanup_driver['tasks'])} tasks, {cleanup_driver['sockets']} sockets",
        "",
        "## Logs",
        "",
    ]
    for log in report["logs"]:
        out.append(
            f"- {log['source']}: {log['lines']} lines, {log['tracebacks']} tracebacks, "
            f"{log['not_json']} not JSON; errors: {_counts(log['errors'])}"
        )
    out += ["", "## Every fault, in order", ""]
    out += _table(
        ["at (s)", "kind", "target", "ok", "detail"],
        [[f["at_s"], f["kind"], f["target"], f["ok"], f["detail"]] for f in report["faults"]],
    )
    return "\n".join(out)


def _failovers(failovers: dict[str, Any] | None) -> list[str]:
    """Failovers by reason, and each server-wide fault with the session that met it."""
    if failovers is None:
        return []
    out = [
        "## Failovers",
        "",
        f"By reason, as the nodes logged them (every session, phone calls included): "
        f"{_counts(failovers['by_reason'])}; of these, phone calls' "
        f"{_counts(failovers['by_reason_phone'])}. Seen by the clients "
        f"(`session.provider_changed`): {_counts(failovers['seen_by_clients'])}. Sessions that "
        f"started on a fallback (their first target refused, or its breaker open): "
        f"{_counts(failovers['started_on_fallback'])}.",
        "",
        f"The OpenAI fake's server-wide faults: asked for {_counts(failovers['requested'])}; "
        f"applied {_counts(failovers['applied'])} (a refusal or a 429 once per connection it "
        "met). Each stall is judged: a failover of the session it met within the deadline "
        f"plus 1 s ({_counts(failovers['stall_verdicts'])}).",
        "",
    ]
    out += _table(
        ["at (s)", "applied", "met by", "failover", "after (s)", "deadline (s)", "verdict", "note"],
        [
            [
                a["at_s"],
                a["kind"],
                a.get("met_by"),
                a.get("reason"),
                a.get("after_s"),
                a.get("deadline_s"),
                a["verdict"],
                a.get("note", ""),
            ]
            for a in failovers["applications"]
        ],
    )
    stray = failovers["stalls_without_fault"]
    if stray:
        out += [
            f"Stall failovers no fault of the soak explains ({len(stray)}: a slow machine can "
            "make a healthy upstream late): "
            + ", ".join(f"{f['session']} {f['reason']} at {f['at_s']} s" for f in stray),
            "",
        ]
    return out


def _schedule(schedule: dict[str, Any] | None) -> list[str]:
    """The schedule planned from the seed, and what became of each fault of it."""
    if schedule is None:
        return []
    faults = schedule["session_faults"]
    handed = sum(1 for f in faults if f.get("hit") is not None)
    unaimed = sum(1 for f in faults if f["aimed_at_s"] is None)
    wide = sum(1 for f in faults if str(f.get("note", "")).startswith("server-wide"))
    out = [
        f"## The schedule (seed {schedule['seed']}, digest {schedule['digest']})",
        "",
        f"Planned from the seed before the load began: {len(schedule['fleet'])} fleet faults and "
        f"{len(faults)} session faults; {handed} of these were handed to a session, {wide} were "
        "server-wide (aimed at none: see the failovers), "
        f"{len(faults) - handed - unaimed - wide} found none that could meet them, {unaimed} came "
        "after the load. A run with the same seed and settings has the same plan (the same "
        "digest); which of a slot's sessions a fault met depends on the moment (`docs/soak.md`).",
        "",
    ]
    out += _table(
        ["planned at (s)", "kind", "target", "began at (s)", "ok"],
        [[f["at_s"], f["kind"], f["target"], f["began_s"], f["ok"]] for f in schedule["fleet"]],
    )
    out += _table(
        ["planned at (s)", "kind", "slot", "aimed at (s)", "given to", "note"],
        [
            [
                f["at_s"],
                f["kind"],
                f["slot"],
                f["aimed_at_s"],
                None
                if f.get("hit") is None
                else f"{f['hit']} (slot {f['hit_slot']}, its session #{f['hit_ordinal']})",
                f.get("note", ""),
            ]
            for f in faults
        ],
    )
    return out
