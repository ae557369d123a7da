"""``HttpToolHandler``: the async shell that runs an HTTP tool's call.

The runner calls ``execute(args, ctx)`` like any handler, under the tool's deadline
(``timeoutMs``, which the build requires of HTTP tools): it cancels the call there and answers
``TIMEOUT``. The request carries the same deadline as ``aiohttp.ClientTimeout(total=...)``, so it
never outlives the call; a timeout raised by aiohttp goes up to the runner as a ``TimeoutError``
and is that same ``TIMEOUT``.

The credential is ``Authorization: Bearer <token>`` and nowhere else: the user's own token
(``ctx.auth_token``; none → ``AUTH`` without calling the API) or the service token read at start.
It is blanked out of the API's answer before anything reads it, and no log line names a header,
a URL or an exception's text (the path template, the method, the status and the exception's type
only).

Redirects are never followed (``allow_redirects=False``). The body is read up to
``maxResponseBytes`` + 1 bytes and refused past the limit, before it is parsed.

Repeats: a GET answered 429 or 503 with ``Retry-After`` is sent once more when the wait fits
before the deadline. aiohttp itself resends an idempotent request (GET, PUT, DELETE) once when a
kept-alive connection turns out to be closed as it is used; never a POST or a PATCH.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import aiohttp
from opentelemetry.trace import SpanKind, Status, StatusCode
from yarl import URL

from gateway.http_tools.request_plan import PreparedRequest, prepare_request
from gateway.http_tools.response_mapping import (
    ApiAnswer,
    connection_failed,
    interpret_answer,
    retry_wait_s,
    too_large,
)
from gateway.http_tools.section import (
    MIN_SERVICE_TOKEN_CHARS,
    HttpEndpoint,
    HttpToolSection,
    is_usable_token,
)
from gateway.http_tools.shared_client import SHARED_HTTP_CLIENT, SharedHttpClient
from tools._core import ToolContext, ToolError, ToolErrorType, ToolResponse

__all__ = ["HttpToolHandler"]

_REDACTED = b"[redacted]"


async def _read_capped(stream: aiohttp.StreamReader, limit: int) -> bytes | None:
    """The whole body, or None as soon as it is longer than ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    while chunk := await stream.read(limit + 1 - size):
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _elsewhere(location: str | None, request_url: URL) -> bool:
    """Whether a redirect's Location names another origin than the request's."""
    if not location:
        return False
    try:
        target = request_url.join(URL(location))
    except ValueError:
        return True
    return (target.scheme, target.host, target.port) != (
        request_url.scheme,
        request_url.host,
        request_url.port,
    )


class HttpToolHandler:
    """One HTTP tool's handler: ``execute`` is what the registry calls."""

    def __init__(
        self,
        tool_id: str,
        section: HttpToolSection,
        endpoint: HttpEndpoint,
        timeout_ms: int,
        *,
        client: SharedHttpClient = SHARED_HTTP_CLIENT,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.tool_id = tool_id
        self.section = section
        self._endpoint = endpoint
        self._timeout_s = timeout_ms / 1000.0
        self._client = client
        self._wall_clock = wall_clock  # for Retry-After dates

    def __repr__(self) -> str:
        return f"HttpToolHandler({self.tool_id}: {self.section.method} {self.section.path})"

    async def execute(self, args: dict[str, Any], ctx: ToolContext) -> ToolResponse:
        token = self._endpoint.service_token or ctx.auth_token
        if not token:
            return ToolResponse.failure(
                ToolErrorType.AUTH,
                "this tool calls the API with the user's own credentials, and this session has "
                "none (the gateway runs without user authentication)",
            )
        if not is_usable_token(token):
            return ToolResponse.failure(
                ToolErrorType.AUTH, "the user's credentials cannot be sent in an HTTP header"
            )
        try:
            request = prepare_request(self.section, self._endpoint.base_url, args)
        except ToolError as error:
            return ToolResponse.failure(error.type, error.message)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout_s
        answer = await self._send(request, token, deadline, ctx)
        if isinstance(answer, ApiAnswer):
            wait = retry_wait_s(answer, request.method, self._wall_clock())
            if wait is not None and loop.time() + wait < deadline:
                await asyncio.sleep(wait)
                answer = await self._send(request, token, deadline, ctx)
        if isinstance(answer, ToolResponse):
            return answer
        response = interpret_answer(
            answer, method=request.method, service_auth=self.section.auth == "service"
        )
        if not response.ok:
            self._log(ctx, "http_tool_refused", status=answer.status)
        return response

    async def _send(
        self, request: PreparedRequest, token: str, deadline: float, ctx: ToolContext
    ) -> ApiAnswer | ToolResponse:
        """One request: the complete answer, or a failure envelope (unreachable, broken, too
        large). A timeout is raised, for the runner."""
        session = await self._client.session()
        remaining = deadline - asyncio.get_running_loop().time()
        if remaining <= 0:
            raise TimeoutError
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        if request.body is not None:
            headers["Content-Type"] = "application/json"
        if ctx.trace is None:
            return await self._exchange(session, request, headers, token, remaining, ctx)
        # The request's own span; its traceparent carries the trace into the API. The path's
        # template, never the path: arguments fill it.
        url = request.url
        attributes = {
            "http.request.method": request.method,
            "server.address": url.host or "",
            "server.port": url.port or 0,
            "url.template": self.section.path,
            "gateway.tool.id": self.tool_id,
        }
        with ctx.trace.child(
            f"{request.method} {self.section.path}", kind=SpanKind.CLIENT, attributes=attributes
        ) as span:
            headers.update(ctx.trace.headers(span))
            answer = await self._exchange(session, request, headers, token, remaining, ctx)
            if isinstance(answer, ApiAnswer):
                span.set_attribute("http.response.status_code", answer.status)
                if answer.status >= 400:
                    span.set_status(Status(StatusCode.ERROR, str(answer.status)))
            elif answer.error is not None:  # unreachable, broken, too large: no status to show
                span.set_attribute("error.type", answer.error.type.value)
                span.set_status(Status(StatusCode.ERROR, answer.error.type.value))
            return answer

    async def _exchange(
        self,
        session: aiohttp.ClientSession,
        request: PreparedRequest,
        headers: dict[str, str],
        token: str,
        remaining: float,
        ctx: ToolContext,
    ) -> ApiAnswer | ToolResponse:
        limit = self.section.max_response_bytes
        try:
            async with session.request(
                request.method,
                request.url,
                data=request.body,
                headers=headers,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=remaining),
            ) as response:
                declared = response.content_length
                too_long = declared is not None and declared > limit
                body = None if too_long else await _read_capped(response.content, limit)
                if body is None:
                    self._log(ctx, "http_tool_answer_too_large", status=response.status)
                    return too_large(limit, request.method)
                return ApiAnswer(
                    status=response.status,
                    content_type=response.headers.get("Content-Type", ""),
                    body=self._blank(body, token),
                    retry_after=response.headers.get("Retry-After"),
                    redirect_elsewhere=300 <= response.status < 400
                    and _elsewhere(response.headers.get("Location"), request.url),
                )
        except TimeoutError:
            raise  # aiohttp's ClientTimeout: the runner's TIMEOUT, as if it had cancelled us
        except aiohttp.ClientConnectorError as error:  # before anything was sent
            self._log(ctx, "http_tool_unreachable", exception=type(error).__name__)
            return connection_failed(sent=False, method=request.method)
        except aiohttp.ClientError as error:  # after: reset, disconnected, a broken answer
            self._log(ctx, "http_tool_connection_broken", exception=type(error).__name__)
            return connection_failed(sent=True, method=request.method)

    def _blank(self, body: bytes, token: str) -> bytes:
        """The answer with the credential blanked out, should the API echo it. Every token
        that reaches here is long enough: a service token shorter than the minimum makes the
        tool unavailable (``resolve_endpoint``), and a user's token is a signed JWT. A shorter
        string is never blanked: it would blank out ordinary words of the answer."""
        if len(token) < MIN_SERVICE_TOKEN_CHARS:
            return body
        return body.replace(token.encode(), _REDACTED)

    def _log(self, ctx: ToolContext, event: str, **fields: object) -> None:
        ctx.logger.info(event, method=self.section.method, path=self.section.path, **fields)
