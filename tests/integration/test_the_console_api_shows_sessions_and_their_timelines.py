"""The console's API on one node (no Redis): the live sessions with their summaries, a
session's timeline (a tool call with its result projected through the allowlist, never a field
outside it), the stream of the directory, the drain of the node, and the gate (an admin
credential, an allowed origin)."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from harness import Gateway, GatewayFactory, token

ARTICLE = "billing-payments"
BODY_WORDS = "Invoices are sent on the first working day"  # kb_get's body: outside its allowlist


def admin() -> dict[str, str]:
    return {"Authorization": f"Bearer {token('ops', ['admin'])}"}


async def get(gateway: Gateway, path: str, **headers: str) -> tuple[int, Any]:
    async with gateway.http.get(gateway.url + path, headers=headers or admin()) as answer:
        return answer.status, await answer.json(content_type=None)


async def until(gateway: Gateway, done: Any, within: float = 5.0) -> Any:
    """``done()``'s answer once it has one, looked at after each of the console's
    publications."""
    console = gateway.server.console
    assert console is not None
    async with asyncio.timeout(within):
        while not (found := await done()):
            await console.changed.wait()
        return found


async def test_sessions_and_a_timeline_with_a_projected_tool_result(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory(admin=True)
    async with gateway.session("text", sub="carol") as client:
        started = client.started
        sid = started["session_id"]
        events = await client.say(f'/tool kb_get {{"id": "{ARTICLE}"}}')
        assert any(e["type"] == "tool.finished" for e in events)

        async def listed() -> Any:
            status, body = await get(gateway, "/admin/v1/console/sessions")
            assert status == 200
            return next((s for s in body["sessions"] if s["session_id"] == sid), None)

        summary = await until(gateway, listed)
        assert summary["node"] == gateway.manager.node_id
        assert (summary["user_id"], summary["edge"], summary["mode"]) == (
            "carol",
            "websocket",
            "text",
        )
        assert summary["turns"] == 1
        assert summary["tool_calls"] == 1
        assert summary["state"] == "live"

        status, timeline = await get(gateway, f"/admin/v1/console/sessions/{sid}/timeline")
        assert status == 200
        assert timeline["live"] is True
        (tool,) = [e for e in timeline["entries"] if e["kind"] == "tool"]
        assert (tool["name"], tool["ok"]) == ("kb_get", True)
        assert tool["arguments"] == {"id": ARTICLE}
        assert set(tool["data"]) == {"id", "title"}
        assert BODY_WORDS not in orjson.dumps(timeline).decode()  # never outside the allowlist
        assert [e["kind"] for e in timeline["entries"]][:2] == ["turn", "tool"]
        assert not any(e["kind"] == "transcript" for e in timeline["entries"])  # retention off
        await client.send("session.end")
        await client.last("session.ended")

    async def gone() -> bool:
        _, body = await get(gateway, "/admin/v1/console/sessions")
        return not any(s["session_id"] == sid for s in body["sessions"])

    await until(gateway, gone)
    status, timeline = await get(gateway, f"/admin/v1/console/sessions/{sid}/timeline")
    assert status == 200  # after its end, from what was written
    assert timeline["live"] is False
    assert timeline["entries"][-1] == {**timeline["entries"][-1], "kind": "ended"}
    assert (await get(gateway, "/admin/v1/console/sessions/sess_nope/timeline"))[0] == 404


async def test_the_stream_sends_the_directory_and_the_gate_holds(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory(admin=True, allowed_origins="https://ops.test")
    async with gateway.http.get(gateway.url + "/admin/v1/console/stream", headers=admin()) as live:
        assert live.status == 200
        assert live.headers["Content-Type"] == "text/event-stream"
        first = await asyncio.wait_for(live.content.readuntil(b"\n\n"), 5)
        assert first.startswith(b"event: sessions\ndata: ")
        directory = orjson.loads(first.split(b"data: ", 1)[1])
        (node,) = directory["nodes"]
        assert node["node_id"] == gateway.manager.node_id
        assert node["alive"] is True

    user = {"Authorization": f"Bearer {token('carol')}"}
    assert (await get(gateway, "/admin/v1/console/sessions", **user))[0] == 403
    assert (
        await get(gateway, "/admin/v1/console/nodes", **{"Origin": "https://evil.test", **admin()})
    )[0] == 403
    async with gateway.http.get(gateway.url + "/admin/v1/console/sessions") as anonymous:
        assert anonymous.status == 401

    node_id = gateway.manager.node_id
    async with gateway.http.post(
        f"{gateway.url}/admin/v1/console/nodes/{node_id}/drain", headers=admin()
    ) as drained:
        assert drained.status == 202
        assert await drained.json() == {"node_id": node_id, "draining": True}
    assert gateway.server.drain_asked.is_set()  # gateway serve then drains as on SIGTERM
    async with gateway.http.post(
        f"{gateway.url}/admin/v1/console/nodes/nowhere/drain", headers=admin()
    ) as unknown:
        assert unknown.status == 404


async def test_no_console_without_the_admin_api(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory()
    for path in ("/console", "/admin/v1/console/sessions"):
        async with gateway.http.get(gateway.url + path, headers=admin()) as answer:
            assert answer.status == 404, path


async def test_with_no_origins_listed_only_the_gateways_own_pages_may_call(
    gateway_factory: GatewayFactory,
) -> None:
    gateway = await gateway_factory(admin=True)
    own = gateway.url  # http://127.0.0.1:port, the console's own origin
    path = "/admin/v1/console/nodes"
    assert (await get(gateway, path, **{"Origin": own, **admin()}))[0] == 200
    assert (await get(gateway, path, **{"Origin": "https://evil.test", **admin()}))[0] == 403
    assert (await get(gateway, "/admin/v1/keys", **{"Origin": "http://evil.test", **admin()}))[
        0
    ] == 403


async def test_with_tracing_on_a_timeline_links_its_trace(gateway_factory: GatewayFactory) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    from gateway.observability import Tracing

    provider = TracerProvider()
    gateway = await gateway_factory(
        admin=True,
        tracing=Tracing(provider),
        console_trace_url="https://traces.example/trace/{trace_id}",
    )
    try:
        async with gateway.session("text", sub="carol") as client:
            sid = client.started["session_id"]
            await client.say("hello")
            session = gateway.manager.sessions[sid]
            assert session.trace is not None
            context = session.trace.session_span.get_span_context()
            trace_id = format(context.trace_id, "032x")

            async def traced() -> Any:
                _, body = await get(gateway, f"/admin/v1/console/sessions/{sid}/timeline")
                return body if body.get("trace_id") else None

            timeline = await until(gateway, traced)
        assert timeline["trace_id"] == trace_id
        assert timeline["trace_url"] == f"https://traces.example/trace/{trace_id}"
    finally:
        provider.shutdown()
