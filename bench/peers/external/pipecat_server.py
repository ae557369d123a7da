"""Pipecat as a peer of the gateway: its OpenAI Realtime service behind its WebSocket transport.

Run with the Pipecat venv (``bench.peers.venvs.PIPECAT_REQUIREMENTS``), never the main one; the
main venv's mypy does not see this file (pyproject ``[tool.mypy] exclude``) because Pipecat is
not installed there.

    python pipecat_server.py --port P --upstream ws://127.0.0.1:F/v1/realtime [--no-pace]

Each WebSocket at ``/ws`` gets its own pipeline: transport input → ``OpenAIRealtimeLLMService``
(connected to ``--upstream``, the OpenAI fake) → transport output. The client protocol is raw
PCM16 at 24 kHz both ways (``RawPcmSerializer``): binary frames in, binary frames out, nothing
else. Output is cut into 20 ms chunks (one bench frame) and no silence is inserted, so every
byte the client receives is echoed audio.

Pacing: ``FastAPIWebsocketOutputTransport.write_audio_frame`` calls ``_write_audio_sleep`` after
every chunk to mimic a sound card (half a chunk's duration per chunk). ``--no-pace`` uses a
subclass whose ``_write_audio_sleep`` returns at once: the same code path minus that sleep.

Compression: off on both hops. The client hop is uvicorn's (``ws_per_message_deflate=False``);
the upstream hop is ``websockets.connect`` inside Pipecat's service, whose default offers
permessage-deflate, which the fake accepts: the service module's ``websocket_connect`` is
replaced by one with ``compression=None``.
"""

from __future__ import annotations

import argparse
import functools
import sys
from typing import Any

import uvicorn
from fastapi import FastAPI, WebSocket
from fastapi.responses import PlainTextResponse
from loguru import logger
from pipecat.frames.frames import Frame, InputAudioRawFrame, OutputAudioRawFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.serializers.base_serializer import FrameSerializer
from pipecat.services.openai.realtime import llm as realtime_llm
from pipecat.transports.websocket.fastapi import (
    FastAPIWebsocketOutputTransport,
    FastAPIWebsocketParams,
    FastAPIWebsocketTransport,
)
from pipecat.workers.runner import WorkerRunner
from websockets.asyncio.client import connect as websocket_connect

SAMPLE_RATE = 24000
CHUNKS_OF_10_MS = 2  # 20 ms output chunks: one bench frame each

# Compression off on the upstream hop (see the module docstring).
realtime_llm.websocket_connect = functools.partial(websocket_connect, compression=None)  # type: ignore[assignment]


class RawPcmSerializer(FrameSerializer):
    """Binary frames are PCM16 mono at 24 kHz, both ways; everything else is dropped."""

    async def serialize(self, frame: Frame) -> str | bytes | None:
        if isinstance(frame, OutputAudioRawFrame):
            return frame.audio
        return None

    async def deserialize(self, data: str | bytes) -> Frame | None:
        if isinstance(data, bytes):
            return InputAudioRawFrame(audio=data, sample_rate=SAMPLE_RATE, num_channels=1)
        return None


class UnpacedOutputTransport(FastAPIWebsocketOutputTransport):
    """Sends audio as soon as it is chunked: the playback-clock sleep is skipped."""

    async def _write_audio_sleep(self) -> None:
        return


class UnpacedWebsocketTransport(FastAPIWebsocketTransport):
    """``FastAPIWebsocketTransport`` with ``UnpacedOutputTransport`` as its output."""

    def __init__(self, websocket: WebSocket, params: FastAPIWebsocketParams) -> None:
        super().__init__(websocket, params)
        self._output = UnpacedOutputTransport(
            self, self._client, self._params, name=self._output_name
        )


def _transport(websocket: WebSocket, paced: bool) -> FastAPIWebsocketTransport:
    params = FastAPIWebsocketParams(
        audio_in_enabled=True,
        audio_in_sample_rate=SAMPLE_RATE,
        audio_out_enabled=True,
        audio_out_sample_rate=SAMPLE_RATE,
        audio_out_10ms_chunks=CHUNKS_OF_10_MS,
        audio_out_auto_silence=False,  # silence would be bytes the client did not send
        audio_out_end_silence_secs=0,
        serializer=RawPcmSerializer(),
    )
    if paced:
        return FastAPIWebsocketTransport(websocket, params)
    return UnpacedWebsocketTransport(websocket, params)


async def _run_session(websocket: WebSocket, upstream: str, paced: bool) -> None:
    transport = _transport(websocket, paced)
    service = realtime_llm.OpenAIRealtimeLLMService(
        api_key="sk-bench",
        base_url=upstream,
        settings=realtime_llm.OpenAIRealtimeLLMService.Settings(model="gpt-realtime"),
    )
    pipeline = Pipeline([transport.input(), service, transport.output()])
    worker = PipelineWorker(
        pipeline,
        params=PipelineParams(audio_in_sample_rate=SAMPLE_RATE, audio_out_sample_rate=SAMPLE_RATE),
        enable_rtvi=False,  # no RTVI client on the other end: its processor would be dead weight
        idle_timeout_secs=None,  # sessions end when the client closes
    )

    @transport.event_handler("on_client_disconnected")
    async def _closed(_transport: Any, _websocket: WebSocket) -> None:
        await worker.cancel()

    runner = WorkerRunner(handle_sigint=False, handle_sigterm=False)
    await runner.add_workers(worker)
    await runner.run()  # ends when the worker does


def make_app(upstream: str, paced: bool) -> FastAPI:
    app = FastAPI()

    @app.get("/healthz")
    async def _healthz() -> PlainTextResponse:
        return PlainTextResponse("ok")

    @app.websocket("/ws")
    async def _session(websocket: WebSocket) -> None:
        await websocket.accept()
        await _run_session(websocket, upstream, paced)

    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True, help="ws://HOST:PORT/v1/realtime")
    parser.add_argument("--no-pace", action="store_true", help="skip the playback-clock sleep")
    args = parser.parse_args()
    logger.remove()  # Pipecat logs at DEBUG by default, per frame in places: warnings only
    logger.add(sys.stderr, level="WARNING")
    app = make_app(args.upstream, paced=not args.no_pace)
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        ws_per_message_deflate=False,
        ws_max_size=1 << 24,
    )


if __name__ == "__main__":
    main()
