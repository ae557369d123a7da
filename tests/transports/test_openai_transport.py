"""The OpenAI Realtime transport's shell, against the fake over a real socket."""

from __future__ import annotations

import pytest
from openai import AsyncOpenAI

from fakes.openai_realtime.server import FakeRealtimeServer
from transports.openai_realtime import RealtimeOptions, backoff_delay
from transports.openai_realtime.transport import frame_sender


async def test_frames_go_straight_to_the_socket_with_this_sdk() -> None:
    async with FakeRealtimeServer() as fake:
        client = AsyncOpenAI(api_key="sk-test", websocket_base_url=fake.ws_url)
        async with client.realtime.connect(model="gpt-realtime") as conn:
            send = frame_sender(conn)
            # The SDK's send_raw would also work; the fast path is what the benchmark measured.
            assert send != conn.send_raw
            await send('{"type":"input_audio_buffer.clear"}')
            received = await (await fake.wait_connections(1)).wait_for(
                "input_audio_buffer.clear", direction="in"
            )
        await client.close()
    assert received == {"type": "input_audio_buffer.clear"}


@pytest.mark.parametrize(
    ("attempt", "low", "high"),
    [(1, 0.0, 0.0), (2, 0.1875, 0.25), (3, 0.375, 0.5), (4, 0.75, 1.0), (9, 3.0, 4.0)],
)
def test_backoff_starts_at_once_then_doubles_to_a_cap(
    attempt: int, low: float, high: float
) -> None:
    options = RealtimeOptions(api_key="x", reconnect_initial_s=0.25, reconnect_max_s=4.0)
    assert backoff_delay(attempt, options, jitter=lambda: 0.0) == pytest.approx(low)
    assert backoff_delay(attempt, options, jitter=lambda: 1.0) == pytest.approx(high)
