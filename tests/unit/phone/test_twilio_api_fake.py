"""The Twilio Calls API simulator (``fakes.carriers.twilio_api``) over a real socket: what a
client of Twilio's REST API sees, and what the simulated calls send to the webhooks."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from urllib.parse import parse_qs

import aiohttp
import pytest
from aiohttp import web

from fakes.carriers.twilio_api import AUTH_TOKEN, FakeTwilioApi
from gateway.edges.twilio.signature import valid_signature

CALLEE = "+15005550006"
CALLER = "+15005550001"


@dataclass
class Hook:
    path: str
    form: dict[str, list[str]]
    signed: bool  # X-Twilio-Signature valid for the auth token


@dataclass
class Gateway:
    """A stand-in for the gateway's webhooks: records them, answers ``twiml``, and serves a
    Media Stream socket at ``/media`` that plays one 20 ms frame, a mark, then waits."""

    base_url: str = ""
    twiml: str = "<Response><Say>Hello</Say><Hangup/></Response>"
    hooks: list[Hook] = field(default_factory=list)
    stream_messages: list[dict[str, object]] = field(default_factory=list)
    stopped: asyncio.Event = field(default_factory=asyncio.Event)  # the stream's stop arrived

    def of(self, path: str) -> list[dict[str, list[str]]]:
        return [hook.form for hook in self.hooks if hook.path == path]


@pytest.fixture
async def gateway() -> AsyncIterator[Gateway]:
    gw = Gateway()

    async def webhook(request: web.Request) -> web.Response:
        body = await request.text()
        form = parse_qs(body, keep_blank_values=True)
        url = f"{gw.base_url}{request.path}"
        signed = valid_signature(AUTH_TOKEN, url, form, request.headers.get("X-Twilio-Signature"))
        gw.hooks.append(Hook(request.path, form, signed))
        return web.Response(text=gw.twiml, content_type="text/xml")

    async def media(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        async for msg in ws:
            message = json.loads(msg.data)
            gw.stream_messages.append(message)
            if message["event"] == "stop":
                gw.stopped.set()
            if message["event"] == "start":
                sid = message["streamSid"]
                payload = {"payload": "//////////8="}  # 8 bytes of µ-law silence
                await ws.send_json({"event": "media", "streamSid": sid, "media": payload})
                await ws.send_json({"event": "mark", "streamSid": sid, "mark": {"name": "m1"}})
        return ws

    app = web.Application()
    app.router.add_post("/twilio/voice", webhook)
    app.router.add_post("/twilio/status", webhook)
    app.router.add_get("/media", media)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    gw.base_url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield gw
    finally:
        await runner.cleanup()


@pytest.fixture
async def api() -> AsyncIterator[FakeTwilioApi]:
    async with FakeTwilioApi(realtime=False) as fake:
        yield fake


def calls_url(api: FakeTwilioApi, sid: str | None = None) -> str:
    base = f"{api.base_url}/2010-04-01/Accounts/{api.account_sid}/Calls"
    return f"{base}/{sid}.json" if sid else f"{base}.json"


def auth(api: FakeTwilioApi, token: str | None = None) -> dict[str, str]:
    return {"Authorization": aiohttp.encode_basic_auth(api.account_sid, token or api.auth_token)}


def call_form(gateway: Gateway, **more: str) -> dict[str, str]:
    return {
        "To": CALLEE,
        "From": CALLER,
        "Url": f"{gateway.base_url}/twilio/voice",
        "StatusCallback": f"{gateway.base_url}/twilio/status",
        **more,
    }


async def test_wrong_credentials_are_refused_with_twilios_error(
    api: FakeTwilioApi, gateway: Gateway
) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.post(calls_url(api), data=call_form(gateway), headers=auth(api, "nope")) as bad,
        http.get(calls_url(api, "CA" + "0" * 32)) as anonymous,
    ):
        assert bad.status == 401
        assert await bad.json() == {
            "code": 20003,
            "message": "Authenticate",
            "more_info": "https://www.twilio.com/docs/errors/20003",
            "status": 401,
        }
        assert anonymous.status == 401
    assert api.calls == {}
    assert [(r.method, r.authorized) for r in api.requests] == [("POST", False), ("GET", False)]
    assert api.requests[0].form["To"] == [CALLEE]


async def test_a_number_that_is_not_e164_is_a_400_with_code_21211(
    api: FakeTwilioApi, gateway: Gateway
) -> None:
    async with (
        aiohttp.ClientSession() as http,
        http.post(calls_url(api), data=call_form(gateway, To="555-0100"), headers=auth(api)) as r,
    ):
        assert r.status == 400
        body = await r.json()
    assert (body["code"], body["status"]) == (21211, 400)
    assert "555-0100" in body["message"]
    assert api.calls == {}


async def test_a_call_is_created_answered_and_read_back_completed(
    api: FakeTwilioApi, gateway: Gateway
) -> None:
    form = call_form(gateway, MachineDetection="Enable")
    async with (
        aiohttp.ClientSession() as http,
        http.post(calls_url(api), data=form, headers=auth(api)) as created,
    ):
        assert created.status == 201
        call = await created.json()
        assert re.fullmatch(r"CA[0-9a-f]{32}", call["sid"])
        assert (call["status"], call["to"], call["from"]) == ("queued", CALLEE, CALLER)
        assert call["direction"] == "outbound-api"
        await api.wait_for_status(call["sid"], "completed")
        async with http.get(calls_url(api, call["sid"]), headers=auth(api)) as fetched:
            assert fetched.status == 200
            resource = await fetched.json()
    assert (resource["status"], resource["duration"]) == ("completed", "0")
    assert resource["answered_by"] == "human"
    assert api.calls[call["sid"]].history == ["queued", "ringing", "in-progress", "completed"]
    assert api.calls[call["sid"]].said == ["Hello"]
    (voice,) = [hook for hook in gateway.hooks if hook.path == "/twilio/voice"]
    assert voice.signed
    assert voice.form["CallSid"] == [call["sid"]]
    assert voice.form["CallStatus"] == ["in-progress"]
    assert voice.form["Direction"] == ["outbound-api"]
    assert voice.form["AnsweredBy"] == ["human"]
    (status,) = gateway.of("/twilio/status")
    assert (status["CallStatus"], status["CallDuration"]) == (["completed"], ["0"])


async def test_a_busy_line_is_reported_to_the_status_callback_only(
    api: FakeTwilioApi, gateway: Gateway
) -> None:
    api.scenarios[CALLEE] = "busy"
    async with (
        aiohttp.ClientSession() as http,
        http.post(calls_url(api), data=call_form(gateway), headers=auth(api)) as created,
    ):
        sid = (await created.json())["sid"]
    hook = await api.wait_for_callback(sid, "busy")
    assert hook.status == 200
    assert gateway.of("/twilio/voice") == []  # never answered: no TwiML asked for
    (only,) = gateway.hooks
    assert only.signed
    assert only.form["CallSid"] == [sid]
    assert (only.form["CallStatus"], only.form["CallDuration"]) == (["busy"], ["0"])
    assert api.calls[sid].status == "busy"


async def test_an_answered_call_streams_and_the_api_hangs_it_up(
    api: FakeTwilioApi, gateway: Gateway
) -> None:
    stream_url = gateway.base_url.replace("http", "ws") + "/media"
    gateway.twiml = (
        f'<Response><Connect><Stream url="{stream_url}">'
        '<Parameter name="token" value="t-123"/></Stream></Connect></Response>'
    )
    async with aiohttp.ClientSession() as http:
        async with http.post(calls_url(api), data=call_form(gateway), headers=auth(api)) as r:
            sid = (await r.json())["sid"]
        stream = await api.wait_for_stream(sid)
        await stream.wait_for("mark")
        assert stream.echoed == ["m1"]
        assert stream.heard() == b"\xff" * 8
        await stream.press("5")
        async with http.post(
            calls_url(api, sid), data={"Status": "completed"}, headers=auth(api)
        ) as r:
            assert r.status == 200
            assert (await r.json())["status"] == "completed"
        async with http.post(calls_url(api, "CA" + "f" * 32), headers=auth(api)) as r:
            assert r.status == 404
            assert (await r.json())["code"] == 20404
    await asyncio.wait_for(gateway.stopped.wait(), 5)
    events = [m["event"] for m in gateway.stream_messages]
    assert events == ["connected", "start", "mark", "dtmf", "stop"]
    start = gateway.stream_messages[1]["start"]
    assert isinstance(start, dict)
    assert (start["callSid"], start["customParameters"]) == (sid, {"token": "t-123"})
    hook = await api.wait_for_callback(sid, "completed")
    assert hook.form["CallDuration"] == "0"


async def test_faults_a_wrong_signature_and_no_status_callback(
    api: FakeTwilioApi, gateway: Gateway
) -> None:
    api.wrong_signature, api.status_callbacks = True, False
    async with (
        aiohttp.ClientSession() as http,
        http.post(calls_url(api), data=call_form(gateway), headers=auth(api)) as created,
    ):
        sid = (await created.json())["sid"]
    await api.wait_for_status(sid, "completed")
    assert [(hook.path, hook.signed) for hook in gateway.hooks] == [("/twilio/voice", False)]
