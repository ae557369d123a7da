"""Every tool outcome of docs/tools.md sections 4 to 7, as the client and the model see it.

Over real sockets against the local model: the client sees ``tool.started`` / ``tool.finished``;
the model's view is the local model's reply ``Tool results: NAME=<envelope JSON>; ...`` (the whole
envelope, in call order); the audit trail is ``Gateway.decisions``.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from harness import Client, Gateway, GatewayFactory, model_results

from gateway.registry import Registry, load_registry
from registry_build import build_registry
from registry_build.build import serialize_artifact

REPO = Path(__file__).resolve().parents[2]
RUNNER_TOOLS = REPO / "tests" / "fixtures" / "runner_tools"
PRE_EXECUTION = {
    "VALIDATION",
    "NOT_FOUND",
    "MODE_RESTRICTED",
    "BUDGET_EXCEEDED",
    "CONFIRMATION_REQUIRED",
    "FORBIDDEN",
    "INTENT_NOT_EXPLICIT",
}
CALENDAR_ARGS = '{"title":"Dentist","start":"2026-12-01T10:00:00+01:00"}'


# -- helpers -------------------------------------------------------------------------------------


@dataclass
class Turn:
    events: list[dict[str, Any]]
    started: list[dict[str, Any]]
    finished: list[dict[str, Any]]
    reply: str

    @property
    def results(self) -> list[tuple[str, dict[str, Any]]]:
        return model_results(self.reply)

    def finished_for(self, call_id: str) -> dict[str, Any]:
        return next(e for e in self.finished if e["call_id"] == call_id)


async def turn(client: Client, text: str, within: float = 5.0) -> Turn:
    """Send one message; the events up to the model's final reply, checked for invariants."""
    await client.send("text.send", text=text)
    events = await client.until_reply(within)
    started = [e for e in events if e["type"] == "tool.started"]
    finished = [e for e in events if e["type"] == "tool.finished"]
    # tool.started precedes its tool.finished, one each per call id.
    assert [e["call_id"] for e in started] == list(dict.fromkeys(e["call_id"] for e in started)), (
        "a call id was started twice"
    )
    assert sorted(e["call_id"] for e in started) == sorted(e["call_id"] for e in finished)
    for fin in finished:
        assert events.index(fin) > events.index(
            next(s for s in started if s["call_id"] == fin["call_id"])
        )
        assert isinstance(fin["duration_ms"], int)
        assert fin["duration_ms"] >= 0
        assert isinstance(fin["intents"], list)
        assert fin["ok"] is ("error" not in fin)
        assert fin["ok"] is ("data" in fin)
    for s in started:
        assert isinstance(s["arguments"], dict)
        assert "confirmation_id" not in s["arguments"]
    return Turn(events, started, finished, events[-1]["text"])


def check_model_saw(t: Turn) -> None:
    """Exactly one result per call id, in call order, with the error type the client saw."""
    results = t.results
    assert [env["meta"]["callId"] for _, env in results] == [s["call_id"] for s in t.started]
    assert [name for name, _ in results] == [s["name"] for s in t.started]
    finished = [t.finished_for(s["call_id"]) for s in t.started]
    for (name, env), fin in zip(results, finished, strict=True):
        assert env["meta"]["toolId"] == name
        assert env["ok"] is fin["ok"]
        if not fin["ok"]:
            assert env["error"]["type"] == fin["error"]["type"]
            assert env["error"]["message"] == fin["error"]["message"]
            if env["error"]["type"] in PRE_EXECUTION:
                assert env["error"]["retryable"] is False
                assert env["error"]["partialSideEffects"] is False


def one_result(t: Turn) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(tool.started, tool.finished, model envelope) of a single-call turn."""
    assert len(t.started) == 1, [e["type"] for e in t.events]
    check_model_saw(t)
    return t.started[0], t.finished[0], t.results[0][1]


def derive_tool(root: Path, source: str, tool_id: str, **changes: Any) -> None:
    """Copy a runner fixture folder as ``tool_id`` with schema fields changed (None removes)."""
    folder = root / tool_id
    shutil.copytree(RUNNER_TOOLS / source, folder, ignore=shutil.ignore_patterns("__pycache__"))
    schema = json.loads((folder / "schema.json").read_text())
    schema["toolId"] = tool_id
    for key, value in changes.items():
        if value is None:
            schema.pop(key, None)
        else:
            schema[key] = value
    (folder / "schema.json").write_text(json.dumps(schema))


@pytest.fixture(scope="module")
def custom_registry(tmp_path_factory: pytest.TempPathFactory) -> Registry:
    """Tools the fixtures lack: a secret argument, a slow tool without its own timeoutMs."""
    root = tmp_path_factory.mktemp("custom_tools")
    echo_params = json.loads((RUNNER_TOOLS / "echo" / "schema.json").read_text())["parameters"]
    echo_params["properties"]["pin"] = {"type": "string", "minLength": 1, "maxLength": 20}
    derive_tool(root, "echo", "secret_echo", parameters=echo_params, secretArguments=["pin"])
    derive_tool(root, "sleepy", "slow_lookup", timeoutMs=None)
    result = build_registry([root])
    assert result.artifact is not None, [str(e) for e in result.errors]
    out = root / "registry.json"
    out.write_bytes(serialize_artifact(result.artifact))
    return load_registry(out)


# -- ok results, projection, redaction -----------------------------------------------------------


async def test_ok_result_is_projected_for_the_client_and_whole_for_the_model(
    gateway: Gateway,
) -> None:
    async with gateway.session("text") as client:
        t = await turn(client, "/tool secretive {}")
        assert [e["type"] for e in t.events[:4]] == [
            "response.started",
            "tool.started",
            "tool.finished",
            "response.done",
        ]
        started, finished, envelope = one_result(t)
        assert started["name"] == "secretive"
        assert started["arguments"] == {}
        assert finished["ok"] is True
        assert finished["intents"] == []
        projected = {
            "public": "visible",
            "items": [{"name": "a"}, {"name": "b"}],
            "nested": {"shown": 1},
        }
        assert finished["data"] == projected
        # The model gets the whole envelope, fields outside the allowlist included.
        assert envelope["data"]["ssn"] == "123-45-6789"
        assert envelope["data"]["nested"]["hidden"] == "api-key-xyz"
        assert envelope["intents"] == []
        assert envelope["meta"]["registryVersion"] == client.started["registry_version"]
        assert isinstance(envelope["meta"]["durationMs"], int | float)
        # No gateway-made event (only the model's own echo of its input) carries a secret.
        gateway_events = json.dumps([e for e in t.events if e["type"] != "text.delta"][:-1])
        for secret in ("123-45-6789", "tok-1", "api-key-xyz", "ssn", "hidden"):
            assert secret not in gateway_events
    assert gateway.decisions("secretive") == [("secretive", "executed")]
    record = gateway.audit.records[-1]
    assert record.result == projected
    assert record.outcome == "ok"


async def test_dict_envelope_intents_reach_client_and_model(gateway: Gateway) -> None:
    async with gateway.session("text") as client:
        _, finished, envelope = one_result(await turn(client, "/tool dict_envelope {}"))
        assert finished["data"] == {"a": 1}
        assert finished["intents"] == ["SUPPRESS_AUDIO"]
        assert envelope["intents"][0]["type"] == "SUPPRESS_AUDIO"


async def test_secret_arguments_are_redacted_in_tool_started(
    gateway_factory: GatewayFactory, custom_registry: Registry
) -> None:
    gateway = await gateway_factory(registry=custom_registry)
    async with gateway.session("text") as client:
        t = await turn(client, '/tool secret_echo {"text":"hi","pin":"4321"}')
        started, finished, envelope = one_result(t)
        assert started["arguments"]["text"] == "hi"
        assert started["arguments"]["pin"] == "[redacted]"  # docs/protocol.md 10.4
        assert finished["ok"] is True
        assert finished["data"] == {"text": "hi", "count": 1}
        gateway_events = json.dumps([e for e in t.events if e["type"] != "text.delta"])
        assert "4321" not in gateway_events
        assert envelope["ok"] is True


# -- refusals before execution -------------------------------------------------------------------


async def test_unknown_tool_is_not_found(gateway: Gateway) -> None:
    async with gateway.session("text") as client:
        started, finished, envelope = one_result(await turn(client, "/tool no_such_tool {}"))
        assert started["name"] == "no_such_tool"
        assert finished["ok"] is False
        assert finished["error"]["type"] == "NOT_FOUND"
        assert "no_such_tool" in envelope["error"]["message"]
        assert finished["duration_ms"] == 0
        # The session goes on.
        assert (await turn(client, "hello")).reply == "You said: hello"
    assert gateway.decisions("no_such_tool") == [("no_such_tool", "blocked")]


async def test_role_without_permission_is_forbidden(gateway: Gateway) -> None:
    args = '{"patient_id":"pat_1","note":"please log: ate well","severity":"low"}'
    async with gateway.session("text", roles=["patient"]) as client:
        _, finished, envelope = one_result(await turn(client, f"/tool create_care_log {args}"))
        assert finished["error"]["type"] == "FORBIDDEN"
        assert envelope["error"]["type"] == "FORBIDDEN"
        assert not [e for e in client.events if e["type"] == "confirmation.requested"]
    assert gateway.decisions("create_care_log") == [("create_care_log", "blocked")]
    assert not (gateway.settings.data_dir / "care.sqlite").exists()


async def test_tool_outside_the_session_filter_is_forbidden(gateway: Gateway) -> None:
    async with gateway.session("text", tools=["echo"]) as client:
        assert [t["name"] for t in client.started["tools"]] == ["echo"]
        _, finished, _ = one_result(await turn(client, "/tool get_current_time {}"))
        assert finished["error"]["type"] == "FORBIDDEN"
        _, finished, _ = one_result(await turn(client, '/tool echo {"text":"in"}'))
        assert finished["ok"] is True
        assert finished["data"] == {"text": "in", "count": 1}
    assert gateway.decisions("get_current_time") == [("get_current_time", "blocked")]


async def test_voice_only_tool_in_text_mode_is_mode_restricted(gateway: Gateway) -> None:
    async with gateway.session("text") as client:
        _, finished, envelope = one_result(await turn(client, "/tool end_voice_session {}"))
        assert finished["error"]["type"] == "MODE_RESTRICTED"
        assert finished["intents"] == []
        assert "text" in envelope["error"]["message"]
        assert (await turn(client, "still here")).reply == "You said: still here"
    assert gateway.decisions("end_voice_session") == [("end_voice_session", "blocked")]


async def test_schema_violation_is_validation_and_nothing_runs(gateway: Gateway) -> None:
    async with gateway.session("text") as client:
        started, finished, envelope = one_result(
            await turn(client, '/tool echo {"text":"x","count":99}')
        )
        assert started["arguments"] == {"text": "x", "count": 99}
        assert finished["error"]["type"] == "VALIDATION"
        assert "count" in envelope["error"]["message"]
        _, finished, _ = one_result(await turn(client, '/tool echo {"text":"x","extra":1}'))
        assert finished["error"]["type"] == "VALIDATION"
    assert not (gateway.settings.data_dir / "runs_echo.log").exists()
    assert gateway.decisions("echo") == [("echo", "blocked"), ("echo", "blocked")]


async def test_invalid_json_arguments_are_validation_and_the_session_goes_on(
    gateway: Gateway,
) -> None:
    async with gateway.session("text") as client:
        started, finished, envelope = one_result(await turn(client, "/badjson echo"))
        assert started["name"] == "echo"
        assert started["arguments"] == {}
        assert finished["error"]["type"] == "VALIDATION"
        assert "JSON" in envelope["error"]["message"]
        # The model may retry: the session is alive and the tool works.
        _, finished, _ = one_result(await turn(client, '/tool echo {"text":"retry"}'))
        assert finished["ok"] is True
        assert (await turn(client, "hello")).reply == "You said: hello"
    assert not [e for e in client.events if e["type"] in ("error", "session.ended")]


async def test_high_sensitivity_tool_needs_explicit_intent(gateway: Gateway) -> None:
    async with gateway.session("text") as client:
        _, finished, envelope = one_result(
            await turn(client, '/tool log_medication {"medication":"aspirin","dose":"100 mg"}')
        )
        assert finished["error"]["type"] == "INTENT_NOT_EXPLICIT"
        assert "log_medication" in envelope["error"]["message"]
        assert not (gateway.settings.data_dir / "care.sqlite").exists()
        # The same request with the user's own "took" in their words runs.
        _, finished, envelope = one_result(
            await turn(
                client, '/tool log_medication {"medication":"aspirin","dose":"I took 100 mg"}'
            )
        )
        assert finished["ok"] is True, finished
        assert set(finished["data"]) == {"entry_id", "taken_at"}
        assert envelope["data"]["medication"] == "aspirin"
    assert gateway.decisions("log_medication") == [
        ("log_medication", "blocked"),
        ("log_medication", "executed"),
    ]


async def test_confirmation_required_tool_does_not_run(gateway: Gateway) -> None:
    async with gateway.session("text") as client:
        t = await turn(client, f"/tool calendar_create_event {CALENDAR_ARGS}")
        _, finished, envelope = one_result(t)
        assert finished["error"]["type"] == "CONFIRMATION_REQUIRED"
        requested = next(e for e in t.events if e["type"] == "confirmation.requested")
        assert envelope["error"]["confirmationId"] == requested["confirmation_id"]
        assert envelope["error"]["prompt"]
        assert envelope["error"]["expiresAt"]
    assert gateway.decisions("calendar_create_event") == [
        ("calendar_create_event", "confirmation_pending")
    ]
    assert not (gateway.settings.data_dir / "calendar.sqlite").exists()


# -- failures during execution -------------------------------------------------------------------


async def test_hard_timeout_from_the_tools_timeout_ms_cancels_the_handler(
    gateway_factory: GatewayFactory,
) -> None:
    # sleepy declares timeoutMs 1000, which wins over the mode's hard timeout (docs/tools.md 7.2).
    gateway = await gateway_factory(text_hard_timeout_ms=5000)
    async with gateway.session("text") as client:
        started, finished, envelope = one_result(await turn(client, '/tool sleepy {"ms":1500}'))
        assert finished["error"]["type"] == "TIMEOUT"
        assert 900 <= finished["duration_ms"] < 1450
        assert "1000 ms" in envelope["error"]["message"]
        marker = gateway.settings.data_dir / f"sleepy_{started['call_id']}.state"
        assert marker.read_text() == "cancelled"
    assert gateway.metric("gateway_tool_calls_total", tool="sleepy", outcome="TIMEOUT") == 1


async def test_hard_timeout_per_mode_comes_from_settings(
    gateway_factory: GatewayFactory, custom_registry: Registry
) -> None:
    gateway = await gateway_factory(
        registry=custom_registry, text_hard_timeout_ms=150, voice_hard_timeout_ms=300
    )
    for mode, limit in (("text", 150), ("voice", 300)):
        async with gateway.session(mode) as client:
            began = time.monotonic()
            _, finished, envelope = one_result(await turn(client, '/tool slow_lookup {"ms":3000}'))
            assert finished["error"]["type"] == "TIMEOUT", mode
            assert f"{limit} ms" in envelope["error"]["message"]
            assert limit - 20 <= finished["duration_ms"] < 1500
            assert time.monotonic() - began < 2.5


async def test_crash_is_internal_without_leaks(gateway: Gateway) -> None:
    async with gateway.session("text") as client:
        t = await turn(client, "/tool crasher {}")
        _, finished, envelope = one_result(t)
        assert finished["error"]["type"] == "INTERNAL"
        assert envelope["error"]["partialSideEffects"] is True  # an action tool
        everything = json.dumps(t.events)
        for leak in ("hunter2", "password", "RuntimeError", "Traceback", "handler.py", 'File "'):
            assert leak not in everything
    assert gateway.decisions("crasher") == [("crasher", "executed")]


async def test_invalid_envelope_is_internal_without_leaks(gateway: Gateway) -> None:
    async with gateway.session("text") as client:
        t = await turn(client, "/tool bad_envelope {}")
        _, finished, envelope = one_result(t)
        assert finished["error"]["type"] == "INTERNAL"
        assert envelope["error"]["partialSideEffects"] is False  # a utility tool
        assert "hunter2" not in json.dumps(t.events)


async def test_handler_error_types_reach_client_and_model(gateway: Gateway) -> None:
    async with gateway.session("text") as client:
        for kind in ("CONFLICT", "TRANSIENT", "PERMANENT", "AUTH", "RATE_LIMIT"):
            _, finished, envelope = one_result(
                await turn(client, f'/tool raises_tool_error {{"type":"{kind}"}}')
            )
            assert finished["error"] == {"type": kind, "message": "the upstream said no"}
            assert envelope["error"]["retryable"] is True
        for kind in ("SESSION_INACTIVE", "TRANSIENT", "CONFLICT"):
            _, finished, envelope = one_result(
                await turn(client, f'/tool returns_failure {{"type":"{kind}"}}')
            )
            assert finished["error"] == {"type": kind, "message": "refused by the handler"}
            assert envelope["error"]["partialSideEffects"] is True
            assert envelope["error"]["retryable"] is False
        # A handler raising with a type that does not exist is an unexpected error.
        _, finished, _ = one_result(await turn(client, '/tool raises_tool_error {"type":"NOPE"}'))
        assert finished["error"]["type"] == "INTERNAL"
    assert gateway.metric("gateway_tool_calls_total", tool="raises_tool_error", outcome="AUTH") == 1
    assert (
        gateway.metric("gateway_tool_calls_total", tool="returns_failure", outcome="TRANSIENT") == 1
    )


# -- batches -------------------------------------------------------------------------------------


async def test_batch_gives_one_result_per_call_in_call_order(gateway: Gateway) -> None:
    async with gateway.session("text") as client:
        t = await turn(
            client,
            '/tools echo {"text":"a"} ;; crasher {} ;; no_such_tool {} ;; '
            'echo {"text":"b"} ;; echo {"count":0}',
        )
        assert [s["name"] for s in t.started] == [
            "echo",
            "crasher",
            "no_such_tool",
            "echo",
            "echo",
        ]
        check_model_saw(t)
        results = t.results
        assert [env["ok"] for _, env in results] == [True, False, False, True, False]
        assert [env.get("error", {}).get("type") for _, env in results] == [
            None,
            "INTERNAL",
            "NOT_FOUND",
            None,
            "VALIDATION",
        ]
        assert results[0][1]["data"]["text"] == "a"
        assert results[3][1]["data"]["text"] == "b"
        assert len({env["meta"]["callId"] for _, env in results}) == 5
        # One reply for the whole batch, then the conversation goes on.
        assert (await turn(client, "next")).reply == "You said: next"
    runs = (gateway.settings.data_dir / "runs_echo.log").read_text().split()
    assert sorted(runs) == sorted([t.started[0]["call_id"], t.started[3]["call_id"]])


async def test_batch_calls_run_in_parallel(gateway: Gateway) -> None:
    async with gateway.session("text") as client:
        began = time.monotonic()
        t = await turn(client, '/tools sleepy {"ms":300} ;; sleepy {"ms":300}')
        wall = time.monotonic() - began
        check_model_saw(t)
        first, second = (t.finished_for(s["call_id"]) for s in t.started)
        assert first["ok"]
        assert second["ok"]
        assert first["duration_ms"] >= 290
        assert second["duration_ms"] >= 290
        # The handlers' own clocks: each started before the other finished.
        assert max(first["data"]["started"], second["data"]["started"]) < min(
            first["data"]["finished"], second["data"]["finished"]
        )
        assert wall < 0.56, wall  # one after the other would take at least 0.6 s


# -- budgets -------------------------------------------------------------------------------------


def kb_batch(count: int) -> str:
    return "/tools " + " ;; ".join(f'kb_search {{"query":"visit fee {i}"}}' for i in range(count))


async def test_voice_retrieval_budget_in_one_batch_and_reset_by_a_new_turn(
    gateway: Gateway,
) -> None:
    async with gateway.session("voice") as client:
        t = await turn(client, kb_batch(3))
        check_model_saw(t)
        types_ = [t.finished_for(s["call_id"]).get("error", {}).get("type") for s in t.started]
        assert types_ == [None, None, "BUDGET_EXCEEDED"]
        refused = t.finished_for(t.started[2]["call_id"])
        assert refused["duration_ms"] == 0
        assert "2" in t.results[2][1]["error"]["message"]
        # A new user turn resets the count.
        _, finished, _ = one_result(await turn(client, '/tool kb_search {"query":"hours"}'))
        assert finished["ok"] is True
    # Audit records are written as calls finish (a refusal at once): compare as a multiset.
    assert sorted(d for _, d in gateway.decisions("kb_search")) == [
        "blocked",
        "executed",
        "executed",
        "executed",
    ]
    assert gateway.metric("gateway_tool_budget_refusals_total", reason="budget") == 1
    assert (
        gateway.metric("gateway_tool_calls_total", tool="kb_search", outcome="BUDGET_EXCEEDED") == 1
    )


async def test_text_retrieval_budget_is_five(gateway: Gateway) -> None:
    async with gateway.session("text") as client:
        t = await turn(client, kb_batch(6))
        check_model_saw(t)
        oks = [t.finished_for(s["call_id"])["ok"] for s in t.started]
        assert oks == [True] * 5 + [False]
        assert t.results[5][1]["error"]["type"] == "BUDGET_EXCEEDED"
        # A new turn, and non-retrieval tools do not count against the budget.
        t = await turn(client, kb_batch(5) + ' ;; echo {"text":"free"}')
        assert all(f["ok"] for f in t.finished)
        assert len(t.finished) == 6
    assert gateway.metric("gateway_tool_budget_refusals_total", reason="budget") == 1


def write_scenario(path: Path, steps: list[dict[str, Any]]) -> Path:
    path.write_text(json.dumps({"name": path.stem, "steps": steps}))
    return path


def call_step(expect: dict[str, Any], *calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "expect": expect,
        "reply": {"tools": [{"name": name, "arguments": args} for name, args in calls]},
    }


async def test_voice_retrieval_budget_across_rounds_of_one_turn(
    gateway_factory: GatewayFactory, tmp_path: Path
) -> None:
    scenario = write_scenario(
        tmp_path / "rounds_retrieval.json",
        [
            call_step({"text": "find"}, ("kb_search", {"query": "fee"})),
            call_step({"tool_results": ["kb_search"]}, ("kb_search", {"query": "hours"})),
            call_step({"tool_results": ["kb_search"]}, ("kb_search", {"query": "parking"})),
            {"expect": {"tool_results": ["kb_search"]}, "reply": {"say": "done"}},
        ],
    )
    gateway = await gateway_factory(local_scenario=scenario)
    async with gateway.session("voice") as client:
        t = await turn(client, "find")
        assert t.reply == "done"
        errors = [f.get("error", {}).get("type") for f in t.finished]
        assert errors == [None, None, "BUDGET_EXCEEDED"]
    assert [d for _, d in gateway.decisions("kb_search")] == ["executed", "executed", "blocked"]


async def test_tool_rounds_per_turn_limit(gateway_factory: GatewayFactory, tmp_path: Path) -> None:
    scenario = write_scenario(
        tmp_path / "rounds.json",
        [
            call_step({"text": "go"}, ("echo", {"text": "1"})),
            call_step({"tool_results": ["echo"]}, ("echo", {"text": "2"})),
            call_step({"tool_results": ["echo"]}, ("echo", {"text": "3"})),
            {"expect": {"tool_results": ["echo"]}, "reply": {"say": "done"}},
            call_step({"text": "again"}, ("echo", {"text": "4"})),
            {"expect": {"tool_results": ["echo"]}, "reply": {"say": "ok"}},
        ],
    )
    gateway = await gateway_factory(local_scenario=scenario, tool_rounds_per_turn=2)
    async with gateway.session("text") as client:
        t = await turn(client, "go")
        assert t.reply == "done"  # the model got the third round's result and answered
        errors = [f.get("error", {}).get("type") for f in t.finished]
        assert errors == [None, None, "BUDGET_EXCEEDED"]
        assert "2 rounds" in t.finished[2]["error"]["message"]
        t = await turn(client, "again")  # a new turn resets the rounds
        assert t.reply == "ok"
        assert t.finished[0]["ok"] is True
    assert [d for _, d in gateway.decisions("echo")] == [
        "executed",
        "executed",
        "blocked",
        "executed",
    ]
    assert gateway.metric("gateway_tool_budget_refusals_total", reason="rounds") == 1
    assert gateway.metric("gateway_tool_budget_refusals_total", reason="budget") == 0


async def test_retrieval_budgets_come_from_settings(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory(voice_retrieval_calls=1, text_retrieval_calls=2)
    for mode, allowed in (("voice", 1), ("text", 2)):
        async with gateway.session(mode) as client:
            batch = " ;; ".join(['sleepy {"ms":0}'] * (allowed + 1))
            t = await turn(client, f"/tools {batch}")
            check_model_saw(t)
            oks = [t.finished_for(s["call_id"])["ok"] for s in t.started]
            assert oks == [True] * allowed + [False], mode
            refused = t.started[-1]["call_id"]
            assert t.finished_for(refused)["error"]["type"] == "BUDGET_EXCEEDED"
            # Refused without running: the handler never wrote its marker.
            assert not (gateway.settings.data_dir / f"sleepy_{refused}.state").exists()
            ran = t.started[0]["call_id"]
            assert (gateway.settings.data_dir / f"sleepy_{ran}.state").read_text() == "finished"
    assert gateway.metric("gateway_tool_budget_refusals_total", reason="budget") == 2


async def test_soft_limit_overrun_is_counted_per_tool_and_mode(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory(text_soft_limit_ms=50, voice_soft_limit_ms=60)
    name = "gateway_tool_soft_limit_overruns_total"
    async with gateway.session("text") as client:
        _, finished, _ = one_result(await turn(client, '/tool sleepy {"ms":0}'))
        assert finished["ok"] is True
        assert gateway.metric(name, tool="sleepy", mode="text") == 0
        _, finished, _ = one_result(await turn(client, '/tool sleepy {"ms":150}'))
        assert finished["ok"] is True  # over the soft limit: counted, not failed
        assert gateway.metric(name, tool="sleepy", mode="text") == 1
    async with gateway.session("voice") as client:
        _, finished, _ = one_result(await turn(client, '/tool sleepy {"ms":150}'))
        assert finished["ok"] is True
    assert gateway.metric(name, tool="sleepy", mode="voice") == 1
    assert gateway.metric(name, tool="sleepy", mode="text") == 1


# -- metrics -------------------------------------------------------------------------------------


async def test_tool_call_metrics_by_tool_and_outcome(gateway: Gateway) -> None:
    async with gateway.session("text") as client:
        await turn(client, '/tools echo {"text":"a"} ;; echo {"text":"b"} ;; crasher {}')
        await turn(client, "/tool no_such_tool {}")
        await turn(client, "/tool end_voice_session {}")
        await turn(client, '/tool echo {"count":3}')
    calls = "gateway_tool_calls_total"
    assert gateway.metric(calls, tool="echo", outcome="ok") == 2
    assert gateway.metric(calls, tool="echo", outcome="VALIDATION") == 1
    assert gateway.metric(calls, tool="crasher", outcome="INTERNAL") == 1
    # A name the model made up is never a label: it counts under "unknown" (a closed set).
    assert gateway.metric(calls, tool="unknown", outcome="NOT_FOUND") == 1
    assert gateway.metric(calls, tool="no_such_tool", outcome="NOT_FOUND") == 0
    assert gateway.metric(calls, tool="end_voice_session", outcome="MODE_RESTRICTED") == 1
    assert gateway.metric(calls, tool="crasher", outcome="ok") == 0
    async with aiohttp.ClientSession() as http, http.get(f"{gateway.url}/metrics") as response:
        text = await response.text()
    assert 'gateway_tool_calls_total{outcome="INTERNAL",tool="crasher"} 1.0' in text
