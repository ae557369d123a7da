"""HTTP tools over real sockets: the tool runner (as a session uses it) → the example care API
(``fakes.care_api``) on a loopback port. What the API received is read from its request log."""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import pytest
from harness import SECRET, token
from registry_kit import write_artifact
from structlog.testing import capture_logs

from fakes.care_api import FakeCareApi, Fault
from gateway.http_tools.shared_client import close_shared_http_client
from gateway.registry import Registry, load_registry
from gateway.toolrun import (
    AuditRecord,
    Caller,
    CallOutcome,
    MemoryAuditSink,
    StructlogAuditSink,
    ToolCall,
    ToolRunner,
)

REPO = Path(__file__).resolve().parents[2]
TODAY = date(2030, 1, 7)
SERVICE_TOKEN = "care-service-token-0123456789"
# Minted at import: it must outlive a whole suite run (harness tokens live 300 s by default).
ALICE = token("alice", ttl=6 * 3600)


def _variant(root: Path, name: str, source: str, http: dict[str, Any], **changes: Any) -> None:
    """A test-only copy of an example tool: ``http`` replaces fields of its http section (None
    removes one), ``changes`` top-level fields of its schema.json."""
    folder = root / name
    shutil.copytree(REPO / "tools" / source, folder, ignore=shutil.ignore_patterns("__pycache__"))
    schema = json.loads((folder / "schema.json").read_text())
    schema["toolId"] = name
    schema["http"].update(http)
    schema["http"] = {key: value for key, value in schema["http"].items() if value is not None}
    schema.update(changes)
    (folder / "schema.json").write_text(json.dumps(schema))


@pytest.fixture(scope="module")
def artifact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's tools, plus ``care_lookup`` (GET one appointment, no pattern on its id,
    the default 1 MiB limit, 300 ms) and ``care_service_listing`` (service auth)."""
    extra = tmp_path_factory.mktemp("http_tools")
    _variant(
        extra,
        "care_lookup",
        "care_api_get_appointments",
        {"path": "/v1/appointments/{appointment_id}", "query": None, "maxResponseBytes": None},
        parameters={
            "type": "object",
            "properties": {"appointment_id": {"type": "string", "description": "The id."}},
            "required": ["appointment_id"],
            "additionalProperties": False,
        },
        timeoutMs=300,
        resultAllowlist=["id", "start"],
    )
    _variant(
        extra,
        "care_service_listing",
        "care_api_get_appointments",
        {"auth": {"serviceTokenEnv": "CARE_API_TOKEN"}},
    )
    return write_artifact([REPO / "tools", extra], extra / "registry.json")


@pytest.fixture
async def api() -> AsyncIterator[FakeCareApi]:
    async with FakeCareApi(jwt_secret=SECRET, service_token=SERVICE_TOKEN, today=TODAY) as api:
        yield api
        await close_shared_http_client()  # before the server goes: no connection left open


class Audit(MemoryAuditSink):
    """Keeps the records and writes the audit log line too (what production writes)."""

    def __init__(self) -> None:
        super().__init__()
        self._line = StructlogAuditSink()

    def record(self, record: AuditRecord) -> None:
        super().record(record)
        self._line.record(record)

    def flush(self) -> None:
        self._line.flush()


@pytest.fixture
def audit() -> Audit:
    return Audit()


def registry_for(artifact: Path, api: FakeCareApi | str) -> Registry:
    url = api if isinstance(api, str) else api.base_url
    return load_registry(artifact, environ={"CARE_API_URL": url, "CARE_API_TOKEN": SERVICE_TOKEN})


@pytest.fixture
def runner(artifact: Path, api: FakeCareApi, audit: Audit, tmp_path: Path) -> ToolRunner:
    return ToolRunner(registry_for(artifact, api), data_dir=tmp_path, audit=audit)


def caller(auth_token: str | None = ALICE) -> Caller:
    return Caller("s-1", "alice", ("user",), "voice", turn=1, auth_token=auth_token)


_CALL_IDS = itertools.count(1)


async def call(runner: ToolRunner, tool: str, args: dict[str, Any], **who: Any) -> CallOutcome:
    call_id = f"call-{next(_CALL_IDS)}"  # a call id the runner has not seen: it runs
    return await runner.run(ToolCall(call_id, tool, args), caller(**who))


def error_of(outcome: CallOutcome) -> dict[str, Any]:
    assert not outcome.ok, outcome.envelope
    error: dict[str, Any] = outcome.envelope["error"]
    return error


# -- the request the API receives -------------------------------------------------------------


async def test_the_users_token_travels_in_the_authorization_header_only(
    runner: ToolRunner, api: FakeCareApi, audit: Audit
) -> None:
    outcome = await call(
        runner,
        "care_api_get_appointments",
        {"from_date": "2030-01-01", "to_date": "2030-01-31", "status": "scheduled"},
    )
    assert outcome.ok, outcome.envelope
    (seen,) = api.requests
    assert seen.headers["Authorization"] == f"Bearer {ALICE}"
    assert seen.patient == "alice"
    assert ALICE not in seen.raw_path + seen.query_string
    assert ALICE.encode() not in seen.body
    assert [k for k, v in seen.headers.items() if ALICE in v] == ["Authorization"]
    assert seen.query_string == "from_date=2030-01-01&to_date=2030-01-31&status=scheduled"
    # The model gets the API's whole answer; the client and the audit only the allowlist.
    model_view = outcome.envelope["data"]
    assert model_view["count"] == 3
    assert "internalNote" in model_view["appointments"][0]
    assert outcome.client_data["count"] == 3
    for shown in (outcome.client_data, audit.records[-1].result):
        assert set(shown["appointments"][0]) == {
            "id", "start", "durationMinutes", "kind", "caregiver", "status"
        }  # fmt: skip


async def test_a_reschedule_sends_its_body_as_json(runner: ToolRunner, api: FakeCareApi) -> None:
    args = {"appointment_id": "A1002", "start": "2030-01-10T13:30:00+00:00", "reason": "lunch"}
    outcome = await call(runner, "care_api_reschedule_appointment", args)
    assert outcome.ok, outcome.envelope
    assert outcome.client_data["start"] == "2030-01-10T13:30:00+00:00"
    (seen,) = api.requests
    assert (seen.method, seen.raw_path) == ("PATCH", "/v1/appointments/A1002")
    assert seen.headers["Content-Type"] == "application/json"
    assert json.loads(seen.body) == {"start": "2030-01-10T13:30:00+00:00", "reason": "lunch"}


@pytest.mark.parametrize(
    ("value", "raw_path"),
    [
        ("../../admin", "/v1/appointments/..%2F..%2Fadmin"),
        ("http://elsewhere/x", "/v1/appointments/http%3A%2F%2Felsewhere%2Fx"),
        ("A1001?admin=1#x", "/v1/appointments/A1001%3Fadmin%3D1%23x"),
    ],
)
async def test_an_argument_stays_inside_its_path_segment(
    runner: ToolRunner, api: FakeCareApi, value: str, raw_path: str
) -> None:
    outcome = await call(runner, "care_lookup", {"appointment_id": value})
    (seen,) = api.requests
    assert seen.raw_path == raw_path
    assert seen.query_string == ""
    assert error_of(outcome)["type"] == "NOT_FOUND"  # the API looked up that odd id, found none


async def test_service_auth_sends_the_service_token_not_the_users(
    runner: ToolRunner, api: FakeCareApi
) -> None:
    outcome = await call(runner, "care_service_listing", {})
    assert outcome.ok, outcome.envelope
    (seen,) = api.requests
    assert seen.headers["Authorization"] == f"Bearer {SERVICE_TOKEN}"
    assert seen.patient == "service"


async def test_without_a_user_token_the_api_is_not_called(
    runner: ToolRunner, api: FakeCareApi
) -> None:
    outcome = await call(runner, "care_api_get_appointments", {}, auth_token=None)
    error = error_of(outcome)
    assert error["type"] == "AUTH"
    assert "without user authentication" in error["message"]
    assert api.requests == []


# -- the answer → the envelope ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "error_type", "message"),
    [
        (
            {"appointment_id": "A1002", "start": "2030-01-10T13:15:00+00:00"},
            "VALIDATION",
            "the API refused the arguments (422): start must be on the hour or the half hour",
        ),
        (
            {"appointment_id": "A9999", "start": "2030-01-10T13:30:00+00:00"},
            "NOT_FOUND",
            "the API has no such thing (404): no appointment A9999",
        ),
        (
            {"appointment_id": "A1002", "start": "2030-01-08T10:30:00+00:00"},
            "CONFLICT",
            "the API reported a conflict (409): the new time overlaps appointment A1001 "
            "(home visit at 2030-01-08T10:00:00+00:00)",
        ),
    ],
)
async def test_the_apis_refusals_are_typed_with_its_message(
    runner: ToolRunner, args: dict[str, Any], error_type: str, message: str
) -> None:
    error = error_of(await call(runner, "care_api_reschedule_appointment", args))
    assert (error["type"], error["message"]) == (error_type, message)
    assert (error["retryable"], error["partialSideEffects"]) == (False, False)


async def test_a_token_the_api_refuses_is_auth(runner: ToolRunner) -> None:
    forged = token("alice", secret="another-secret-0123456789abcdef0123")
    error = error_of(await call(runner, "care_api_get_appointments", {}, auth_token=forged))
    assert error["type"] == "AUTH"
    assert error["message"] == (
        "the API refused the user's credentials or permission (401): invalid bearer token"
    )


@pytest.mark.parametrize(
    ("status", "tool", "error_type", "retryable", "side_effects"),
    [
        (429, "care_api_get_appointments", "RATE_LIMIT", True, False),
        (500, "care_api_get_appointments", "TRANSIENT", True, False),
        (503, "care_api_reschedule_appointment", "TRANSIENT", True, True),
        (502, "care_api_reschedule_appointment", "TRANSIENT", True, True),
        (403, "care_api_reschedule_appointment", "AUTH", False, False),
        (410, "care_api_get_appointments", "PERMANENT", False, False),
    ],
)
async def test_forced_statuses(
    runner: ToolRunner,
    api: FakeCareApi,
    status: int,
    tool: str,
    error_type: str,
    retryable: bool,
    side_effects: bool,
) -> None:
    api.inject(Fault(status=status))
    args = {"appointment_id": "A1001", "start": "2030-01-09T09:00:00+00:00"}
    outcome = await call(runner, tool, args if "reschedule" in tool else {})
    error = error_of(outcome)
    assert (error["type"], error["retryable"], error["partialSideEffects"]) == (
        error_type,
        retryable,
        side_effects,
    )
    assert f"({status})" in error["message"]
    assert error["message"].endswith(f": forced {status}")  # the API's own message
    assert len(api.requests) == 1


@pytest.mark.parametrize(
    ("status", "retry_after"),
    [(429, "0"), (503, format_datetime(datetime.now(UTC) - timedelta(seconds=1), usegmt=True))],
)
async def test_a_get_told_to_retry_is_retried_once(
    runner: ToolRunner, api: FakeCareApi, status: int, retry_after: str
) -> None:
    api.inject(Fault(status=status, retry_after=retry_after, times=1))
    outcome = await call(runner, "care_api_get_appointments", {})
    assert outcome.ok, outcome.envelope
    assert len(api.requests) == 2

    api.inject(Fault(status=status, retry_after=retry_after, times=2))
    outcome = await call(runner, "care_api_get_appointments", {"status": "scheduled"})
    assert not outcome.ok  # retried once, not twice
    assert len(api.requests) == 4


async def test_no_retry_past_the_deadline_nor_for_a_change(
    runner: ToolRunner, api: FakeCareApi
) -> None:
    api.inject(Fault(status=429, retry_after="30"))  # the tool's deadline is 2 s
    assert error_of(await call(runner, "care_api_get_appointments", {}))["type"] == "RATE_LIMIT"
    api.inject(Fault(status=429, retry_after="0"))
    args = {"appointment_id": "A1001", "start": "2030-01-09T09:00:00+00:00"}
    assert error_of(await call(runner, "care_api_reschedule_appointment", args))["retryable"]
    assert len(api.requests) == 2


async def test_the_deadline_cancels_the_request(runner: ToolRunner, api: FakeCareApi) -> None:
    api.inject(Fault(status=200, delay_s=5.0))
    loop = asyncio.get_running_loop()
    began = loop.time()
    outcome = await call(runner, "care_lookup", {"appointment_id": "A1001"})
    took = loop.time() - began
    error = error_of(outcome)
    assert error["type"] == "TIMEOUT"
    assert error["message"] == "the tool did not finish within 300 ms"
    assert 0.3 <= took < 0.3 + 0.5
    async with asyncio.timeout(2.0):
        await api.dropped.wait()  # the API saw the connection go


@pytest.mark.parametrize("chunked", [False, True])
async def test_a_5_mb_answer_is_refused(
    runner: ToolRunner, api: FakeCareApi, chunked: bool
) -> None:
    api.inject(Fault(status=200, body_bytes=5_000_000, chunked=chunked))
    error = error_of(await call(runner, "care_lookup", {"appointment_id": "A1001"}))
    assert error["type"] == "PERMANENT"
    assert error["message"] == "the API's response is larger than 1048576 bytes"
    # The next call gets a fresh connection and a normal answer.
    assert (await call(runner, "care_lookup", {"appointment_id": "A1001"})).ok


async def test_a_redirect_to_another_host_is_refused_and_not_followed(
    runner: ToolRunner, api: FakeCareApi
) -> None:
    async with FakeCareApi(jwt_secret=SECRET, today=TODAY) as elsewhere:
        api.inject(Fault(status=302, location=f"{elsewhere.base_url}/v1/appointments"))
        error = error_of(await call(runner, "care_api_get_appointments", {}))
        assert error["type"] == "PERMANENT"
        assert error["message"] == (
            "the API redirected to another host, which HTTP tools never follow"
        )
        api.inject(Fault(status=307, location="/v1/appointments?page=2"))
        error = error_of(await call(runner, "care_api_get_appointments", {"status": "scheduled"}))
        assert "redirect (307)" in error["message"]
        assert elsewhere.requests == []
        assert len(api.requests) == 2


async def test_connection_failures_before_and_after_sending(
    artifact: Path, api: FakeCareApi, audit: Audit, tmp_path: Path
) -> None:
    closed = await _closed_port_url()
    unreachable = ToolRunner(registry_for(artifact, closed), data_dir=tmp_path, audit=audit)
    args = {"appointment_id": "A1001", "start": "2030-01-09T09:00:00+00:00"}
    error = error_of(await call(unreachable, "care_api_reschedule_appointment", args))
    assert (error["type"], error["retryable"], error["partialSideEffects"]) == (
        "TRANSIENT",
        True,
        False,
    )
    reachable = ToolRunner(registry_for(artifact, api), data_dir=tmp_path, audit=audit)
    api.inject(Fault(hang_up=True))
    error = error_of(await call(reachable, "care_api_reschedule_appointment", args))
    assert (error["type"], error["partialSideEffects"]) == ("TRANSIENT", True)
    assert "broke before it answered" in error["message"]


async def _closed_port_url() -> str:
    """The URL of a loopback port that was just free (nothing listens there)."""
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    return f"http://127.0.0.1:{port}"


# -- the credential never shows ---------------------------------------------------------------


async def test_the_token_is_in_no_log_line_audit_record_or_message(
    runner: ToolRunner, api: FakeCareApi, audit: Audit
) -> None:
    echoing = {"message": f"token {ALICE} is not allowed here", "echo": ALICE}
    api.inject(Fault(status=400, body=echoing))
    api.inject(Fault(status=500, body=echoing))
    api.inject(Fault(status=200, body=echoing))
    api.inject(Fault(hang_up=True))
    move = {"appointment_id": "A1001", "start": "2030-01-09T09:00:00+00:00"}
    with capture_logs() as logs:
        outcomes = [
            await call(runner, "care_api_get_appointments", {"status": status})
            for status in ("scheduled", "cancelled")
        ]
        outcomes.append(await call(runner, "care_lookup", {"appointment_id": "x"}))
        outcomes.append(await call(runner, "care_api_reschedule_appointment", move))
        forged = token("alice", secret="another-secret-0123456789abcdef0123")
        outcomes.append(await call(runner, "care_api_get_appointments", {}, auth_token=forged))
        audit.flush()
    assert len(api.requests) == 5
    assert error_of(outcomes[0])["message"].startswith(
        "the API refused the arguments (400): token [redacted] is not allowed"
    )
    assert outcomes[2].envelope["data"]["echo"] == "[redacted]"
    assert [e["event"] for e in logs if e["event"].startswith("http_tool")]  # it did log
    assert len(audit.records) == 5
    assert [e for e in logs if e.get("event") == "tool_call"]  # the audit lines themselves
    for secret in (ALICE, forged):
        assert secret not in repr(logs)
        assert secret not in repr(audit.records)
        assert secret not in json.dumps([outcome.envelope for outcome in outcomes])
