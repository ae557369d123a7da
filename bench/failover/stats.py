"""The pure parts of ``scripts/bench failover``: what the fallback heard, the distributions, the
targets and the verdicts, the table. No sockets, no clock: samples in, summaries out
(``tests/unit/bench/test_failover_bench_stats.py``).

A sample is one fault (a dict, as ``failover.json`` keeps it): ``kind``, ``variant``
(``voice``: a spoken utterance the fallback must hear and answer; ``tool``: a tool call runs
across the failover; ``reference``: no fault, a start on the fallback alone), ``ok`` (the
failover happened and the fallback answered), and the measures in milliseconds it has.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.relay.stats import percentile

__all__ = [
    "CONNECT_KINDS",
    "KINDS",
    "MEASURES",
    "STALL_KINDS",
    "VAD_FRAME_MS",
    "Distribution",
    "Target",
    "audio_loss",
    "heard_ms",
    "judge",
    "render",
    "render_tools",
    "summarize",
    "targets_for",
]

CONNECT_KINDS = ("connect_refused", "connect_429")
STALL_KINDS = ("stall_first", "stall_mid")
KINDS = (*CONNECT_KINDS, "lost", *STALL_KINDS)
# The fakes' VAD judges 10 ms frames: a resampler's tail may make the fallback hear one more.
VAD_FRAME_MS = 10
# Added to the stall deadline (detection) and to the deadline or nothing (fault → audio).
DETECTION_SLACK_MS = 200.0
FALLBACK_AUDIO_MS = 1500.0

# measure → its title in the table
MEASURES = {
    "fault_to_audio_ms": "fault → fallback's first audio byte",
    "detection_ms": "stall detected, past the deadline",
    "to_switch_ms": "fault → switch (session.started / provider_changed)",
    "audio_lost_ms": "user audio lost",
    "audio_extra_ms": "user audio heard twice (beyond one VAD frame)",
}
_TRANSCRIPT = re.compile(r"^audio:(\d+)ms$")


def heard_ms(transcript: str | None) -> int | None:
    """The speech a fake heard, from its user transcript ``audio:<N>ms`` (None otherwise)."""
    if transcript is None:
        return None
    found = _TRANSCRIPT.match(transcript.strip())
    return int(found.group(1)) if found else None


def audio_loss(sent_ms: int, heard: int, frame_ms: int = VAD_FRAME_MS) -> tuple[int, int]:
    """(lost, extra) in ms: what the user said that the fallback did not hear, and what it
    heard beyond what was said. Hearing one VAD frame more than was said is hearing all of it
    (0, 0); more than that is extra (audio given twice)."""
    lost = max(0, sent_ms - heard)
    extra = max(0, heard - sent_ms - frame_ms)
    return lost, extra


@dataclass(frozen=True)
class Distribution:
    n: int
    p50: float
    p95: float
    p99: float
    max: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Distribution | None:
        if not values:
            return None
        return cls(
            len(values),
            percentile(values, 50),
            percentile(values, 95),
            percentile(values, 99),
            max(values),
        )

    def as_dict(self) -> dict[str, float]:
        return {"n": self.n, "p50": self.p50, "p95": self.p95, "p99": self.p99, "max": self.max}


@dataclass(frozen=True)
class Target:
    """``measure`` at ``percent`` (None: every sample) must be at most ``limit_ms``."""

    measure: str
    limit_ms: float
    percent: float | None = 95.0

    def describe(self) -> str:
        if self.percent is None:
            return f"all ≤ {self.limit_ms:g}"
        return f"p{self.percent:g} ≤ {self.limit_ms:g}"


def judge(target: Target, values: Sequence[float]) -> bool | None:
    """Met or not; None when there is nothing to judge."""
    if not values:
        return None
    if target.percent is None:
        return max(values) <= target.limit_ms
    return percentile(values, target.percent) <= target.limit_ms


def targets_for(kind: str, deadline_s: Mapping[str, float]) -> list[Target]:
    """The issue's targets for a kind of fault, with the stall deadlines the gateway ran with
    (``deadline_s``: ``first_output_voice_s``, ``output_gap_s``)."""
    targets = [Target("audio_lost_ms", 0.0, None)]
    if kind in STALL_KINDS:
        deadline_ms = 1000 * (
            deadline_s["first_output_voice_s"]
            if kind == "stall_first"
            else deadline_s["output_gap_s"]
        )
        targets.insert(0, Target("detection_ms", DETECTION_SLACK_MS))
        targets.insert(0, Target("fault_to_audio_ms", deadline_ms + FALLBACK_AUDIO_MS))
    else:
        targets.insert(0, Target("fault_to_audio_ms", FALLBACK_AUDIO_MS))
    return targets


def _values(samples: Iterable[Mapping[str, Any]], measure: str) -> list[float]:
    return [float(s[measure]) for s in samples if s.get(measure) is not None]


def _tool_row(samples: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    executions = [int(s.get("executions") or 0) for s in samples]
    outcomes = [str(s.get("outcome") or "error") for s in samples]
    return {
        "faults": len(samples),
        "answered": outcomes.count("answered"),
        "loops": outcomes.count("loop"),
        "no_answer": len(samples) - outcomes.count("answered") - outcomes.count("loop"),
        "executions": sum(executions),
        "duplicates": sum(max(0, e - 1) for e in executions),
        "never_ran": executions.count(0),
        "fault_to_audio_ms": _dist(_values(samples, "fault_to_audio_ms")),
    }


def _tool_summary(samples: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The repetitions with a tool call across the failover: all of them, and per microphone
    (``open``: silence streams; ``quiet``: no audio at all)."""
    if not samples:
        return None
    mics = sorted({str(s.get("mic", "?")) for s in samples})
    return {
        **_tool_row(samples),
        "by_mic": {mic: _tool_row([s for s in samples if s.get("mic") == mic]) for mic in mics},
    }


def _dist(values: Sequence[float]) -> dict[str, float] | None:
    dist = Distribution.of(values)
    return None if dist is None else dist.as_dict()


def summarize(
    samples: Sequence[Mapping[str, Any]], deadline_s: Mapping[str, float]
) -> dict[str, Any]:
    """Per kind: counts, each measure's distribution over the voice faults that recovered, each
    target judged, and the tool-call repetitions; the reference (a start with no failover)."""
    kinds: dict[str, Any] = {}
    for kind in KINDS:
        voice = [s for s in samples if s["kind"] == kind and s["variant"] == "voice"]
        tools = [s for s in samples if s["kind"] == kind and s["variant"] == "tool"]
        if not voice and not tools:
            continue
        recovered = [s for s in voice if s.get("ok")]
        measures = {m: _dist(_values(recovered, m)) for m in MEASURES}
        verdicts = []
        for target in targets_for(kind, deadline_s):
            verdicts.append(
                {
                    "measure": target.measure,
                    "target": target.describe(),
                    "met": judge(target, _values(recovered, target.measure)),
                }
            )
        tool = _tool_summary(tools)
        if tool is not None:
            verdicts.append(
                {
                    "measure": "duplicates",
                    "target": "0",
                    "met": tool["duplicates"] == 0,
                }
            )
        verdicts.append(
            {"measure": "recovered", "target": "every fault", "met": len(recovered) == len(voice)}
        )
        kinds[kind] = {
            "faults": len(voice),
            "recovered": len(recovered),
            "errors": _errors(voice),
            "lossy": sum(1 for s in recovered if (s.get("audio_lost_ms") or 0) > 0),
            "measures": measures,
            "targets": verdicts,
            "tool": tool,
        }
    reference = [s for s in samples if s["variant"] == "reference" and s.get("ok")]
    return {
        "kinds": kinds,
        "reference": {
            "start_to_audio_ms": _dist(_values(reference, "fault_to_audio_ms")),
            "start_to_started_ms": _dist(_values(reference, "to_switch_ms")),
        },
    }


def _errors(samples: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    errors: dict[str, int] = {}
    for sample in samples:
        if not sample.get("ok"):
            key = str(sample.get("error") or "?")[:120]
            errors[key] = errors.get(key, 0) + 1
    return errors


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f}" if abs(value) >= 100 else f"{value:.1f}"


def _yes(met: bool | None) -> str:
    return "–" if met is None else "yes" if met else "**no**"


def render(summary: Mapping[str, Any]) -> str:
    """One table per kind of fault, then the reference."""
    out: list[str] = []
    for kind, row in summary["kinds"].items():
        verdicts = {v["measure"]: v for v in row["targets"]}
        out.append(
            f"\n**{kind}**: {row['faults']} voice faults, {row['recovered']} recovered"
            + (f"; failed: {row['errors']}" if row["errors"] else "")
        )
        out.append("")
        out.append("| measure (ms) | n | p50 | p95 | p99 | max | target | met |")
        out.append("|---|---|---|---|---|---|---|---|")
        for measure, title in MEASURES.items():
            dist = row["measures"].get(measure)
            if dist is None:
                continue
            verdict = verdicts.get(measure)
            target = verdict["target"] if verdict else "–"
            met = _yes(verdict["met"]) if verdict else "–"
            out.append(
                f"| {title} | {dist['n']} | {_ms(dist['p50'])} | {_ms(dist['p95'])} "
                f"| {_ms(dist['p99'])} | {_ms(dist['max'])} | {target} | {met} |"
            )
        tool = row["tool"]
        if tool is not None:
            out.append(
                f"| duplicate executions of a tool call run across it | {tool['faults']} "
                f"| | | | {tool['duplicates']} (total) | 0 "
                f"| {_yes(verdicts['duplicates']['met'])} |"
            )
        recovered = verdicts["recovered"]
        out.append(
            f"| every fault recovered | {row['faults']} | | | | | every fault "
            f"| {_yes(recovered['met'])} |"
        )
    tools = render_tools(summary)
    if tools:
        out.append("\n" + tools)
    reference = summary["reference"]
    audio, started = reference["start_to_audio_ms"], reference["start_to_started_ms"]
    if audio is not None and started is not None:
        out.append(
            f"\n**reference** (no fault: a start on the fallback alone, {audio['n']} sessions): "
            f"session.start → session.started p50 {_ms(started['p50'])} / p95 "
            f"{_ms(started['p95'])} ms; → first audio byte p50 {_ms(audio['p50'])} / p95 "
            f"{_ms(audio['p95'])} ms"
        )
    return "\n".join(out).lstrip("\n")


def render_tools(summary: Mapping[str, Any]) -> str:
    """The repetitions with a tool call across the failover, per kind and microphone."""
    rows = [
        (kind, mic, values)
        for kind, row in summary["kinds"].items()
        if row["tool"] is not None
        for mic, values in row["tool"]["by_mic"].items()
    ]
    if not rows:
        return ""
    out = [
        "**tool call across the failover** (the journaling fixture, executions counted in its "
        "journal; microphone open: silence streams between turns, quiet: no audio at all)",
        "",
        "| kind | microphone | faults | answered | failover loops | no answer | executions "
        "| duplicates | fault → first fallback audio p50 / max (ms) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for kind, mic, v in rows:
        audio = v["fault_to_audio_ms"]
        spread = "–" if audio is None else f"{_ms(audio['p50'])} / {_ms(audio['max'])}"
        out.append(
            f"| {kind} | {mic} | {v['faults']} | {v['answered']} | {v['loops']} "
            f"| {v['no_answer']} | {v['executions']} | {v['duplicates']} | {spread} |"
        )
    return "\n".join(out)
