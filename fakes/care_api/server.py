"""The example care API over aiohttp: what the example HTTP tools call (``tools/care_api_*``).

Routes (JSON in and out; the rules are ``fakes.care_api.book``'s)::

    GET   /v1/appointments                    ?from_date=YYYY-MM-DD&to_date=...&status=...
    GET   /v1/appointments/{appointment_id}
    PATCH /v1/appointments/{appointment_id}   {"start": ISO 8601, "reason": "..."}

Every request needs ``Authorization: Bearer <token>``: a JWT signed (HS256) with the
gateway's secret, whose ``sub`` is the patient, or the service token (the patient
``service``); anything else is 401. Unknown query parameters are 422, as a strict API does.

For tests, ``requests`` logs each request as it arrived (raw path with its %-escapes, query
string, headers, body); ``inject(Fault(...))`` forces the next answers (a status with
``Retry-After``, a redirect, a delay, a huge body with or without ``Content-Length``, a
connection closed without an answer); and
``dropped`` is set when a client goes away before its answer was sent.

Run it alone: ``python -m fakes.care_api --port 8090 --jwt-secret SECRET``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from typing import Any
from urllib.parse import unquote

import jwt
import orjson
from aiohttp import web

from fakes.care_api.book import Answer, AppointmentBook
from fakes.lifecycle import Served, run_until_signalled

__all__ = ["FakeCareApi", "Fault", "LoggedRequest", "main"]

_COLLECTION = "/v1/appointments"
_SEARCH_PARAMETERS = frozenset({"from_date", "to_date", "status"})
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class Fault:
    """A forced answer to the next ``times`` requests (of ``method``, when given)."""

    status: int = 500
    times: int = 1
    method: str | None = None
    delay_s: float = 0.0  # before answering
    retry_after: str | None = None
    location: str | None = None  # a redirect's target
    body_bytes: int = 0  # a JSON-looking body this long
    chunked: bool = False  # ... sent without Content-Length
    body: dict[str, Any] | None = None  # else {"message": "forced <status>"}
    hang_up: bool = False  # close the connection without an answer


@dataclass(frozen=True)
class LoggedRequest:
    method: str
    raw_path: str  # as it arrived: %-escapes kept
    query_string: str
    headers: dict[str, str]
    body: bytes
    patient: str | None = None  # whose token it carried, once checked


def _json(status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        status=status, body=orjson.dumps(body), content_type="application/json", headers=headers
    )


def _answer(answer: Answer) -> web.Response:
    return _json(*answer)


@dataclass
class _Faults:
    queue: list[Fault] = field(default_factory=list)

    def take(self, method: str) -> Fault | None:
        for index, fault in enumerate(self.queue):
            if fault.method is None or fault.method == method:
                if fault.times <= 1:
                    del self.queue[index]
                else:
                    self.queue[index] = replace(fault, times=fault.times - 1)
                return fault
        return None


class FakeCareApi(Served):
    """``async with FakeCareApi(jwt_secret=...) as api:`` on a loopback port."""

    def __init__(
        self,
        *,
        jwt_secret: str | None = None,
        service_token: str | None = None,
        today: date | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        if not jwt_secret and not service_token:
            raise ValueError("the care API needs a JWT secret or a service token to check")
        self.book = AppointmentBook(today or datetime.now(UTC).date())
        self.requests: list[LoggedRequest] = []
        self.dropped = asyncio.Event()
        self._jwt_secret = jwt_secret
        self._service_token = service_token
        self._faults = _Faults()
        self._host, self._port = host, port
        self._runner: web.AppRunner | None = None
        self._logged = asyncio.Condition()

    @property
    def base_url(self) -> str:
        return f"http://{self._host}:{self._port}"

    def inject(self, fault: Fault) -> None:
        self._faults.queue.append(fault)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # handler_cancellation: a client that goes away cancels its handler (``dropped``).
        runner = web.AppRunner(
            app, access_log=None, handle_signals=False, handler_cancellation=True
        )
        await runner.setup()
        await web.TCPSite(runner, self._host, self._port).start()
        self._runner = runner
        self._port = int(runner.addresses[0][1])

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def wait_for_requests(
        self,
        count: int,
        timeout: float = 5.0,  # noqa: ASYNC109 (the public test API takes a timeout)
    ) -> list[LoggedRequest]:
        async with asyncio.timeout(timeout), self._logged:
            await self._logged.wait_for(lambda: len(self.requests) >= count)
        return self.requests[:count]

    # -- serving ---------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        logged = LoggedRequest(
            request.method,
            request.raw_path.split("?", 1)[0],
            request.query_string,
            dict(request.headers),
            body,
        )
        index = len(self.requests)
        self.requests.append(logged)
        async with self._logged:
            self._logged.notify_all()
        try:
            fault = self._faults.take(request.method)
            if fault is not None:
                return await self._forced(request, fault)
            patient = self._patient(request.headers.get("Authorization", ""))
            if patient is None:
                return _json(401, {"error": "unauthorized", "message": "invalid bearer token"})
            self.requests[index] = replace(logged, patient=patient)
            return self._route(request, patient, body)
        except asyncio.CancelledError:
            self.dropped.set()
            raise

    def _patient(self, header: str) -> str | None:
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token:
            return None
        if self._service_token is not None and token == self._service_token:
            return "service"
        if self._jwt_secret is None:
            return None
        try:
            claims = jwt.decode(token, self._jwt_secret, algorithms=["HS256"])
        except jwt.PyJWTError:
            return None
        sub = claims.get("sub")
        return sub if isinstance(sub, str) and sub else None

    def _route(self, request: web.Request, patient: str, body: bytes) -> web.Response:
        path = request.raw_path.split("?", 1)[0]
        if path == _COLLECTION:
            if request.method != "GET":
                return _json(405, {"error": "method_not_allowed", "message": "use GET"})
            unknown = sorted(set(request.query) - _SEARCH_PARAMETERS)
            if unknown:
                message = f"unknown parameter {unknown[0]}"
                return _json(422, {"error": "validation_failed", "message": message})
            return _answer(
                self.book.search(
                    patient,
                    request.query.get("from_date"),
                    request.query.get("to_date"),
                    request.query.get("status"),
                )
            )
        prefix = _COLLECTION + "/"
        segment = path[len(prefix) :] if path.startswith(prefix) else ""
        if not segment or "/" in segment:
            return _json(404, {"error": "not_found", "message": "no such route"})
        appointment_id = unquote(segment)
        if request.method == "GET":
            return _answer(self.book.get(patient, appointment_id))
        if request.method != "PATCH":
            return _json(405, {"error": "method_not_allowed", "message": "use GET or PATCH"})
        if request.content_type != "application/json":
            return _json(415, {"error": "unsupported", "message": "send application/json"})
        try:
            parsed = orjson.loads(body)
        except orjson.JSONDecodeError:
            return _json(400, {"error": "bad_request", "message": "the body is not valid JSON"})
        return _answer(self.book.reschedule(patient, appointment_id, parsed))

    async def _forced(self, request: web.Request, fault: Fault) -> web.StreamResponse:
        if fault.delay_s > 0:
            await asyncio.sleep(fault.delay_s)
        if fault.hang_up and request.transport is not None:
            request.transport.abort()
            await asyncio.Event().wait()  # cancelled as the connection goes (``dropped``)
        headers = {"Retry-After": fault.retry_after} if fault.retry_after else {}
        if fault.location is not None:
            headers["Location"] = fault.location
            return web.Response(status=fault.status, headers=headers)
        if fault.body_bytes and fault.chunked:
            response = web.StreamResponse(status=fault.status, headers=headers)
            response.content_type = "application/json"
            response.enable_chunked_encoding()
            await response.prepare(request)
            sent = 0
            try:
                while sent < fault.body_bytes:
                    piece = min(_CHUNK, fault.body_bytes - sent)
                    await response.write(b" " * piece)
                    sent += piece
                await response.write_eof()
            except (ConnectionResetError, RuntimeError):
                self.dropped.set()  # the client stopped reading and went away
            return response
        if fault.body_bytes:
            return web.Response(
                status=fault.status,
                body=b" " * fault.body_bytes,
                content_type="application/json",
                headers=headers,
            )
        body = fault.body if fault.body is not None else {"message": f"forced {fault.status}"}
        return _json(fault.status, body, headers)


# -- command line --------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m fakes.care_api",
        description="The example care API of the example HTTP tools, on http://HOST:PORT.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8090)
    parser.add_argument(
        "--jwt-secret",
        help="accept user JWTs signed with it (HS256): the gateway's GATEWAY_AUTH_SECRET",
    )
    parser.add_argument("--service-token", help="also accept this token, as the patient 'service'")
    args = parser.parse_args(argv)
    if not args.jwt_secret and not args.service_token:
        parser.error("give --jwt-secret (the gateway's GATEWAY_AUTH_SECRET) or --service-token")
    api = FakeCareApi(
        jwt_secret=args.jwt_secret,
        service_token=args.service_token,
        host=args.host,
        port=args.port,
    )
    asyncio.run(run_until_signalled(api, lambda: api.base_url))
    return 0


if __name__ == "__main__":
    sys.exit(main())
