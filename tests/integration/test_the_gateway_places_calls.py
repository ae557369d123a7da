"""Calls the gateway places (``POST /v1/calls``), over real sockets: the gateway ↔ each
carrier's simulated REST API (Twilio's Calls API, Telnyx's Call Control) ↔ the call's media
stream ↔ the OpenAI Realtime fake.

A placed call is dialled, answered, talked to (the greeting is the call's own), hung up, and
its record (``GET /v1/calls/{id}``) says how it went: answered by whom, for how long, the
session it ran and what it used. A busy line and a call nobody answers are reported as such; a
machine answering is hung up on, or given the greeting as a message, as the call asked.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
from harness import Gateway, GatewayFactory, token
from phone_kit import TELNYX_API_KEY, until, utterance

from fakes.carriers.telnyx_api import FakeTelnyxApi
from fakes.carriers.telnyx_calls import CallScript
from fakes.carriers.twilio_api import FakeTwilioApi
from fakes.openai_realtime.server import FakeRealtimeServer
from gateway.budgets.assess import counter_key
from gateway.budgets.limits import Metric, Scope
from gateway.budgets.windows import window_ids

TO, FROM = "+15005550006", "+15005550001"
GREETING = "/say " + " ".join(f"word{n}" for n in range(6))
CONNECTION = "1684641123236054244"


@pytest.fixture
async def twilio_api() -> AsyncIterator[FakeTwilioApi]:
    async with FakeTwilioApi() as api:
        yield api


@pytest.fixture
async def telnyx_api() -> AsyncIterator[FakeTelnyxApi]:
    async with FakeTelnyxApi(api_key=TELNYX_API_KEY, connection_id=CONNECTION) as api:
        yield api


async def calling_gateway(
    factory: GatewayFactory,
    fake: FakeRealtimeServer,
    twilio_api: FakeTwilioApi,
    telnyx_api: FakeTelnyxApi,
    **settings: Any,
) -> Gateway:
    options: dict[str, Any] = {
        "provider": "openai",
        "openai_ws_url": fake.ws_url,
        "openai_api_key": "sk-test",
        "twilio_account_sid": twilio_api.account_sid,
        "twilio_auth_token": twilio_api.auth_token,
        "twilio_api_base": twilio_api.base_url,
        "telnyx_public_key": telnyx_api.public_key,
        "telnyx_api_key": TELNYX_API_KEY,
        "telnyx_api_base": telnyx_api.base_url,
        "telnyx_connection_id": CONNECTION,
    }
    return await factory(**(options | settings))


def bearer(roles: tuple[str, ...] = ("calls",), sub: str = "scheduler") -> dict[str, str]:
    return {"Authorization": f"Bearer {token(sub, roles)}"}


async def place(
    gateway: Gateway, roles: tuple[str, ...] = ("calls",), **body: Any
) -> tuple[int, dict[str, Any]]:
    async with gateway.http.post(
        f"{gateway.url}/v1/calls", json={"to": TO, "from": FROM} | body, headers=bearer(roles)
    ) as response:
        return response.status, await response.json()


async def record(gateway: Gateway, call_id: str) -> dict[str, Any]:
    async with gateway.http.get(f"{gateway.url}/v1/calls/{call_id}", headers=bearer()) as response:
        assert response.status == 200
        found: dict[str, Any] = await response.json()
        return found


async def settled(gateway: Gateway, call_id: str, status: str) -> dict[str, Any]:
    """The call's record once it says ``status`` (the carrier's callbacks are asynchronous)."""
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        found = await record(gateway, call_id)
        if found["status"] == status or asyncio.get_running_loop().time() > deadline:
            assert found["status"] == status, found
            return found
        await asyncio.sleep(0.05)  # the record is on the HTTP API: no event to wait on


@pytest.fixture
async def gateway(
    gateway_factory: GatewayFactory,
    fake: FakeRealtimeServer,
    twilio_api: FakeTwilioApi,
    telnyx_api: FakeTelnyxApi,
) -> Gateway:
    return await calling_gateway(gateway_factory, fake, twilio_api, telnyx_api)


async def test_a_twilio_call_is_placed_answered_talked_to_and_hung_up(
    gateway: Gateway, fake: FakeRealtimeServer, twilio_api: FakeTwilioApi
) -> None:
    status, placed = await place(
        gateway, carrier="twilio", greeting=GREETING, tools=["get_current_time"]
    )
    assert status == 201, placed
    assert (placed["status"], placed["carrier"]) == ("ringing", "twilio")
    sid = placed["carrier_call_id"]
    dialled = twilio_api.calls[sid]
    assert (dialled.to, dialled.from_, dialled.machine_detection) == (TO, FROM, "Enable")
    stream = await twilio_api.wait_for_stream(sid, timeout=10)
    await until(lambda: len(stream.heard()) >= 8 * 400, 10, "the call's greeting")
    answered = await record(gateway, placed["id"])
    assert (answered["status"], answered["answered_by"]) == ("in-progress", "human")
    assert answered["session_id"]
    await stream.speak(utterance(8000))
    conn = fake.connections[0]
    await until(lambda: len(conn.sent("response.done")) >= 2, 10, "the reply to the callee")
    tools = [t["name"] for t in conn.received("session.update")[0]["session"].get("tools", [])]
    assert "get_current_time" in tools
    await stream.hang_up()
    done = await settled(gateway, placed["id"], "completed")
    assert done["duration_s"] is not None
    assert done["usage"], done
    assert not gateway.manager.sessions
    # The call ran as whoever placed it: its usage is theirs (and so are its budgets).
    (usage,) = gateway.audit.usage_records
    assert (usage.user_id, usage.session_id) == ("scheduler", done["session_id"])
    async with gateway.http.get(
        f"{gateway.url}/v1/calls/{placed['id']}", headers=bearer(sub="mallory")
    ) as response:
        assert response.status == 404  # someone else's call is not shown


async def test_a_telnyx_call_is_placed_answered_talked_to_and_hung_up(
    gateway: Gateway, fake: FakeRealtimeServer, telnyx_api: FakeTelnyxApi
) -> None:
    status, placed = await place(gateway, carrier="telnyx", greeting=GREETING)
    assert status == 201, placed
    call_control_id = placed["carrier_call_id"]
    dial = next(r for r in telnyx_api.requests if r.path == "/v2/calls")
    assert dial.body is not None
    assert (dial.body["to"], dial.body["connection_id"]) == (TO, CONNECTION)
    assert dial.body["answering_machine_detection"] == "detect"
    stream = await telnyx_api.wait_for_stream(call_control_id, timeout=10)
    await until(lambda: len(stream.heard()) >= 8 * 400, 10, "the call's greeting")
    await stream.speak(utterance(8000))
    conn = fake.connections[0]
    await until(lambda: len(conn.sent("response.done")) >= 2, 10, "the reply to the callee")
    await telnyx_api.hang_up_caller(call_control_id)
    done = await settled(gateway, placed["id"], "completed")
    assert done["answered_by"] == "human"
    assert done["usage"]


@pytest.mark.parametrize("outcome", ["busy", "no-answer"])
async def test_a_busy_or_unanswered_twilio_call_is_reported(
    outcome: str, gateway: Gateway, fake: FakeRealtimeServer, twilio_api: FakeTwilioApi
) -> None:
    twilio_api.scenarios[TO] = outcome  # type: ignore[assignment]
    status, placed = await place(gateway, carrier="twilio")
    assert status == 201
    done = await settled(gateway, placed["id"], outcome)
    assert (done["duration_s"], done["answered_by"], done["session_id"]) == (0.0, None, None)
    assert fake.connections == []


@pytest.mark.parametrize(("outcome", "status"), [("busy", "busy"), ("no_answer", "no-answer")])
async def test_a_busy_or_unanswered_telnyx_call_is_reported(
    outcome: str, status: str, gateway: Gateway, fake: FakeRealtimeServer, telnyx_api: FakeTelnyxApi
) -> None:
    telnyx_api.script(CallScript(outcome=outcome))  # type: ignore[arg-type]
    answer, placed = await place(gateway, carrier="telnyx")
    assert answer == 201
    done = await settled(gateway, placed["id"], status)
    assert done["session_id"] is None
    assert fake.connections == []


async def test_a_machine_is_hung_up_on_unless_the_call_leaves_a_message(
    gateway: Gateway, fake: FakeRealtimeServer, twilio_api: FakeTwilioApi, telnyx_api: FakeTelnyxApi
) -> None:
    twilio_api.scenarios[TO] = "machine"
    _, hung_up = await place(gateway, carrier="twilio", greeting=GREETING)
    done = await settled(gateway, hung_up["id"], "completed")
    assert (done["answered_by"], done["session_id"]) == ("machine", None)
    telnyx_api.script(CallScript(machine=True))
    _, also_hung_up = await place(gateway, carrier="telnyx", greeting=GREETING)
    done = await settled(gateway, also_hung_up["id"], "completed")
    assert (done["answered_by"], done["session_id"]) == ("machine", None)
    assert fake.connections == []
    # Asked to leave a message: the greeting becomes the message, after the beep.
    _, message = await place(
        gateway, carrier="twilio", greeting="/say Your appointment is at nine", machine="message"
    )
    sid = message["carrier_call_id"]
    assert twilio_api.calls[sid].machine_detection == "DetectMessageEnd"
    stream = await twilio_api.wait_for_stream(sid, timeout=10)
    await until(lambda: bool(fake.connections), 10, "the message's session")
    conn = fake.connections[0]
    await until(lambda: bool(conn.received("conversation.item.create")), 10, "the greeting")
    first = conn.received("conversation.item.create")[0]["item"]["content"][0]["text"]
    assert "voicemail" in first
    assert "Your appointment is at nine" in first
    await stream.hang_up()


async def test_placing_a_call_needs_the_right_and_a_good_request(
    gateway: Gateway, twilio_api: FakeTwilioApi
) -> None:
    refused, body = await place(gateway, to="5550006")
    assert (refused, body["error"]["code"]) == (400, "invalid_request")
    assert body["error"]["message"].startswith("to:")
    refused, body = await place(gateway, carrier="twilio", tools=["no_such_tool"])
    assert refused == 400
    refused, body = await place(gateway)  # two carriers can: it must say which
    assert (refused, body["error"]["message"][:8]) == (400, "carrier:")
    twilio_api.scenarios["+15005550009"] = "answer"
    refused, body = await place(
        gateway, carrier="twilio", to="+15005550009", **{"from": "+15005550009"}
    )
    assert (refused, body["error"]["code"]) == (502, "carrier_refused")  # To equals From
    refused, body = await place(gateway, roles=("support",), carrier="twilio")
    assert (refused, body["error"]["code"]) == (403, "forbidden")
    assert not [c for c in twilio_api.calls.values() if c.to == TO]
    async with gateway.http.get(f"{gateway.url}/v1/calls/call_nope", headers=bearer()) as response:
        assert response.status == 404


async def test_a_key_out_of_budget_places_no_call(
    gateway_factory: GatewayFactory,
    fake: FakeRealtimeServer,
    twilio_api: FakeTwilioApi,
    telnyx_api: FakeTelnyxApi,
) -> None:
    """A call counts against the budgets of the key that places it: a key whose minutes for
    today are spent gets 429 ``budget_exhausted``, and nothing is dialled."""
    gateway = await calling_gateway(
        gateway_factory, fake, twilio_api, telnyx_api, admin=True, budgets=True
    )
    admin = {"Authorization": f"Bearer {token('root', ('admin',))}"}
    body = {"owner": "scheduler", "roles": ["calls"], "budgets": {"minutes_per_day": 1}}
    async with gateway.http.post(f"{gateway.url}/admin/v1/keys", json=body, headers=admin) as made:
        assert made.status == 201
        key = await made.json()
    spent = counter_key(Scope("key", key["key"]["id"]), Metric.MINUTES, window_ids(now_utc()).day)
    governance = gateway.server.governance
    assert governance is not None
    # The minutes counter counts seconds: a minute spent is 60.
    await governance.charge([(spent, 60.0)], [], day=window_ids(now_utc()).day, scopes=[])
    async with gateway.http.post(
        f"{gateway.url}/v1/calls",
        json={"to": TO, "from": FROM, "carrier": "twilio"},
        headers={"Authorization": f"Bearer {key['secret']}"},
    ) as refused:
        assert refused.status == 429
        assert (await refused.json())["error"]["code"] == "budget_exhausted"
    assert twilio_api.calls == {}


def now_utc() -> datetime:
    return datetime.now(UTC)


async def test_a_call_whose_key_is_revoked_before_the_answer_runs_no_session(
    gateway_factory: GatewayFactory,
    fake: FakeRealtimeServer,
    twilio_api: FakeTwilioApi,
    telnyx_api: FakeTelnyxApi,
) -> None:
    gateway = await calling_gateway(gateway_factory, fake, twilio_api, telnyx_api, admin=True)
    admin = {"Authorization": f"Bearer {token('root', ('admin',))}"}
    body = {"owner": "scheduler", "roles": ["calls"]}
    async with gateway.http.post(f"{gateway.url}/admin/v1/keys", json=body, headers=admin) as made:
        key = await made.json()
    twilio_api.ring_s = 0.5  # time to revoke the key while it rings
    async with gateway.http.post(
        f"{gateway.url}/v1/calls",
        json={"to": TO, "from": FROM, "carrier": "twilio"},
        headers={"Authorization": f"Bearer {key['secret']}"},
    ) as placed_answer:
        assert placed_answer.status == 201
        placed = await placed_answer.json()
    async with gateway.http.post(
        f"{gateway.url}/admin/v1/keys/{key['key']['id']}/revoke", headers=admin
    ) as revoked:
        assert revoked.status == 200
    done = await settled(gateway, placed["id"], "failed")
    assert "revoked" in (done["error"] or "")
    assert done["session_id"] is None
    assert fake.connections == []
