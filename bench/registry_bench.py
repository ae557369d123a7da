"""``scripts/bench registry``: registry build and load time, argument validation cost.

Measured side by side in one run: the compiled fast path against ``jsonschema``'s validator on
the same schema and arguments, so the ratio holds on a noisy machine.
"""

from __future__ import annotations

import json
import shutil
import statistics
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from gateway.registry import compile_validator, load_registry
from registry_build import build_registry
from registry_build.build import serialize_artifact

__all__ = ["main"]

TYPICAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "minLength": 1, "maxLength": 200},
        "start": {"type": "string", "format": "date-time"},
        "duration_minutes": {"type": "integer", "minimum": 5, "maximum": 480},
        "timezone": {"type": "string", "maxLength": 64},
        "attendees": {"type": "array", "items": {"type": "string"}, "maxItems": 20},
    },
    "required": ["title", "start"],
    "additionalProperties": False,
}
TYPICAL_ARGS = {
    "title": "Dentist",
    "start": "2026-12-01T10:00:00+01:00",
    "duration_minutes": 30,
    "timezone": "Europe/Paris",
    "attendees": ["alice", "bob"],
}

_DOC = """# {t}

## Summary
Generated benchmark tool {t}.

## Parameters
See schema.json.

## Returns
An echo.

## Errors
VALIDATION.

## Examples
`{{}}`
"""
_HANDLER = """from typing import Any


async def execute(args: dict[str, Any], ctx: Any) -> dict[str, Any]:
    return {"ok": True, "data": {"title": args["title"]}}
"""


def _generate_tools(root: Path, count: int) -> None:
    for index in range(count):
        tool_id = f"bench_tool_{index:03d}"
        folder = root / tool_id
        folder.mkdir(parents=True)
        meta = {
            "toolId": tool_id,
            "category": "retrieval" if index % 2 else "action",
            "sensitivity": "low",
            "requiresConfirmation": index % 5 == 0,
            "modes": ["voice", "text"],
            "resultAllowlist": ["title"],
            "parameters": TYPICAL_SCHEMA,
        }
        (folder / "schema.json").write_text(json.dumps(meta, indent=2))
        (folder / "doc_summary.md").write_text(f"Benchmark tool number {index}.\n")
        (folder / "doc.md").write_text(_DOC.format(t=tool_id))
        (folder / "handler.py").write_text(_HANDLER)


def _per_call_us(func: Any, number: int = 20_000, repeat: int = 5) -> list[float]:
    return [t / number * 1e6 for t in timeit.repeat(func, number=number, repeat=repeat)]


def _summary(samples: list[float]) -> dict[str, float]:
    return {
        "median": statistics.median(samples),
        "min": min(samples),
        "max": max(samples),
    }


def run(repetitions: int = 5) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="bench-registry-"))
    try:
        tools = work / "tools"
        _generate_tools(tools, 100)
        artifact_path = work / "tool_registry.json"
        build_s: list[float] = []
        load_s: list[float] = []
        for _ in range(repetitions):
            started = time.perf_counter()
            result = build_registry([tools], include_builtin=False)
            assert result.artifact is not None, result.errors
            artifact_path.write_bytes(serialize_artifact(result.artifact))
            build_s.append(time.perf_counter() - started)
            started = time.perf_counter()
            registry = load_registry(artifact_path)
            load_s.append(time.perf_counter() - started)
            assert len(registry) == 100
    finally:
        shutil.rmtree(work, ignore_errors=True)

    fast = compile_validator(TYPICAL_SCHEMA)
    assert fast.fast
    assert fast.problem(TYPICAL_ARGS) is None
    reference = Draft202012Validator(TYPICAL_SCHEMA)
    bad_args = {**TYPICAL_ARGS, "duration_minutes": "thirty"}
    return {
        "build_100_tools_ms": _summary([s * 1000 for s in build_s]),
        "load_100_tools_ms": _summary([s * 1000 for s in load_s]),
        "validate_valid_us": _summary(_per_call_us(lambda: fast.problem(TYPICAL_ARGS))),
        "validate_invalid_us": _summary(_per_call_us(lambda: fast.problem(bad_args))),
        "jsonschema_valid_us": _summary(_per_call_us(lambda: reference.is_valid(TYPICAL_ARGS))),
    }


def render(results: dict[str, Any]) -> str:
    rows = [
        ("registry build, 100 tools", "build_100_tools_ms", "ms"),
        ("artifact load (import + compile), 100 tools", "load_100_tools_ms", "ms"),
        ("argument validation, valid 5-field call", "validate_valid_us", "µs"),
        ("argument validation, invalid call", "validate_invalid_us", "µs"),
        ("jsonschema Draft202012 is_valid (reference)", "jsonschema_valid_us", "µs"),
    ]
    lines = [f"{'measure':<46} {'median':>10}  [min – max]"]
    for label, key, unit in rows:
        s = results[key]
        lines.append(f"{label:<46} {s['median']:>8.2f} {unit}  [{s['min']:.2f} – {s['max']:.2f}]")
    ratio = results["jsonschema_valid_us"]["median"] / results["validate_valid_us"]["median"]
    lines.append(f"fast path is {ratio:.1f}x cheaper than jsonschema on the same call")
    return "\n".join(lines)


def main(out_dir: Path) -> int:
    results = run()
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "registry.json").write_text(json.dumps(results, indent=2) + "\n")
    print(render(results))
    target = results["validate_valid_us"]["median"]
    print(f"target: validation < 20 µs per call: {'met' if target < 20 else 'NOT met'}")
    return 0
