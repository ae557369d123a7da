"""``python -m gateway serve | check | token`` (also the ``gateway`` console script)."""

from __future__ import annotations

import argparse
import sys
import time

__all__ = ["main"]


def _check(_: argparse.Namespace) -> int:
    from gateway.config import Settings
    from gateway.registry import load_registry

    settings = Settings.load()
    registry = load_registry(settings.registry_path())
    print(f"registry {registry.version} (commit {registry.git_commit}): {len(registry)} tools")
    for spec in registry.tools():
        flags = []
        if spec.needs_confirmation:
            flags.append("confirmation")
        if spec.permissions:
            flags.append("roles=" + ",".join(sorted(spec.permissions)))
        modes = "+".join(sorted(spec.modes))
        extra = f" [{'; '.join(flags)}]" if flags else ""
        print(f"  {spec.tool_id:<24} {spec.category:<9} {spec.sensitivity:<8} {modes}{extra}")
    return 0


def _token(args: argparse.Namespace) -> int:
    import jwt

    from gateway.config import Settings

    settings = Settings.load()
    if settings.auth_secret is None:
        print("GATEWAY_AUTH_SECRET is not set: there is nothing to sign with", file=sys.stderr)
        return 2
    claims: dict[str, object] = {"sub": args.sub, "exp": int(time.time()) + args.ttl}
    if args.roles:
        claims["roles"] = [r for r in args.roles.split(",") if r]
    if args.tenant:
        claims["tenant"] = args.tenant
    print(jwt.encode(claims, settings.auth_secret.get_secret_value(), algorithm="HS256"))
    return 0


def _serve(_: argparse.Namespace) -> int:
    from gateway.app import run

    return run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="gateway", description="Realtime voice/text gateway")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("serve", help="run the gateway (settings from GATEWAY_* variables)")
    sub.add_parser("check", help="load the tool registry and list its tools")
    token = sub.add_parser("token", help="mint a JWT signed with GATEWAY_AUTH_SECRET")
    token.add_argument("--sub", required=True, help="the user id")
    token.add_argument("--roles", default="", help="comma-separated roles")
    token.add_argument("--tenant", default=None)
    token.add_argument("--ttl", type=int, default=3600, help="seconds until it expires")
    args = parser.parse_args(argv)
    handlers = {"serve": _serve, "check": _check, "token": _token}
    try:
        return handlers[args.command](args)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a clear one-line error instead of a traceback for known faults
        from gateway.errors import GatewayError

        if isinstance(exc, GatewayError):
            print(f"gateway: {exc}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    sys.exit(main())
