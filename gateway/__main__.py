"""``python -m gateway serve | check | token | chat | keys | teams | users | usage`` (also the
``gateway`` console script)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

__all__ = ["main"]


def _check(_: argparse.Namespace) -> int:
    from gateway.config import RegistryLocation
    from gateway.providers import provider_lines
    from gateway.registry import load_registry

    # GATEWAY_REGISTRY only: listing the tools needs no other setting (no auth secret).
    registry = load_registry(RegistryLocation.load().path())
    unavailable = registry.unavailable()
    counted = f", {len(unavailable)} unavailable" if unavailable else ""
    print(
        f"registry {registry.version} (commit {registry.git_commit}): "
        f"{len(registry)} tools{counted}"
    )
    names = [*registry.tool_ids(), *(tool.tool_id for tool in unavailable)]
    width = max([24, *map(len, names)])
    for spec in registry.tools():
        flags = []
        if spec.http is not None:
            flags.append(f"http {spec.http.method} {spec.http.path}")
        if spec.needs_confirmation:
            flags.append("confirmation")
        if spec.permissions:
            flags.append("roles=" + ",".join(sorted(spec.permissions)))
        modes = "+".join(sorted(spec.modes))
        extra = f" [{'; '.join(flags)}]" if flags else ""
        print(f"  {spec.tool_id:<{width}} {spec.category:<9} {spec.sensitivity:<8} {modes}{extra}")
    for tool in unavailable:  # never offered to a model: an HTTP tool without its settings
        modes = "+".join(sorted(tool.modes))
        print(
            f"  {tool.tool_id:<{width}} {tool.category:<9} {tool.sensitivity:<8} {modes} "
            f"unavailable: {tool.reason}"
        )
    print("\n".join(provider_lines()))  # what this build offers, whatever is configured
    models = os.environ.get("GATEWAY_MODELS")
    if models:  # the alias file is checked too, when there is one (it stops a start if wrong)
        from gateway.providers import PROVIDERS
        from gateway.routing import catalog_lines, load_catalog

        print("\n".join(catalog_lines(load_catalog(Path(models), PROVIDERS.names()))))
    return 0


def _token(args: argparse.Namespace) -> int:
    from gateway.config import Settings
    from gateway.security import TokenAuthority

    settings = Settings.load()
    if settings.auth_secret is None:
        print("GATEWAY_AUTH_SECRET is not set: there is nothing to sign with", file=sys.stderr)
        return 2
    authority = TokenAuthority(
        settings.auth_secret.get_secret_value(), max_lifetime_s=settings.token_max_lifetime_s
    )
    try:
        token = authority.mint_user(
            args.sub,
            now=time.time(),
            ttl_s=args.ttl,
            roles=tuple(r for r in args.roles.split(",") if r),
            tenant=args.tenant,
        )
    except ValueError as exc:
        print(f"gateway: {exc}", file=sys.stderr)
        return 2
    print(token)
    return 0


def _chat(args: argparse.Namespace) -> int:
    import asyncio
    import os

    import jwt

    from gateway.chat_client import run_chat

    token = args.token or os.environ.get("GATEWAY_TOKEN")
    secret = os.environ.get("GATEWAY_AUTH_SECRET")
    if token is None and secret:  # mint one, as ``token`` would (a client needs no settings)
        claims = {"sub": args.sub, "exp": int(time.time()) + 3600, "roles": args.roles}
        token = jwt.encode(claims, secret, "HS256")
    url = args.url or "ws://127.0.0.1:8080/v1/session"
    return asyncio.run(run_chat(url, token, read_line=sys.stdin.readline, mode=args.mode))


def _usage(args: argparse.Namespace) -> int:
    """The budget counters' usage; or, with log files (or ``--audit``: stdin), per user the
    sums of the ``session_usage`` audit records."""
    import json

    if not args.logs and not args.audit:
        return _admin(args)
    from contextlib import ExitStack
    from typing import IO

    from gateway.usage.audit_totals import UserTotals, totals_by_user

    totals: dict[str, UserTotals] = {}
    with ExitStack() as stack:
        sources: list[IO[bytes]] = [stack.enter_context(open(path, "rb")) for path in args.logs]
        for source in sources or [sys.stdin.buffer]:
            totals_by_user(source, args.user, into=totals)
    print(json.dumps({key: found.as_json() for key, found in sorted(totals.items())}, indent=2))
    return 0


def _admin(args: argparse.Namespace) -> int:
    from gateway.admin.cli import run_admin_command

    return run_admin_command(args)


def _serve(args: argparse.Namespace) -> int:
    import os

    from gateway.app import run

    if args.workers is not None:
        os.environ["GATEWAY_WORKERS"] = args.workers  # the workers inherit it, then override
    return run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gateway", description="Realtime voice/text gateway")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the gateway (settings from GATEWAY_* variables)")
    serve.add_argument(
        "--workers",
        default=None,
        help='processes on this machine: a number or "auto" (one per core); more than one '
        "needs GATEWAY_REDIS_URL (default: $GATEWAY_WORKERS, else 1)",
    )
    sub.add_parser(
        "check",
        help="load the tool registry and list its tools, then the providers (reads "
        "GATEWAY_REGISTRY, no other setting)",
    )
    usage = sub.add_parser(
        "usage",
        help="usage per day from the budget counters (by key, user, team or model); with log "
        "files or --audit, per user from the audit trail's session_usage lines",
    )
    usage.add_argument("logs", nargs="*", help="JSON log files (the audit trail)")
    usage.add_argument("--audit", action="store_true", help="read the audit trail on stdin")
    usage.add_argument("--user", default=None, help="the audit trail: only this user id")
    usage.add_argument("--group-by", default="key", choices=["key", "user", "team", "model"])
    usage.add_argument("--from", dest="since", default=None, help="YYYY-MM-DD (UTC)")
    usage.add_argument("--to", dest="until", default=None, help="YYYY-MM-DD (UTC), inclusive")
    usage.add_argument("--csv", action="store_true", help="CSV instead of JSON")
    from gateway.admin.cli import add_commands

    add_commands(sub)
    token = sub.add_parser("token", help="mint a JWT signed with GATEWAY_AUTH_SECRET")
    token.add_argument("--sub", required=True, help="the user id")
    token.add_argument("--roles", default="", help="comma-separated roles")
    token.add_argument("--tenant", default=None)
    token.add_argument("--ttl", type=int, default=3600, help="seconds until it expires")
    chat = sub.add_parser("chat", help="a terminal chat with a running gateway (text mode)")
    chat.add_argument("--url", default=None, help="ws://127.0.0.1:8080/v1/session by default")
    chat.add_argument(
        "--token",
        default=None,
        help="a JWT (default: $GATEWAY_TOKEN, or one "
        "minted with GATEWAY_AUTH_SECRET when it is set)",
    )
    chat.add_argument("--sub", default="chat-user", help="the user id of a minted token")
    chat.add_argument(
        "--roles",
        type=lambda v: [r for r in v.split(",") if r],
        default=[],
        help="comma-separated roles of a minted token",
    )
    chat.add_argument("--mode", choices=["text", "voice"], default="text")
    args = parser.parse_args(argv)
    handlers = {
        "serve": _serve,
        "check": _check,
        "token": _token,
        "chat": _chat,
        "usage": _usage,
        "keys": _admin,
        "teams": _admin,
        "users": _admin,
    }
    try:
        return handlers[args.command](args)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a clear one-line error instead of a traceback for known faults
        from gateway.errors import GatewayError

        if isinstance(exc, GatewayError):
            _report(exc)
            return 2
        raise


def _report(error: Exception) -> None:
    """One line on stderr: a JSON object when logs are JSON (the default), so a log pipeline
    reads it like every other line. Messages of the gateway's errors carry no secret values."""
    import os

    if os.environ.get("GATEWAY_LOG_FORMAT", "json").strip().lower() == "console":
        print(f"gateway: {error}", file=sys.stderr)
        return
    import json
    from datetime import UTC, datetime

    line = {
        "event": "gateway_failed",
        "level": "error",
        "logger": "gateway",
        "error": type(error).__name__,
        "message": str(error),
        "timestamp": datetime.now(UTC).isoformat().replace("+00:00", "Z"),
    }
    print(json.dumps(line), file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
