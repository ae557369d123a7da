"""``python -m gateway keys|teams|users|usage``: the admin API's actions from a shell, on the
same store the gateway uses (``GATEWAY_REDIS_URL``, else the SQLite file under
``GATEWAY_DATA_DIR``), through the same service (``gateway.admin.service``): the same checks,
the same audit lines (actor ``cli:<login>``).

    gateway keys create --owner alice [--team support] [--roles a,b] [--models m1,m2]
                        [--tools t1,t2] [--expires-at 2027-01-31T00:00:00Z] [--name label]
                        [--budget spend_per_day=1.5 --budget concurrent_sessions=2 …]
    gateway keys list [--owner alice] [--team support]
    gateway keys show k_…  |  update k_… [options of create but --owner]  |  revoke k_…
    gateway teams put support [--budget …]  |  list
    gateway users put alice [--budget …]  |  show alice
    gateway usage [--group-by key|user|team|model] [--from 2026-11-01] [--to 2026-11-30] [--csv]

``--budget name=value`` sets one limit (``none`` removes it on ``update``). Output is JSON, but
``usage --csv``; a new key's secret is printed once, on its own line first.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from gateway.admin.service import KeyAdmin
from gateway.admin.usage import UsageQuery, usage_csv, usage_rows
from gateway.clock import SystemClock
from gateway.errors import ConfigError
from gateway.governance import Governance, SqliteGovernance
from gateway.keys.records import KeyInputError

__all__ = ["add_commands", "run_admin_command"]


class StoreLocation(BaseSettings):
    """The settings the admin commands read: where the keys are (no auth secret needed)."""

    model_config = SettingsConfigDict(env_prefix="GATEWAY_", extra="ignore", case_sensitive=False)

    data_dir: Path = Path.home() / ".local" / "share" / "realtime-gateway"
    redis_url: SecretStr | None = None
    redis_prefix: str = "gw"
    store_timeout_s: float = 1.0
    registry: Path = Path("build/tool_registry.json")


def add_commands(sub: Any) -> None:
    """The ``keys``, ``teams`` and ``users`` subcommands (``usage`` is ``__main__``'s)."""
    keys = sub.add_parser("keys", help="create, list, show, update and revoke gateway keys")
    key_sub = keys.add_subparsers(dest="action", required=True)
    create = key_sub.add_parser("create", help="a new key; its secret is printed once")
    create.add_argument("--owner", required=True, help="the user id the key acts for")
    _key_options(create)
    listing = key_sub.add_parser("list", help="every key (never a secret)")
    listing.add_argument("--owner", default=None)
    listing.add_argument("--team", default=None)
    for name in ("show", "revoke"):
        key_sub.add_parser(name).add_argument("key_id")
    update = key_sub.add_parser("update", help="change a key (budgets merge field by field)")
    update.add_argument("key_id")
    _key_options(update)
    for noun in ("teams", "users"):
        parser = sub.add_parser(noun, help=f"the budgets of {noun}")
        actions = parser.add_subparsers(dest="action", required=True)
        put = actions.add_parser("put", help="set the budgets (all of them: absent ones go)")
        put.add_argument("name")
        put.add_argument("--budget", action="append", default=[], metavar="NAME=VALUE")
        if noun == "teams":
            actions.add_parser("list")
        else:
            actions.add_parser("show").add_argument("name")


def _key_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--team", default=None)
    parser.add_argument("--roles", default=None, help="comma-separated")
    parser.add_argument("--models", default=None, help="comma-separated; default any")
    parser.add_argument("--tools", default=None, help="comma-separated; default its roles'")
    parser.add_argument("--expires-at", default=None, help="ISO 8601 with a zone")
    parser.add_argument("--name", default=None, help="a label")
    parser.add_argument("--budget", action="append", default=[], metavar="NAME=VALUE")


def _budgets(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name:
            raise KeyInputError(f"--budget {pair!r}: expected NAME=VALUE")
        if raw.lower() == "none":
            out[name] = None
            continue
        try:
            out[name] = int(raw) if raw.isdigit() else float(raw)
        except ValueError:
            raise KeyInputError(f"budgets.{name}: expected a number, got {raw!r}") from None
    return out


def _key_body(args: argparse.Namespace) -> dict[str, Any]:
    body: dict[str, Any] = {}
    if getattr(args, "owner", None) is not None:
        body["owner"] = args.owner
    for name in ("team", "name"):
        if getattr(args, name, None) is not None:
            body[name] = getattr(args, name)
    for name in ("roles", "models", "tools"):
        value = getattr(args, name, None)
        if value is not None:
            body[name] = [part for part in value.split(",") if part]
    if args.expires_at is not None:
        body["expires_at"] = args.expires_at
    if args.budget:
        body["budgets"] = _budgets(args.budget)
    return body


def open_governance(location: StoreLocation) -> Governance:
    if location.redis_url is None:
        return SqliteGovernance.in_folder(location.data_dir)
    from gateway.governance.redis import RedisGovernance
    from gateway.store.redis import RedisStore

    store = RedisStore.from_url(
        location.redis_url.get_secret_value(),
        prefix=location.redis_prefix,
        timeout_s=location.store_timeout_s,
        clock=SystemClock(),
    )
    return RedisGovernance(store, owns_store=True)


def _tool_ids(location: StoreLocation) -> list[str]:
    from gateway.config import resolve_registry
    from gateway.registry import load_registry

    try:
        return list(load_registry(resolve_registry(location.registry)).tool_ids())
    except Exception:  # no registry built: keys naming tools are refused, others work
        return []


def run_admin_command(args: argparse.Namespace) -> int:
    from gateway.observability import configure_logging

    # The audit lines (admin_action) go to stderr as the gateway's do; stdout is the answer.
    fmt = os.environ.get("GATEWAY_LOG_FORMAT", "json").strip().lower()
    configure_logging("console" if fmt == "console" else "json", "warning")
    try:
        location = StoreLocation()
    except ValidationError as exc:
        raise ConfigError(f"invalid settings: {exc.error_count()} problem(s)") from None
    try:
        return asyncio.run(_run(args, location))
    except KeyInputError as bad:
        print(f"gateway: {bad}", file=sys.stderr)
        return 2


async def _run(args: argparse.Namespace, location: StoreLocation) -> int:
    store = open_governance(location)
    clock = SystemClock()
    admin = KeyAdmin(store, clock, _tool_ids(location))
    actor = f"cli:{_login()}"
    now = clock.now().timestamp()
    try:
        if args.command == "usage":
            query = UsageQuery(
                {
                    k: v
                    for k, v in (
                        ("group_by", args.group_by),
                        ("from", args.since),
                        ("to", args.until),
                    )
                    if v is not None
                },
                clock.now().date(),
            )
            rows = await usage_rows(store, query)
            print(usage_csv(rows) if args.csv else json.dumps(rows, indent=2), end="\n")
            return 0
        if args.command == "keys":
            if args.action == "create":
                key, secret = await admin.create_key(actor, _key_body(args))
                print(secret)
                _print(key.as_json(now))
            elif args.action == "list":
                keys = await admin.keys(owner=args.owner, team=args.team)
                _print([key.as_json(now) for key in keys])
            elif args.action == "show":
                _print((await admin.key(args.key_id)).as_json(now))
            elif args.action == "update":
                _print((await admin.update_key(actor, args.key_id, _key_body(args))).as_json(now))
            else:
                _print((await admin.revoke_key(actor, args.key_id)).as_json(now))
            return 0
        body = {"budgets": _budgets(getattr(args, "budget", []))}
        if args.command == "teams":
            if args.action == "put":
                _print((await admin.put_team(actor, args.name, body)).as_json())
            else:
                _print([team.as_json() for team in await store.teams()])
        elif args.action == "put":
            _print((await admin.put_user(actor, args.name, body)).as_json())
        else:
            _print((await admin.user(args.name)).as_json())
        return 0
    finally:
        await store.close()


def _print(value: Any) -> None:
    print(json.dumps(value, indent=2))


def _login() -> str:
    try:
        return getpass.getuser()
    except Exception:
        return "unknown"
