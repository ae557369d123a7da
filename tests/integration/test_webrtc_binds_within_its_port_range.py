"""GATEWAY_WEBRTC_UDP_PORTS: the gateway's ICE candidates bind within the range (a firewall
needs to open only it), other datagram endpoints are left alone, and a full range says so."""

from __future__ import annotations

import asyncio
import re
import socket

import pytest
from harness import GatewayFactory, token
from webrtc_kit import Peer

from gateway.edges.rtc.udp_ports import PortsExhausted, bind_in_range


def free_udp_range(size: int) -> tuple[int, int]:
    """``size`` consecutive UDP ports that are free now (found by binding them)."""
    for low in range(41000, 60000, 97):
        held = []
        try:
            for port in range(low, low + size):
                sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                held.append(sock)
                sock.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            for sock in held:
                sock.close()
        return low, low + size - 1
    raise AssertionError("no free UDP range")


async def test_endpoints_on_port_zero_take_the_range_and_others_pass_through() -> None:
    loop = asyncio.get_running_loop()
    low, high = free_udp_range(3)
    bind_in_range(loop, low, high)
    transports = []
    try:
        for _ in range(3):
            transport, _ = await loop.create_datagram_endpoint(
                asyncio.DatagramProtocol, local_addr=("127.0.0.1", 0)
            )
            transports.append(transport)
        ports = sorted(t.get_extra_info("sockname")[1] for t in transports)
        assert ports == [low, low + 1, high]
        with pytest.raises(PortsExhausted, match=f"no free UDP port in {low}-{high}"):
            await loop.create_datagram_endpoint(
                asyncio.DatagramProtocol, local_addr=("127.0.0.1", 0)
            )
        # A client endpoint (remote_addr) is not the ICE agent's: the kernel picks its port.
        client, _ = await loop.create_datagram_endpoint(
            asyncio.DatagramProtocol, remote_addr=("127.0.0.1", low)
        )
        transports.append(client)
        assert not low <= client.get_extra_info("sockname")[1] <= high
    finally:
        for transport in transports:
            transport.close()


async def test_the_answers_candidates_are_in_the_range(gateway_factory: GatewayFactory) -> None:
    low, high = free_udp_range(20)
    gateway = await gateway_factory(webrtc_udp_ports=f"{low}-{high}")
    peer = Peer(audio=False)
    try:
        async with gateway.http.post(
            gateway.url + "/v1/webrtc/offer",
            json={"sdp": await peer.offer(), "type": "offer"},
            headers={"Authorization": f"Bearer {token('alice')}"},
        ) as response:
            assert response.status == 200
            answer = await response.json()
        ports = [
            int(m.group(1))
            for m in re.finditer(r"a=candidate:\S+ 1 udp \d+ \S+ (\d+) typ host", answer["sdp"])
        ]
        assert ports
        assert all(low <= port <= high for port in ports), ports
        await peer.answered(answer)  # and the call connects through them
        peer.send({"type": "session.start", "mode": "text"})
        await peer.until_event("session.started")
    finally:
        await peer.close()
