"""Session lifecycle edges: upstream closes that take time, draining, and long approvals."""

from __future__ import annotations

import asyncio
from typing import ClassVar

import pytest
from harness import DelegatingTransport, GatewayFactory, registry_with_variant

from gateway.config import Settings
from gateway.providers import make_transport
from gateway.registry import Registry
from transports.base import Transport


class SlowCloseTransport(DelegatingTransport):
    """An upstream whose close takes a while (a provider socket's closing handshake)."""

    instances: ClassVar[list[SlowCloseTransport]] = []

    def __init__(self, inner: Transport) -> None:
        super().__init__(inner)
        self.close_finished = False
        SlowCloseTransport.instances.append(self)

    async def close(self) -> None:
        await asyncio.sleep(0.2)
        await super().close()
        self.close_finished = True


def slow_close(provider: str, settings: Settings) -> Transport:
    return SlowCloseTransport(make_transport(provider, settings))


@pytest.mark.parametrize("ending", ["idle_timeout", "max_duration", "client"])
async def test_a_slow_upstream_close_is_never_cut_short(
    gateway_factory: GatewayFactory, ending: str
) -> None:
    SlowCloseTransport.instances.clear()
    limits = {"idle_timeout": {"idle_timeout_s": 0.3}, "max_duration": {"max_duration_s": 0.3}}
    gateway = await gateway_factory(transports=slow_close, **limits.get(ending, {}))
    async with gateway.session() as client:
        if ending == "client":
            await client.send("session.end")
        ended = await client.last("session.ended")
        assert ended["reason"] == ending
        assert await client.wait_closed() == 1000
    (transport,) = SlowCloseTransport.instances
    # The socket closes only once the session is forgotten, which waits for the upstream.
    assert transport.close_finished
    assert not gateway.manager.sessions


async def test_a_start_after_draining_began_is_refused(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory()
    async with gateway.connect() as client:  # upgraded before the drain, not started yet
        await gateway.server.drain()
        await client.send("session.start", mode="text", event_id="late")
        error = await client.next()
        assert error["type"] == "error"
        assert error["code"] == "upstream_unavailable"
        assert error["fatal"] is True
        assert error["event_id"] == "late"
        assert await client.next() == {
            "type": "session.ended",
            "reason": "shutdown",
            "detail": "the gateway is draining",
        }
        assert await client.wait_closed() == 1000
    assert not gateway.manager.sessions


async def test_drain_does_not_wait_for_parked_sessions(gateway_factory: GatewayFactory) -> None:
    gateway = await gateway_factory(drain_grace_s=5, resume_window_s=30)
    async with gateway.session() as client:
        session_id = client.started["session_id"]
    assert session_id in gateway.manager.sessions  # parked for a resume
    loop = asyncio.get_running_loop()
    began = loop.time()
    await gateway.server.drain()
    assert loop.time() - began < 2  # not the 5 s grace: nobody can resume while draining
    assert not gateway.manager.sessions


@pytest.fixture(scope="module")
def slow_confirmed_registry(tmp_path_factory: pytest.TempPathFactory) -> Registry:
    """The runner fixtures plus ``slow_confirmed``: sleepy, but it needs confirmation."""
    root = tmp_path_factory.mktemp("slow_confirmed")
    return registry_with_variant(root, "sleepy", "slow_confirmed", requiresConfirmation=True)


async def test_an_approved_slow_tool_does_not_hold_up_the_client(
    gateway_factory: GatewayFactory, slow_confirmed_registry: Registry
) -> None:
    gateway = await gateway_factory(registry=slow_confirmed_registry)
    async with gateway.session() as client:
        await client.send("text.send", text='/tool slow_confirmed {"ms": 600}')
        requested = await client.last("confirmation.requested")
        await client.until_reply()
        await client.send(
            "confirmation.respond", confirmation_id=requested["confirmation_id"], decision="approve"
        )
        await client.send("ping", id="during")
        events = await client.until("confirmation.resolved")
        kinds = [(e["type"], e.get("id")) for e in events]
        # The pong answers at once; the tool's end comes ~600 ms later.
        assert kinds.index(("pong", "during")) < kinds.index(("tool.finished", None))
        assert events[-1]["decision"] == "approved"
        assert events[-1]["result"]["ok"] is True
