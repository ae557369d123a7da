"""A faithful fake Gemini Live (``BidiGenerateContent``) server, for tests and benchmarks.

The protocol lives in the pure ``FakeGeminiSession`` (``session``) and each connection's
tasks in ``FakeGeminiConnection`` (``connection``); this module is the listener. It serves
TLS (the official SDK only speaks ``wss://``; ``tls`` makes the certificate), accepts the
upgrade on any path ending in
``google.ai.generativelanguage.{v1,v1beta,v1alpha}.GenerativeService.BidiGenerateContent`` (or
``…Constrained``) whatever comes before it (``//`` included; else HTTP 404), checks the key
(``x-goog-api-key``, ``?key=``, ``Authorization: Token …``, ``?access_token=``; a wrong or missing
key → HTTP 401 with a JSON body), accepts client frames up to 16 MiB with permessage-deflate, and
keeps the resumption handles of every session (``handles``) across connections.

Fault modes (``server.faults``, ``fakes.faults``): ``refuse`` resets a new upgrade request before
any HTTP answer (after the TLS handshake) and ``status`` answers it with Google's error JSON
(``fakes.fault_replies``); the stalls hold the model's turns back (``stalls``).

Run it alone with ``python -m fakes.gemini_live --port P --cert-dir DIR``: it
prints ``listening https://127.0.0.1:P`` and serves until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import re
import ssl
import sys
from collections.abc import Sequence
from pathlib import Path

from aiohttp import web

from fakes.fault_replies import gemini_error, refuse
from fakes.faults import Refuse, UpstreamFaults, add_fault_arguments, faults_from_args
from fakes.gemini_live.connection import FakeGeminiConnection
from fakes.gemini_live.memory import SessionStore, Snapshot
from fakes.gemini_live.options import FakeGeminiOptions
from fakes.gemini_live.tls import (
    client_ssl_context,
    ensure_certificate,
    server_ssl_context,
)
from fakes.shell import ServerShell, serve_until_signalled

__all__ = ["FakeGeminiConnection", "FakeGeminiOptions", "FakeGeminiServer", "main"]

MAX_CLIENT_FRAME = 16 * 2**20
_PATH = re.compile(
    r"(?:^|/)google\.ai\.generativelanguage\.v1(?:beta|alpha)?\."
    r"GenerativeService\.BidiGenerateContent(?:Constrained)?$"
)


class FakeGeminiServer(ServerShell[FakeGeminiConnection]):
    """The fake on a loopback TLS port; ``async with FakeGeminiServer(cert_dir=d) as server:``."""

    def __init__(
        self,
        options: FakeGeminiOptions | None = None,
        *,
        cert_dir: Path,
        faults: UpstreamFaults | None = None,
    ) -> None:
        super().__init__()
        self.options = options or FakeGeminiOptions()
        # Fault modes (``fakes.faults``), read by every new connection and turn.
        self.faults = faults or UpstreamFaults()
        self.store = SessionStore()
        self._certificate = ensure_certificate(Path(cert_dir))

    @property
    def base_url(self) -> str:
        """The SDK's ``http_options.base_url``."""
        return f"https://{self._host}:{self._port}"

    @property
    def ca_file(self) -> Path:
        """The PEM a client must trust (the self-signed ``cert.pem``)."""
        return self._certificate.cert_file

    @property
    def handles(self) -> dict[str, Snapshot]:
        """Resumption handles issued, each with the session snapshot it restores."""
        return self.store.handles

    def client_ssl_context(self) -> ssl.SSLContext:
        return client_ssl_context(self.ca_file)

    def _ssl_context(self) -> ssl.SSLContext:
        return server_ssl_context(self._certificate)

    def _advertised_host(self, host: str) -> str:
        return "127.0.0.1" if host in ("", "0.0.0.0") else host

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        fault = self.faults.take_connection_fault()
        if isinstance(fault, Refuse):
            return refuse(request)
        if fault is not None:
            return gemini_error(fault, self.faults.retry_after_s)
        if _PATH.search(request.path) is None:
            return _error_response(404, "NOT_FOUND", f"Method not found: {request.path}")
        if (problem := self._auth_problem(request)) is not None:
            return _error_response(401, "UNAUTHENTICATED", problem)
        ws = web.WebSocketResponse(
            max_msg_size=MAX_CLIENT_FRAME, compress=True, autoping=True, decode_text=False
        )
        if not ws.can_prepare(request).ok:
            return _error_response(
                400, "FAILED_PRECONDITION", "Request is missing a WebSocket upgrade."
            )
        await ws.prepare(request)
        connection = FakeGeminiConnection(
            self.options, self.store, request, len(self.connections) + 1, self.faults
        )
        await self._accept(connection)
        await connection.serve(ws)
        return ws

    def _auth_problem(self, request: web.Request) -> str | None:
        expected = self.options.api_key
        if expected is None:
            return None
        offered = [
            request.headers.get("x-goog-api-key"),
            request.query.get("key"),
            request.query.get("access_token"),
        ]
        authorization = request.headers.get("Authorization", "")
        scheme, _, credential = authorization.partition(" ")
        if scheme in ("Token", "Bearer"):
            offered.append(credential.strip())
        offered_keys = [key for key in offered if key]
        if not offered_keys:
            return (
                "Method doesn't allow unregistered callers (callers without established "
                "identity). Please use API Key or other form of API consumer identity."
            )
        if expected in offered_keys:
            return None
        return "API key not valid. Please pass a valid API key."


def _error_response(status: int, code: str, message: str) -> web.Response:
    error = {"code": status, "message": message, "status": code}
    return web.json_response({"error": error}, status=status)


# Command line --------------------------------------------------------------------------------


def _parse_args(
    argv: Sequence[str] | None,
) -> tuple[FakeGeminiOptions, str, int, Path, UpstreamFaults]:
    parser = argparse.ArgumentParser(
        prog="python -m fakes.gemini_live",
        description="A faithful fake Gemini Live (BidiGenerateContent) server on https://HOST:PORT.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--cert-dir", type=Path, required=True, help="cert.pem + key.pem here")
    parser.add_argument("--api-key", default=None, help="only this key is accepted")
    parser.add_argument("--pace", type=float, default=0.0, help="1.0 = real-time audio")
    parser.add_argument("--no-setup-complete", action="store_true", help="never answer setup")
    parser.add_argument("--connection-lifetime-s", type=float, default=None)
    parser.add_argument("--go-away-lead-s", type=float, default=1.0)
    parser.add_argument("--duplicate-tool-calls", action="store_true")
    parser.add_argument("--text-frames", action="store_true", help="server JSON in text frames")
    parser.add_argument("--echo", action="store_true", help="answer each audio input with it")
    parser.add_argument("--no-log", action="store_true", help="keep no frame log")
    parser.add_argument("--no-interrupt", action="store_true", help="speech never interrupts")
    parser.add_argument("--strict-tool-ids", action="store_true")
    add_fault_arguments(parser)
    args = parser.parse_args(argv)
    faults = faults_from_args(parser, args)
    options = FakeGeminiOptions(
        api_key=args.api_key,
        pace=args.pace,
        setup_complete=not args.no_setup_complete,
        connection_lifetime_s=args.connection_lifetime_s,
        go_away_lead_s=args.go_away_lead_s,
        duplicate_tool_calls=args.duplicate_tool_calls,
        binary_frames=not args.text_frames,
        echo=args.echo,
        log_frames=not args.no_log,
        interrupt_on_speech=not args.no_interrupt,
        strict_tool_ids=args.strict_tool_ids,
    )
    return options, args.host, args.port, args.cert_dir, faults


def main(argv: Sequence[str] | None = None) -> int:
    options, host, port, cert_dir, faults = _parse_args(argv)
    make_server = functools.partial(FakeGeminiServer, options, cert_dir=cert_dir, faults=faults)
    asyncio.run(serve_until_signalled(make_server, host, port, lambda server: server.base_url))
    return 0


if __name__ == "__main__":
    sys.exit(main())
