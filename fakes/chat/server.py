"""A faithful fake chat-completions server (SSE) over aiohttp, for tests and benchmarks.

What to answer is decided by the pure ``brain.decide``; how it looks on the wire is made by
the pure ``stream_chunks`` / ``completion_object`` / ``error_body`` here; the rest is the thin
aiohttp shell: ``POST /v1/chat/completions`` (and ``/chat/completions``), the Bearer key check,
the request log (``requests``, ``responses``, ``wait_for_requests``; a ``tap`` sees each
exchange as it comes, also when ``log_exchanges`` is off for a long run), the waits between chunks,
and ``Cut`` (the stream breaks off: no ``finish_reason``, no ``[DONE]``, the TCP is closed).
A ``Text`` marked ``unannounced`` (``/unknown``) carries what providers add without notice: a
chunk of an ``object`` type the API reference does not list, and fields it does not list on the
chunks and their deltas (``UNANNOUNCED_OBJECT``, ``UNANNOUNCED_FIELD``).

Fault modes (``server.faults``, ``fakes.faults``), per request: ``refuse`` resets the connection
before any answer; ``status`` answers the API's error JSON (``retry-after-ms``, and ``Retry-After``
on a 429); neither request is logged. A stall takes the request as usual (logged, ``tap``) and
holds the answer back until the client goes (aiohttp cancels the handler then): a streamed answer
under ``stall_first_output`` gets its 200 and SSE headers and then no byte (as an API that has
accepted the request and whose model never produces a token); under
``stall_mid_response_after = N`` its first ``N`` SSE chunks (the role chunk counts); a
non-streamed answer under either gets nothing at all, not even a status line.

Run it alone with ``python -m fakes.chat --port P [--api-key K]``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from fakes.chat.brain import Calls, Cut, FakeCall, FakeReply, HttpError, Text, decide
from fakes.fault_replies import openai_error_body, refuse
from fakes.faults import Refuse, UpstreamFaults
from fakes.lifecycle import Served

__all__ = [
    "UNANNOUNCED_FIELD",
    "UNANNOUNCED_OBJECT",
    "Envelope",
    "FakeChatOptions",
    "FakeChatServer",
    "completion_object",
    "error_body",
    "stream_chunks",
    "text_pieces",
    "tool_call_deltas",
]

_log = logging.getLogger(__name__)
_ROUTES = frozenset({"/v1/chat/completions", "/chat/completions"})
_WORDS = re.compile(r"\s*\S+\s*")
# Names the API reference does not list: a client must ignore them.
UNANNOUNCED_OBJECT = "chat.completion.unannounced_feature"
UNANNOUNCED_FIELD = "unannounced_field"
_NOT_AUTHORIZED = (
    "Incorrect API key provided. You can find your API key at "
    "https://platform.openai.com/account/api-keys."
)


@dataclass(frozen=True, slots=True)
class FakeChatOptions:
    api_key: str | None = None  # when set, ``Authorization: Bearer <key>`` must match (else 401)
    fragment_size: int = 3  # characters per streamed arguments fragment
    interleave: bool = True  # parallel calls: all first pieces, then fragments round-robin
    split_names: bool = False  # a call's name in two pieces
    omit_ids: bool = False  # no ``id`` in the tool-call deltas: the client makes its own
    empty_deltas: bool = True  # sprinkle ``{}`` deltas and ``tool_calls: []``
    word_delay_s: float = 0.0  # between text pieces
    retry_after_ms: int = 1  # the ``retry-after-ms`` header of 429 and 5xx answers
    text_chunk_chars: int | None = None  # text in pieces of exactly this many characters
    log_exchanges: bool = True  # keep ``requests`` and ``responses`` (a long run does not)


@dataclass(frozen=True, slots=True)
class Envelope:
    """What every chunk of one completion repeats."""

    completion_id: str
    created: int
    model: str
    include_usage: bool = False
    prompt_tokens: int = 0


# The wire format (pure) ------------------------------------------------------------------------

Frame = tuple[float, dict[str, Any]]  # (seconds to wait before it, the chunk)


def estimate_tokens(text: str) -> int:
    return (len(text) + 3) // 4


def text_pieces(text: str, chunk_chars: int | None = None) -> list[str]:
    """Words with their spaces (``"word "``), or pieces of exactly ``chunk_chars``."""
    if chunk_chars:
        return [text[i : i + chunk_chars] for i in range(0, len(text), chunk_chars)]
    return _WORDS.findall(text) or ([text] if text else [])


def _round_robin(lists: Sequence[Sequence[dict[str, Any]]]) -> list[dict[str, Any]]:
    rounds = itertools.zip_longest(*lists)
    return [piece for row in rounds for piece in row if piece is not None]


def tool_call_deltas(calls: Sequence[FakeCall], options: FakeChatOptions) -> list[dict[str, Any]]:
    """The ``tool_calls`` elements of the stream, one per chunk, in sending order."""
    heads: list[list[dict[str, Any]]] = []
    fragments: list[list[dict[str, Any]]] = []
    size = max(1, options.fragment_size)
    for index, call in enumerate(calls):
        name = call.name
        cut = len(name) // 2 if options.split_names and len(name) > 1 else len(name)
        head: dict[str, Any] = {"index": index}
        if not options.omit_ids:
            head["id"] = call.call_id
        head["type"] = "function"
        head["function"] = {"name": name[:cut], "arguments": ""}
        rest = [{"index": index, "function": {"name": name[cut:]}}] if name[cut:] else []
        heads.append([head, *rest])
        text = call.arguments_text
        fragments.append(
            [
                {"index": index, "function": {"arguments": text[i : i + size]}}
                for i in range(0, len(text), size)
            ]
        )
    if options.interleave:
        return _round_robin(heads) + _round_robin(fragments)
    return [piece for head, frags in zip(heads, fragments, strict=True) for piece in head + frags]


def _chunk(
    envelope: Envelope, delta: dict[str, Any], finish_reason: str | None = None
) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "id": envelope.completion_id,
        "object": "chat.completion.chunk",
        "created": envelope.created,
        "model": envelope.model,
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
    }
    if envelope.include_usage:
        chunk["usage"] = None  # as the real API: null in every chunk but the last
    return chunk


def _usage(prompt_tokens: int, output: str) -> dict[str, int]:
    completion_tokens = estimate_tokens(output)
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }


def _output_text(reply: Text | Calls | Cut) -> str:
    if isinstance(reply, Calls):
        return "".join(call.name + call.arguments_text for call in reply.calls)
    return reply.text


def stream_chunks(
    reply: Text | Calls | Cut, envelope: Envelope, options: FakeChatOptions
) -> list[Frame]:
    """The SSE chunks of a streamed answer (``[DONE]`` is the shell's); a ``Cut`` ends after its
    text, without a ``finish_reason``."""
    frames: list[Frame] = [(0.0, _chunk(envelope, {"role": "assistant", "content": ""}))]
    if isinstance(reply, Calls):
        if options.empty_deltas:
            frames.append((0.0, _chunk(envelope, {"tool_calls": []})))
        for call_piece in tool_call_deltas(reply.calls, options):
            frames.append((0.0, _chunk(envelope, {"tool_calls": [call_piece]})))
    else:
        if options.empty_deltas and isinstance(reply, Text):
            frames.append((0.0, _chunk(envelope, {})))
        for n, piece in enumerate(text_pieces(reply.text, options.text_chunk_chars)):
            delay = options.word_delay_s if n else 0.0
            frames.append((delay, _chunk(envelope, {"content": piece})))
    if isinstance(reply, Text) and reply.unannounced:
        frames = _with_unannounced(frames, envelope)
    if isinstance(reply, Cut):
        return frames
    if options.empty_deltas:
        frames.append((0.0, _chunk(envelope, {})))
    finish_reason = "tool_calls" if isinstance(reply, Calls) else "stop"
    frames.append((0.0, _chunk(envelope, {}, finish_reason)))
    if envelope.include_usage:
        last = _chunk(envelope, {})
        last["choices"] = []
        last["usage"] = _usage(envelope.prompt_tokens, _output_text(reply))
        frames.append((0.0, last))
    return frames


def _with_unannounced(frames: list[Frame], envelope: Envelope) -> list[Frame]:
    """The chunks with a field the API reference does not list on each one and its delta, and a
    chunk of an ``object`` type it does not list after the first."""
    made_up = {"kind": "a field this fake made up"}
    for _, chunk in frames:
        chunk[UNANNOUNCED_FIELD] = made_up
        for choice in chunk["choices"]:
            choice["delta"][UNANNOUNCED_FIELD] = made_up
    novelty = {
        "id": envelope.completion_id,
        "object": UNANNOUNCED_OBJECT,
        "created": envelope.created,
        "model": envelope.model,
        "feature": {"kind": "a chunk this fake made up", "version": 2},
    }
    return [frames[0], (0.0, novelty), *frames[1:]]


def completion_object(reply: Text | Calls, envelope: Envelope) -> dict[str, Any]:
    """The ``chat.completion`` of a non-streamed answer."""
    message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
    if isinstance(reply, Calls):
        message["tool_calls"] = [
            {
                "id": call.call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_text},
            }
            for call in reply.calls
        ]
    else:
        message["content"] = reply.text
    choice = {
        "index": 0,
        "message": message,
        "logprobs": None,
        "finish_reason": "tool_calls" if isinstance(reply, Calls) else "stop",
    }
    return {
        "id": envelope.completion_id,
        "object": "chat.completion",
        "created": envelope.created,
        "model": envelope.model,
        "choices": [choice],
        "usage": _usage(envelope.prompt_tokens, _output_text(reply)),
    }


def error_body(status: int, message: str, code: str | None) -> dict[str, Any]:
    kind = "server_error" if status >= 500 else "requests" if status == 429 else None
    error = {"message": message, "type": kind or "invalid_request_error", "param": None}
    return {"error": {**error, "code": code}}


# The shell -------------------------------------------------------------------------------------


class FakeChatServer(Served):
    """The fake on a loopback port: ``async with FakeChatServer(options) as server: ...``.

    ``requests`` are the JSON bodies received on the chat route, in order, and ``responses``
    what was decided for each (a body that is not a JSON object is answered 400, unlogged).
    """

    def __init__(
        self,
        options: FakeChatOptions | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        faults: UpstreamFaults | None = None,
    ) -> None:
        self.options = options or FakeChatOptions()
        self.faults = faults or UpstreamFaults()  # read by every new request
        self.requests: list[dict[str, Any]] = []
        self.responses: list[FakeReply] = []
        self.usages: list[dict[str, int]] = []  # the usage chunk of each stream that sent one
        self.counters: dict[str, int] = {}  # the server-wide state of ``/http STATUS TIMES``
        # The client sockets (address, port) requests came on: how many connections a client
        # opened, as a provider would see it.
        self.peers: set[tuple[str, int]] = set()
        # Sees each request body and what was decided for it, logged or not.
        self.tap: Callable[[dict[str, Any], FakeReply], None] | None = None
        self._host, self._port = host, port
        self._runner: web.AppRunner | None = None
        self._logged = asyncio.Condition()
        self._handlers: set[asyncio.Task[Any]] = set()

    @property
    def port(self) -> int:
        return self._port

    @property
    def base_url(self) -> str:
        """The SDK's ``base_url``."""
        return f"http://{self._host}:{self._port}/v1"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # A client that goes cancels its handler: a stalled answer ends with its connection.
        runner = web.AppRunner(
            app, access_log=None, handle_signals=False, handler_cancellation=True
        )
        await runner.setup()
        await web.TCPSite(runner, self._host, self._port).start()
        self._runner = runner
        self._port = int(runner.addresses[0][1])

    async def stop(self) -> None:
        """Stop listening; answers still being streamed are broken off."""
        for task in self._handlers:
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def wait_for_requests(
        self,
        count: int,
        timeout: float = 5.0,  # noqa: ASYNC109 (the public test API takes a timeout)
    ) -> list[dict[str, Any]]:
        """The first ``count`` request bodies, once they have come."""
        async with asyncio.timeout(timeout), self._logged:
            await self._logged.wait_for(lambda: len(self.requests) >= count)
        return self.requests[:count]

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            return await self._answer(request)
        finally:
            self._handlers.discard(task)

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        if request.transport is not None:
            peer = request.transport.get_extra_info("peername")
            if peer is not None:
                self.peers.add((str(peer[0]), int(peer[1])))
        if isinstance(fault := self.faults.take_connection_fault(), Refuse):
            return refuse(request)
        raw = await request.read()
        if fault is not None:
            return self._fault_error(fault)
        if request.method != "POST" or request.path not in _ROUTES:
            return _error(404, f"Invalid URL ({request.method} {request.path})", None, self.options)
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError:
            body = None
        key = self.options.api_key
        if key is not None and request.headers.get("Authorization") != f"Bearer {key}":
            reply: FakeReply = HttpError(401, _NOT_AUTHORIZED, "invalid_api_key")
        elif not isinstance(body, dict):
            message = "We could not parse the JSON body of your request."
            return _error(400, message, "invalid_request_error", self.options)
        else:
            reply = decide(body, self.counters)
        if isinstance(body, dict):
            await self._log_exchange(body, reply)
        if isinstance(reply, HttpError):
            return _error(reply.status, reply.message, reply.code, self.options)
        assert isinstance(body, dict)
        envelope = _envelope(body)
        if body.get("stream") is True:
            return await self._stream(request, reply, envelope)
        if self.faults.take_whole_answer_stall():
            await _until_cancelled()
        if isinstance(reply, Text) and reply.delay_ms > 0:
            await asyncio.sleep(reply.delay_ms / 1000)
        if isinstance(reply, Cut):  # nothing of the answer: the connection just goes
            _drop(request)
            return web.Response()
        return web.json_response(completion_object(reply, envelope), dumps=_dumps)

    async def _log_exchange(self, body: dict[str, Any], reply: FakeReply) -> None:
        if self.tap is not None:
            self.tap(body, reply)
        if not self.options.log_exchanges:
            return
        self.requests.append(body)
        self.responses.append(reply)
        _log.info("fake chat request %d: %s", len(self.requests), reply)
        async with self._logged:
            self._logged.notify_all()

    async def _stream(
        self, request: web.Request, reply: Text | Calls | Cut, envelope: Envelope
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers=_headers() | {"Cache-Control": "no-cache"})
        response.content_type = "text/event-stream"
        await response.prepare(request)
        faults = self.faults
        try:
            if faults.take_stall_first() or faults.take_stall_mid(0):
                await _until_cancelled()
            if isinstance(reply, Text) and reply.delay_ms > 0:
                await asyncio.sleep(reply.delay_ms / 1000)
            for sent, (delay_s, chunk) in enumerate(stream_chunks(reply, envelope, self.options)):
                if delay_s > 0:
                    await asyncio.sleep(delay_s)
                if isinstance(chunk.get("usage"), dict):
                    self.usages.append(chunk["usage"])
                await response.write(b"data: " + orjson.dumps(chunk) + b"\n\n")
                if faults.take_stall_mid(sent + 1):
                    await _until_cancelled()
            if isinstance(reply, Cut):
                _drop(request)
                return response
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
        except ConnectionError:  # the client went away
            _log.info("fake chat client left during the stream")
        return response

    def _fault_error(self, status: int) -> web.Response:
        error = openai_error_body(status)["error"]
        response = _error(status, error["message"], error["code"], self.options)
        if status == 429:
            response.headers["Retry-After"] = str(self.faults.retry_after_s)
        return response


async def _until_cancelled() -> None:
    """A stall: wait until the handler is cancelled (the client went, or the server stops)."""
    await asyncio.get_running_loop().create_future()


def _envelope(body: dict[str, Any]) -> Envelope:
    options = body.get("stream_options")
    prompt = orjson.dumps([body.get("messages"), body.get("tools")]).decode()
    return Envelope(
        completion_id=f"chatcmpl-{uuid.uuid4().hex}",
        created=int(time.time()),
        model=str(body.get("model")),
        include_usage=isinstance(options, dict) and options.get("include_usage") is True,
        prompt_tokens=estimate_tokens(prompt),
    )


def _drop(request: web.Request) -> None:
    """Close the TCP after what was written: the body ends without its terminating chunk."""
    if request.transport is not None:
        request.transport.close()


def _dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


def _headers() -> dict[str, str]:
    return {"x-request-id": f"req_{uuid.uuid4().hex}"}


def _error(status: int, message: str, code: str | None, options: FakeChatOptions) -> web.Response:
    headers = _headers()
    if status == 429 or status >= 500:
        headers["retry-after-ms"] = str(options.retry_after_ms)
    body = error_body(status, message, code)
    return web.json_response(body, status=status, headers=headers, dumps=_dumps)
