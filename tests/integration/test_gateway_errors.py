"""docs/protocol.md sections 2, 3, 4 and 6 over real sockets: every error code, how a session ends,
and who may open one (auth, origin, connection rate)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any

import aiohttp
import jwt
import pytest
from harness import (
    SECRET,
    Client,
    DelegatingTransport,
    Gateway,
    GatewayFactory,
    b64,
    model_results,
    token,
    types,
)

from gateway.config import Settings
from gateway.edges.native.routes import TRANSPORT_HEADROOM
from gateway.providers import make_transport
from transports.base import ToolResult, Transport, UpstreamConfig
from transports.events import UpstreamEvent

# -- helpers -----------------------------------------------------------------------------------


def assert_error(
    event: dict[str, Any],
    code: str,
    *,
    event_id: str | None = None,
    fatal: bool = False,
    retryable: bool | None = False,
) -> None:
    """An ``error`` event as section 6 describes it; ``retryable=None``: any bool."""
    assert event["type"] == "error", event
    assert event["code"] == code, event
    assert isinstance(event["message"], str)
    assert event["message"]
    assert event["fatal"] is fatal, event
    assert isinstance(event["retryable"], bool)
    if retryable is not None:
        assert event["retryable"] is retryable, event
    assert event.get("event_id") == event_id, event


async def alive(client: Client, ping_id: str = "alive") -> None:
    """The session still answers (a ping gets its pong)."""
    await client.send("ping", id=ping_id)
    assert (await client.next())["type"] == "pong"
    assert client.events[-1]["id"] == ping_id


async def ended_then_closed(client: Client) -> tuple[dict[str, Any], int | None]:
    """Read to the close: ``session.ended`` must be the last event; (that event, close code)."""
    code = await client.wait_closed()
    assert client.events, "no event before the close"
    last = client.events[-1]
    assert last["type"] == "session.ended", types(client.events)
    assert types(client.events).count("session.ended") == 1
    return last, code


def sized_frame(size: int, type_: str = "ping") -> str:
    """A JSON text frame of exactly ``size`` bytes."""
    head = f'{{"type":"{type_}","pad":"'
    tail = '"}'
    frame = head + "x" * (size - len(head) - len(tail)) + tail
    assert len(frame.encode()) == size
    return frame


class TextOnlyTransport(DelegatingTransport):
    """An upstream that supports text sessions only."""

    async def connect(self, config: UpstreamConfig) -> None:
        await super().connect(config)
        self.capabilities = dataclasses.replace(self.inner.capabilities, modes=frozenset({"text"}))


class CrashOnTextTransport(DelegatingTransport):
    """An upstream whose ``send_text`` fails with an unexpected exception for ``/crash``."""

    async def send_text(self, text: str) -> None:
        if text == "/crash":
            raise RuntimeError("injected transport bug")
        await super().send_text(text)


class CrashingReaderTransport(DelegatingTransport):
    """An upstream whose event stream fails with an unexpected exception after ``/crash``."""

    def __init__(self, inner: Transport) -> None:
        super().__init__(inner)
        self.crash = asyncio.Event()

    async def send_text(self, text: str) -> None:
        if text == "/crash":
            self.crash.set()
            return
        await super().send_text(text)

    async def events(self) -> AsyncIterator[UpstreamEvent]:  # type: ignore[override]
        await self.crash.wait()
        raise RuntimeError("injected upstream reader bug")
        yield  # pragma: no cover  (makes this an async generator)


class FailingFirstResultsTransport(DelegatingTransport):
    """An upstream whose first ``send_tool_results`` fails with an unexpected exception."""

    def __init__(self, inner: Transport) -> None:
        super().__init__(inner)
        self.failures = 0

    async def send_tool_results(self, results: Sequence[ToolResult]) -> None:
        if self.failures == 0:
            self.failures += 1
            raise RuntimeError("injected transport bug")
        await super().send_tool_results(results)


def wrapped(kind: type[DelegatingTransport]) -> Any:
    def factory(provider: str, settings: Settings) -> Transport:
        return kind(make_transport(provider, settings))

    return factory


# -- invalid_json, invalid_event, unknown_event ---------------------------------------------


async def test_invalid_json_is_reported_and_the_session_continues(gateway: Gateway) -> None:
    async with gateway.session() as client:
        for bad in ("{nope", "", '{"type": "ping",}', "\x00"):
            await client.send_raw(bad)
            assert_error(await client.next(), "invalid_json")
        await alive(client)


@pytest.mark.parametrize(
    ("event", "field"),
    [
        ({"type": "text.send", "text": ""}, "text"),
        ({"type": "text.send", "text": "x" * 16_001}, "text"),
        ({"type": "text.send", "text": 5}, "text"),
        ({"type": "text.send"}, "text"),
        ({"type": "session.update", "mode": "radio"}, "mode"),
        ({"type": "confirmation.respond", "confirmation_id": "c", "decision": "maybe"}, "decision"),
        ({"type": "audio.playback", "response_id": "r", "played_ms": -1}, "played_ms"),
        ({"type": "audio.playback", "response_id": "r", "played_ms": "10"}, "played_ms"),
        ({"type": "audio.append", "audio": "***"}, "audio"),
        ({"type": "ping", "id": {"nested": True}}, "id"),
    ],
    ids=[
        "empty-text",
        "text-16001",
        "text-not-string",
        "text-missing",
        "update-mode",
        "decision",
        "played-negative",
        "played-string",
        "audio-not-base64",
        "ping-id-object",
    ],
)
async def test_invalid_event_names_the_field(
    gateway: Gateway, event: dict[str, Any], field: str
) -> None:
    async with gateway.session() as client:
        await client.send_raw(json.dumps({**event, "event_id": "bad-1"}))
        error = await client.next()
        assert_error(error, "invalid_event", event_id="bad-1")
        assert f"'{field}'" in error["message"]
        await alive(client)


@pytest.mark.parametrize(
    ("start", "field"),
    [
        ({"mode": "radio"}, "mode"),
        ({}, "mode"),
        ({"mode": "text", "provider": "skynet"}, "provider"),
        ({"mode": "voice", "audio": {"input_rate": 11025}}, "audio.input_rate"),
        ({"mode": "voice", "audio": {"output_rate": 44100}}, "audio.output_rate"),
        ({"mode": "text", "metadata": {f"k{i}": "v" for i in range(17)}}, "metadata"),
        ({"mode": "text", "metadata": {"k": 1}}, "metadata"),
        ({"mode": "text", "tools": "kb_search"}, "tools"),
        ({"mode": "text", "resume": {"session_id": "s"}}, "resume.resume_token"),
    ],
    ids=[
        "mode-radio",
        "mode-missing",
        "provider",
        "input-rate-11025",
        "output-rate-44100",
        "metadata-17-pairs",
        "metadata-not-string",
        "tools-not-list",
        "resume-without-token",
    ],
)
async def test_invalid_session_start_names_the_field_and_a_valid_one_then_works(
    gateway: Gateway, start: dict[str, Any], field: str
) -> None:
    async with gateway.connect() as client:
        await client.send("session.start", event_id="start-1", **start)
        error = await client.next()
        assert_error(error, "invalid_event", event_id="start-1")
        assert f"'{field}'" in error["message"]
        started = await client.start("text")
        assert started["resumed"] is False


async def test_boundary_values_are_accepted(gateway: Gateway) -> None:
    metadata = {f"k{i}": "v" for i in range(16)}
    async with gateway.connect() as client:
        started = await client.start(
            "voice", audio={"input_rate": 8000, "output_rate": 48000}, metadata=metadata
        )
        assert started["audio"] == {
            "input_rate": 8000,
            "output_rate": 48000,
            "upstream_input_rate": 8000,
        }
        await client.send("text.send", text="y" * 16_000)
        done = await client.last("response.done")
        assert done["text"] == "You said: " + "y" * 16_000
        assert "error" not in types(client.events)


async def test_unknown_event_type_keeps_the_session(gateway: Gateway) -> None:
    async with gateway.session() as client:
        await client.send("bogus.event", event_id="u1")
        error = await client.next()
        assert_error(error, "unknown_event", event_id="u1")
        assert "bogus.event" in error["message"]
        await client.send("bogus.other")  # no event_id: none echoed
        assert_error(await client.next(), "unknown_event")
        await alive(client)


async def test_event_without_string_type_is_invalid_event(gateway: Gateway) -> None:
    async with gateway.session() as client:
        await client.send_raw(json.dumps({"type": 7, "event_id": "t1"}))
        assert_error(await client.next(), "invalid_event", event_id="t1")
        await client.send_raw("[1, 2]")
        assert_error(await client.next(), "invalid_event")
        await alive(client)


# -- invalid_audio, payload_too_large ----------------------------------------------------------


async def test_odd_binary_frame_is_invalid_audio_in_voice_mode(gateway: Gateway) -> None:
    async with gateway.session("voice") as client:
        await client.send_raw(b"\x00\x01\x02")
        assert_error(await client.next(), "invalid_audio")
        await client.send("audio.append", audio=b64(b"\x00\x01\x02"), event_id="a1")
        assert_error(await client.next(), "invalid_audio", event_id="a1")
        await client.send_raw(b"")  # no samples at all
        assert_error(await client.next(), "invalid_audio")
        # A whole number of samples is accepted silently.
        await client.send_raw(bytes(320))
        await alive(client)
        assert types(client.events).count("error") == 3


async def test_binary_frame_over_its_limit_is_payload_too_large(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory(max_text_frame=1024, max_binary_frame=512)
    async with gateway.session("voice") as client:
        await client.send_raw(bytes(512))  # at the limit: accepted
        await client.send_raw(bytes(514))
        assert_error(await client.next(), "payload_too_large")
        await alive(client)


async def test_text_frame_over_its_limit_is_payload_too_large(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory(max_text_frame=1024, max_binary_frame=1024)
    async with gateway.session() as client:
        await client.send_raw(sized_frame(1025))
        assert_error(await client.next(), "payload_too_large")
        await alive(client)


async def test_frame_far_over_the_transport_limit_closes_1009(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory(max_text_frame=1024, max_binary_frame=1024)
    async with gateway.session() as client:
        await client.send_raw(sized_frame(1024))  # at the limit: fine
        assert (await client.next())["type"] == "pong"
        # Past the limit plus the transport's headroom (docs/protocol.md 10.2).
        await client.send_raw(sized_frame(1024 + TRANSPORT_HEADROOM))
        assert await client.wait_closed() == 1009


# -- not_started, already_started, session_start_timeout --------------------------------------


async def test_events_before_session_start_are_not_started(gateway: Gateway) -> None:
    async with gateway.connect() as client:
        await client.send("text.send", text="hi", event_id="early-1")
        assert_error(await client.next(), "not_started", event_id="early-1")
        await client.send("audio.commit", event_id="early-2")
        assert_error(await client.next(), "not_started", event_id="early-2")
        await client.send("confirmation.respond", confirmation_id="c", decision="approve")
        assert_error(await client.next(), "not_started")
        await client.send_raw(bytes(320))
        assert_error(await client.next(), "not_started")
        await client.send("ping", id=42)
        assert await client.next() == {"type": "pong", "id": 42}
        started = await client.start("text")
        assert started["type"] == "session.started"
        reply = await client.say("hello")
        assert reply[-1]["text"] == "You said: hello"


async def test_session_end_before_start_ends_cleanly(gateway: Gateway) -> None:
    async with gateway.connect() as client:
        await client.send("session.end")
        ended, code = await ended_then_closed(client)
        assert ended["reason"] == "client"
        assert code == 1000


async def test_second_session_start_is_already_started(gateway: Gateway) -> None:
    async with gateway.session() as client:
        session_id = client.started["session_id"]
        await client.send("session.start", mode="voice", event_id="again")
        assert_error(await client.next(), "already_started", event_id="again")
        await alive(client)
        assert list(gateway.manager.sessions) == [session_id]
        assert gateway.manager.sessions[session_id].mode == "text"


async def test_session_start_timeout_then_close_1008(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory(session_start_timeout_s=0.3)
    async with gateway.connect() as client:
        begun = time.monotonic()
        error = await client.next(within=3)
        assert_error(error, "session_start_timeout", fatal=True)
        assert await client.wait_closed() == 1008
        assert time.monotonic() - begun < 2.5
        assert client.events == [error]
        assert not gateway.manager.sessions


async def test_pings_do_not_extend_the_start_deadline(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory(session_start_timeout_s=0.4)
    async with gateway.connect() as client:
        await client.send("ping", id=1)
        assert (await client.next())["type"] == "pong"
        error = await client.next(within=3)
        assert_error(error, "session_start_timeout", fatal=True)
        assert await client.wait_closed() == 1008


# -- forbidden ---------------------------------------------------------------------------------


async def test_forbidden_tool_in_session_start_is_not_fatal(gateway: Gateway) -> None:
    async with gateway.connect() as client:
        await client.send(
            "session.start",
            mode="text",
            tools=["get_current_time", "create_care_log"],
            event_id="s1",
        )
        error = await client.next()
        assert_error(error, "forbidden", event_id="s1")
        assert "create_care_log" in error["message"]
        assert "get_current_time" not in error["message"]
        assert not gateway.manager.sessions
        started = await client.start("text", tools=["get_current_time"])
        assert [t["name"] for t in started["tools"]] == ["get_current_time"]


async def test_tools_filter_with_an_allowed_role(gateway: Gateway) -> None:
    async with gateway.session(roles=["caregiver"], tools=["create_care_log"]) as client:
        (tool,) = client.started["tools"]
        assert tool["name"] == "create_care_log"
        assert tool["requires_confirmation"] is True


async def test_unknown_tool_in_session_start_is_invalid_event(gateway: Gateway) -> None:
    async with gateway.connect() as client:
        await client.send("session.start", mode="text", tools=["no_such_tool"], event_id="s2")
        error = await client.next()
        assert_error(error, "invalid_event", event_id="s2")
        assert "'tools'" in error["message"] or "tools:" in error["message"]
        assert "no_such_tool" in error["message"]
        await client.start("text")


async def test_mode_the_provider_cannot_do_is_forbidden(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory(transports=wrapped(TextOnlyTransport))
    async with gateway.connect() as client:
        await client.send("session.start", mode="voice", event_id="v1")
        error = await client.next()
        assert_error(error, "forbidden", event_id="v1")
        assert "voice" in error["message"]
        assert not gateway.manager.sessions
        started = await client.start("text")
        assert started["mode"] == "text"

        await client.send("session.update", mode="voice", event_id="v2")
        error = await client.next()
        assert_error(error, "forbidden", event_id="v2")
        assert "voice" in error["message"]
        session = gateway.manager.sessions[started["session_id"]]
        assert session.mode == "text"
        await client.send("session.update", mode="text")
        assert await client.next() == {"type": "session.updated", "mode": "text"}
        reply = await client.say("still here")
        assert reply[-1]["text"] == "You said: still here"


# -- rate_limited ------------------------------------------------------------------------------


async def test_rate_limited_events_are_retryable_and_the_session_goes_on(
    gateway_factory: GatewayFactory,
) -> None:
    # The connection's budget: session.start spends one of the burst of 4, three are left.
    gateway = await gateway_factory(client_events_per_s=1, client_events_burst=4)
    async with gateway.session() as client:
        for i in range(10):
            await client.send("ping", id=i, event_id=f"p{i}")
        answers = [await client.next() for _ in range(10)]
        pongs = [a["id"] for a in answers if a["type"] == "pong"]
        limited = [a for a in answers if a["type"] == "error"]
        assert pongs[:3] == [0, 1, 2]
        assert 3 <= len(pongs) <= 4  # the burst, plus at most one refilled token
        assert len(pongs) + len(limited) == 10
        for error in limited:
            assert_error(error, "rate_limited", event_id=error["event_id"], retryable=True)
        assert {e["event_id"] for e in limited} == {f"p{i}" for i in range(10)} - {
            f"p{i}" for i in pongs
        }
        # The bucket refills at 1 event per second: a second later the session answers again.
        await asyncio.sleep(1.1)
        reply = await client.say("after the burst")
        assert reply[-1]["text"] == "You said: after the burst"
        assert client.started["session_id"] in gateway.manager.sessions


# -- upstream_error, upstream_unavailable, resume_failed, internal --------------------------


async def test_upstream_error_fails_one_response_only(gateway: Gateway) -> None:
    async with gateway.session() as client:
        await client.send("text.send", text="/error boom", event_id="e1")
        events = await client.until("response.done")
        assert types(events) == ["response.started", "error", "response.done"]
        error = events[1]
        assert_error(error, "upstream_error", event_id=error.get("event_id"), retryable=None)
        assert "boom" in error["message"]
        assert events[2]["status"] == "failed"
        assert events[2]["response_id"] == events[0]["response_id"]
        reply = await client.say("hello again")
        assert reply[-1]["text"] == "You said: hello again"
        assert reply[-1]["status"] == "completed"


async def test_upstream_unavailable_is_fatal(gateway: Gateway) -> None:
    async with gateway.connect() as client:
        await client.send("session.start", mode="text", provider="openai", event_id="o1")
        error = await client.next()
        assert_error(error, "upstream_unavailable", event_id="o1", fatal=True, retryable=None)
        assert "openai" in error["message"]
        ended, code = await ended_then_closed(client)
        assert ended["reason"] == "upstream_failed"
        assert code == 1000
        assert types(client.events) == ["error", "session.ended"]
        assert not gateway.manager.sessions


async def test_resume_failed_is_not_fatal(gateway: Gateway) -> None:
    async with gateway.connect() as client:
        await client.send(
            "session.start",
            mode="text",
            resume={"session_id": "sess_bogus", "resume_token": "nope"},
            event_id="r1",
        )
        error = await client.next()
        assert_error(error, "resume_failed", event_id="r1")
        started = await client.start("text")
        assert started["resumed"] is False
        assert started["session_id"] != "sess_bogus"


async def test_internal_error_handling_an_event_is_reported_not_fatal(
    gateway_factory: GatewayFactory,
) -> None:
    """``internal``: reached through an upstream transport that fails unexpectedly (injected
    through the public transport factory, nothing patched)."""
    gateway = await gateway_factory(transports=wrapped(CrashOnTextTransport))
    async with gateway.session() as client:
        await client.send("text.send", text="/crash")
        error = await client.next()
        assert_error(error, "internal")
        assert "injected" not in error["message"]  # no internals leak to the client
        reply = await client.say("and now")
        assert reply[-1]["text"] == "You said: and now"


async def test_internal_error_echoes_the_event_id(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory(transports=wrapped(CrashOnTextTransport))
    async with gateway.session() as client:
        await client.send("text.send", text="/crash", event_id="x1")
        assert_error(await client.next(), "internal", event_id="x1")


async def test_internal_failure_ends_with_reason_error_and_close_1011(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory(transports=wrapped(CrashingReaderTransport))
    async with gateway.session() as client:
        await client.send("text.send", text="/crash")
        ended, code = await ended_then_closed(client)
        assert ended["reason"] == "error"
        assert code == 1011


# -- how sessions end --------------------------------------------------------------------------


async def test_session_end_by_the_client(gateway: Gateway) -> None:
    async with gateway.session() as client:
        await client.say("hello")
        await client.send("session.end", reason="bye")
        ended, code = await ended_then_closed(client)
        assert ended["reason"] == "client"
        assert code == 1000
    assert not gateway.manager.sessions
    assert gateway.metric("gateway_active_sessions") == 0
    assert gateway.metric("gateway_sessions_ended_total", reason="client") == 1


async def test_upstream_failure_ends_the_session(gateway: Gateway) -> None:
    async with gateway.session() as client:
        await client.send("text.send", text="/fail")
        ended, code = await ended_then_closed(client)
        assert ended["reason"] == "upstream_failed"
        assert code == 1000
    assert not gateway.manager.sessions


async def test_idle_timeout(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory(idle_timeout_s=0.5)
    async with gateway.connect() as client:
        started = await client.start("text")
        assert started["limits"]["idle_timeout_s"] == 0.5
        begun = time.monotonic()
        ended, code = await ended_then_closed(client)
        assert ended["reason"] == "idle_timeout"
        assert code == 1000
        # (the idle clock started when the session opened, just before session.started)
        assert 0.5 <= time.monotonic() - begun + 0.05 < 3
    assert gateway.metric("gateway_sessions_ended_total", reason="idle_timeout") == 1


async def test_activity_postpones_the_idle_timeout(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory(idle_timeout_s=0.6)
    async with gateway.session() as client:
        begun = time.monotonic()
        for i in range(4):  # active for ~1.2 s, twice the idle timeout
            await asyncio.sleep(0.3)
            await alive(client, f"keep-{i}")
        ended, _ = await ended_then_closed(client)
        assert ended["reason"] == "idle_timeout"
        assert time.monotonic() - begun >= 1.2 + 0.6


async def test_max_duration(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory(max_duration_s=0.6)
    async with gateway.connect() as client:
        started = await client.start("text")
        assert started["limits"]["max_duration_s"] == 0.6
        begun = time.monotonic()
        await alive(client)  # activity does not matter for the maximum duration
        ended, code = await ended_then_closed(client)
        assert ended["reason"] == "max_duration"
        assert code == 1000
        assert 0.6 <= time.monotonic() - begun + 0.05 < 3


# -- auth (section 2) --------------------------------------------------------------------------


def _now() -> int:
    return int(time.time())


@pytest.mark.parametrize(
    "header",
    [
        None,
        "Bearer not-a-jwt",
        "Bearer " + jwt.encode({"sub": "a", "exp": _now() - 10}, SECRET, "HS256"),
        "Bearer " + jwt.encode({"sub": "a", "exp": _now() + 60}, "y" * 40, "HS256"),
        "Bearer " + jwt.encode({"exp": _now() + 60}, SECRET, "HS256"),
        "Bearer " + jwt.encode({"sub": "a"}, SECRET, "HS256"),
        "Bearer " + jwt.encode({"sub": "a", "exp": _now() + 60}, None, "none"),
        "Basic " + token(),
    ],
    ids=[
        "missing",
        "malformed",
        "expired",
        "bad-signature",
        "no-sub",
        "no-exp",
        "alg-none",
        "not-bearer",
    ],
)
async def test_bad_credentials_get_401_json_and_no_socket(
    gateway: Gateway, header: str | None
) -> None:
    headers = {} if header is None else {"Authorization": header}
    async with aiohttp.ClientSession() as http:
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await http.ws_connect(f"{gateway.url}/v1/session", headers=headers)
        assert refused.value.status == 401
        async with http.get(f"{gateway.url}/v1/session", headers=headers) as response:
            assert response.status == 401
            assert response.content_type == "application/json"
            body = await response.json()
        assert body["error"]["code"] == "unauthorized"
        assert isinstance(body["error"]["message"], str)
    assert not gateway.manager.sessions


async def test_token_in_the_query_works(gateway: Gateway) -> None:
    async with aiohttp.ClientSession() as http:
        url = f"{gateway.url}/v1/session?token={token('bob', ['caregiver'])}"
        async with http.ws_connect(url) as ws:
            client = Client(ws)
            started = await client.start("text")
            assert "create_care_log" in {t["name"] for t in started["tools"]}
            assert gateway.manager.sessions[started["session_id"]].user.user_id == "bob"
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await http.ws_connect(f"{gateway.url}/v1/session?token=garbage")
        assert refused.value.status == 401


async def test_origin_allowlist(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory(allowed_origins=["https://ok.example"])
    async with aiohttp.ClientSession() as http:
        headers = {"Authorization": f"Bearer {token()}", "Origin": "https://evil.example"}
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await http.ws_connect(f"{gateway.url}/v1/session", headers=headers)
        assert refused.value.status == 403
    async with gateway.connect(headers={"Origin": "https://ok.example"}) as client:
        assert (await client.start("text"))["type"] == "session.started"
    async with gateway.connect() as client:  # no Origin: not a browser
        assert (await client.start("text"))["type"] == "session.started"


async def test_connection_rate_limit(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory(connections_per_minute=3)
    for _ in range(3):
        async with gateway.connect() as client:
            await alive(client)
    async with aiohttp.ClientSession() as http:
        headers = {"Authorization": f"Bearer {token()}"}
        with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
            await http.ws_connect(f"{gateway.url}/v1/session", headers=headers)
        assert refused.value.status == 429
        async with http.get(f"{gateway.url}/v1/session", headers=headers) as response:
            assert response.status == 429
            body = await response.json()
        assert body["error"]["code"] == "rate_limited"


async def test_roles_claim_filters_session_started_tools(gateway: Gateway) -> None:
    names: dict[str, set[str]] = {}
    for roles in ((), ("caregiver",), ("admin",), ("visitor",)):
        async with gateway.session(roles=roles) as client:
            names[",".join(roles)] = {t["name"] for t in client.started["tools"]}
    assert "create_care_log" not in names[""]
    assert "create_care_log" not in names["visitor"]
    assert "create_care_log" in names["caregiver"]
    assert "create_care_log" in names["admin"]
    assert names["caregiver"] - names[""] == {"create_care_log"}
    assert {"kb_search", "get_current_time", "calendar_create_event"} <= names[""]


async def test_default_limits_allow_100_sessions_from_one_address(gateway: Gateway) -> None:
    """Sessions are opened one after the other, each answered; their sockets close in the
    background (a session's socket closes up to a timer tick after ``session.ended``)."""
    begun = time.monotonic()
    ids: set[str] = set()
    closing: list[asyncio.Task[int | None]] = []
    headers = {"Authorization": f"Bearer {token()}"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        for i in range(100):
            ws = await http.ws_connect(f"{gateway.url}/v1/session", headers=headers)
            client = Client(ws)
            started = await client.start("text")
            ids.add(started["session_id"])
            await client.send("session.end")
            assert (await client.last("session.ended"))["reason"] == "client", i
            closing.append(asyncio.create_task(client.wait_closed()))
        codes = await asyncio.gather(*closing)
    assert codes == [1000] * 100
    assert len(ids) == 100
    assert time.monotonic() - begun < 30
    assert gateway.metric("gateway_sessions_ended_total", reason="client") == 100


async def test_a_tool_batch_that_fails_inside_the_gateway_is_still_answered(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory(transports=wrapped(FailingFirstResultsTransport))
    async with gateway.session() as client:
        await client.send("text.send", text="/tool get_current_time {}")
        reply = (await client.until_reply())[-1]
        await alive(client)
    # The model got the call's result on a second try instead of waiting forever, and answered.
    ((name, envelope),) = model_results(reply["text"])
    assert name == "get_current_time"
    assert envelope["ok"] is True
