"""Pipecat as the tool-dispatch peer: its OpenAI Realtime service with a no-op function.

Run with the Pipecat venv (``bench.peers.venvs.PIPECAT_REQUIREMENTS``), never the main one:

    python pipecat_dispatch.py --port P --upstream ws://127.0.0.1:F/v1/realtime [--no-pace]

The same server as the relay peer (``pipecat_server.py`` beside this file: its transport, raw
PCM16 at 24 kHz both ways, and compression off on both hops, which importing it sets up), with
one difference: the service declares a ``noop`` function in its session and registers a handler
for it with ``llm.register_function("noop", handler)``. The handler answers ``{}`` at once, so a
dispatch measures Pipecat's own path: ``response.function_call_arguments.done`` →
``run_function_calls`` → the handler → ``FunctionCallResultFrame`` → ``function_call_output``
to the upstream. Every connection gets this pipeline, so the benchmark's background echo
sessions run through the same process as the dispatching one.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import uvicorn
from fastapi import FastAPI, WebSocket
from fastapi.responses import PlainTextResponse
from loguru import logger
from pipecat.adapters.llm.schemas.function_schema import FunctionSchema
from pipecat.adapters.llm.schemas.tools_schema import ToolsSchema
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineParams, PipelineWorker
from pipecat.services.llm_service import FunctionCallParams
from pipecat.services.openai.realtime import events
from pipecat.services.openai.realtime import llm as realtime_llm
from pipecat.workers.runner import WorkerRunner

# The relay peer's transport (raw PCM serializer, optional unpaced output); importing it also
# turns compression off on the upstream hop.
from pipecat_server import SAMPLE_RATE, _transport

NOOP = FunctionSchema(
    name="noop",
    description="Does nothing; for the tool dispatch benchmark only.",
    properties={},
    required=[],
)


async def noop(params: FunctionCallParams) -> None:
    await params.result_callback({})


async def _run_session(websocket: WebSocket, upstream: str, paced: bool) -> None:
    transport = _transport(websocket, paced)
    service = realtime_llm.OpenAIRealtimeLLMService(
        api_key="sk-bench",
        base_url=upstream,
        settings=realtime_llm.OpenAIRealtimeLLMService.Settings(
            model="gpt-realtime",
            session_properties=events.SessionProperties(tools=ToolsSchema(standard_tools=[NOOP])),
        ),
    )
    service.register_function("noop", noop)
    pipeline = Pipeline([transport.input(), service, transport.output()])
    worker = PipelineWorker(
        pipeline,
        params=PipelineParams(audio_in_sample_rate=SAMPLE_RATE, audio_out_sample_rate=SAMPLE_RATE),
        enable_rtvi=False,
        idle_timeout_secs=None,
    )

    @transport.event_handler("on_client_disconnected")
    async def _closed(_transport: Any, _websocket: WebSocket) -> None:
        await worker.cancel()

    runner = WorkerRunner(handle_sigint=False, handle_sigterm=False)
    await runner.add_workers(worker)
    await runner.run()


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
    logger.remove()  # Pipecat logs at DEBUG by default, per call in places: warnings only
    logger.add(sys.stderr, level="WARNING")
    uvicorn.run(
        make_app(args.upstream, paced=not args.no_pace),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        ws_per_message_deflate=False,
        ws_max_size=1 << 24,
    )


if __name__ == "__main__":
    main()
