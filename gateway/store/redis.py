"""The shared store on Redis (``GATEWAY_REDIS_URL``: ``redis://`` or ``rediss://``, a password in
the URL), through ``redis.asyncio``; hiredis parses replies where it is installed.

Keys, under ``GATEWAY_REDIS_PREFIX`` (``gw``); ``docs/cluster.md`` says who writes each and for
how long it lives:

    {p}:node:{node}          heartbeat of a node (TTL: the lease)
    {p}:nodes                hash node → unix time of its last heartbeat (when did it die?)
    {p}:s:{session}          hash: user, tenant, token (hash), owner, epoch, state, snap,
                             saved_at (TTL: max duration + resume window; parked: the window;
                             ended: a tombstone)
    {p}:l:{session}          the tool-call ledger: hash {call}:state|meta|env (the session's TTL)
    {p}:c:{session}:{conf}   an open confirmation (TTL: until it expires)
    {p}:u:{user}             hash session → node: the user's open sessions
    {p}:r:{address}          sorted set: admissions of the last minute
    {p}:o:{key}              a single-use key (TTL)
    {p}:bus:{node}           the node's channel (pub/sub)

Every check-and-write is one Lua script (``redis_scripts``). A command that fails to reach Redis
within ``timeout_s`` raises ``StoreUnavailable``; the client reconnects by itself on the next
command. At most ``max_connections`` are open (``redis_pool``); each heartbeat closes those idle
for ``idle_s``. The URL (and its password) is never logged or put in an error.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import orjson
import redis.asyncio as redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.clock import Clock
from gateway.store import redis_scripts as lua
from gateway.store.base import (
    TOMBSTONE_S,
    Claim,
    ClaimOutcome,
    Fenced,
    LedgerEntry,
    LedgerState,
    RecordMissing,
    SessionRecord,
    SessionSnapshot,
    StoreUnavailable,
)
from gateway.store.redis_pool import IDLE_S, MAX_CONNECTIONS, IdleClosingPool
from gateway.store.serial import snapshot_from_json, snapshot_to_json

__all__ = ["RedisStore"]

# How long a node that stopped beating stays in the nodes hash (its last heartbeat tells a
# resume how long ago it died); ids are per process, so the hash is pruned.
NODES_KEPT_S = 86400

T = TypeVar("T")
_UNREACHABLE = (RedisConnectionError, RedisTimeoutError, OSError, asyncio.TimeoutError)


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisStore:
    shared = True

    def __init__(
        self,
        client: redis.Redis,
        *,
        prefix: str,
        timeout_s: float,
        clock: Clock,
        on_error: Callable[[str], None] = lambda op: None,
        pool: IdleClosingPool | None = None,
    ) -> None:
        self._r = client
        self._pool = pool  # its idle connections are closed at each heartbeat
        self._p = prefix
        self._timeout_s = timeout_s
        self._clock = clock
        self._on_error = on_error  # every failed operation, by name (a metric)
        self._scripts = {
            name: client.register_script(getattr(lua, name))
            for name in lua.__all__  # one EVALSHA each (EVAL once after a Redis restart)
        }
        self._closed = asyncio.Event()

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        prefix: str,
        timeout_s: float,
        clock: Clock,
        on_error: Callable[[str], None] = lambda op: None,
        max_connections: int = MAX_CONNECTIONS,
        idle_s: float = IDLE_S,
    ) -> RedisStore:
        pool = IdleClosingPool.from_url(
            url,
            max_connections=max_connections,
            timeout=timeout_s,  # waiting for a free connection
            idle_s=idle_s,
            monotonic=clock.monotonic,
            socket_timeout=timeout_s,
            socket_connect_timeout=timeout_s,
            retry=Retry(ExponentialBackoff(cap=0.05, base=0.01), retries=1),
            health_check_interval=10,
        )
        client = redis.Redis.from_pool(pool)  # closing the client closes the pool
        return cls(
            client, prefix=prefix, timeout_s=timeout_s, clock=clock, on_error=on_error, pool=pool
        )

    # -- plumbing (also for what shares this connection: gateway.governance.redis) ---------------

    @property
    def client(self) -> redis.Redis:
        return self._r

    def key(self, *parts: str) -> str:
        return self._key(*parts)

    async def guarded(self, op: str, work: Callable[[], Awaitable[T]]) -> T:
        """``work`` with the store's timeout; a failure raises ``StoreUnavailable``."""
        return await self._do(op, work)

    def _key(self, *parts: str) -> str:
        return ":".join((self._p, *parts))

    async def _do(self, op: str, work: Callable[[], Awaitable[T]]) -> T:
        try:
            async with asyncio.timeout(self._timeout_s * 2):
                return await work()
        except _UNREACHABLE as exc:
            self._on_error(op)
            raise StoreUnavailable(
                f"the shared store did not answer ({op}: {type(exc).__name__})"
            ) from None
        except RedisError as exc:  # e.g. a Redis that is loading its data, or read-only
            self._on_error(op)
            raise StoreUnavailable(
                f"the shared store refused {op} ({type(exc).__name__})"
            ) from None

    async def _script(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        return await self._do(name.lower(), lambda: self._scripts[name](keys=keys, args=args))

    def _owned(self, session_id: str, reply: Any) -> list[Any]:
        status = _text(reply[0])
        if status == "missing":
            raise RecordMissing(f"no record of session {session_id}")
        if status == "fenced":
            raise Fenced(f"session {session_id} is owned by another node")
        return list(reply[1:])

    def _unix(self) -> float:
        return self._clock.now().timestamp()

    # -- nodes -----------------------------------------------------------------------------------

    async def heartbeat(self, node: str, ttl_s: float) -> None:
        now = self._unix()
        keys = [self._key("node", node), self._key("nodes")]
        await self._script("HEARTBEAT", keys, [node, repr(now), int(ttl_s * 1000), NODES_KEPT_S])
        if self._pool is not None:  # every third of a lease: what a burst opened is let go
            await self._pool.close_idle()

    async def node_alive(self, node: str) -> bool:
        return bool(await self._do("node_alive", lambda: self._r.exists(self._key("node", node))))

    async def up_for_s(self) -> float:
        info = await self._do("uptime", lambda: self._r.info("server"))
        return float(info["uptime_in_seconds"])

    # -- sessions --------------------------------------------------------------------------------

    async def register(
        self, record: SessionRecord, ttl_s: float, *, only_if_absent: bool = False
    ) -> bool:
        args = [
            "1" if only_if_absent else "0",
            record.user_id,
            record.tenant or "",
            record.token_hash,
            record.owner,
            record.epoch,
            record.state,
            snapshot_to_json(record.snapshot),
            repr(record.saved_at),
            int(ttl_s * 1000),
        ]
        return bool(await self._script("REGISTER", [self._key("s", record.session_id)], args))

    async def save(
        self,
        session_id: str,
        epoch: int,
        snapshot: SessionSnapshot,
        *,
        token_hash: str | None = None,
        parked: bool = False,
        ttl_s: float,
    ) -> None:
        keys = [self._key("s", session_id), self._key("l", session_id)]
        args = [
            epoch,
            snapshot_to_json(snapshot),
            token_hash or "",
            "1" if parked else "0",
            repr(self._unix()),
            int(ttl_s * 1000),
        ]
        self._owned(session_id, await self._script("SAVE", keys, args))

    async def claim(
        self,
        session_id: str,
        token_hash: str,
        user_id: str,
        tenant: str | None,
        *,
        node: str,
        window_s: float,
        force: bool = False,
    ) -> Claim:
        keys = [self._key("s", session_id), self._key("nodes")]
        args = [
            token_hash,
            user_id,
            tenant or "",
            node,
            window_s,
            "1" if force else "0",
            repr(self._unix()),
            self._key("node", ""),
        ]
        reply = await self._script("CLAIM", keys, args)
        outcome = _text(reply[0])
        if outcome == "busy":
            return Claim(ClaimOutcome.BUSY, previous_owner=_text(reply[1]))
        if outcome != "claimed":
            return Claim(ClaimOutcome.NOT_FOUND)
        previous, epoch, recovered = _text(reply[1]), int(reply[2]), _text(reply[3]) == "1"
        try:
            snapshot = snapshot_from_json(reply[4])
        except ValueError:
            return Claim(ClaimOutcome.NOT_FOUND)  # written by a newer gateway: not ours to read
        record = SessionRecord(
            session_id=session_id,
            user_id=user_id,
            tenant=tenant,
            token_hash=token_hash,
            owner=node,
            epoch=epoch,
            state="live",
            snapshot=snapshot,
            saved_at=float(reply[5] or 0),
        )
        return Claim(ClaimOutcome.CLAIMED, record, previous_owner=previous, recovered=recovered)

    async def end(self, session_id: str, epoch: int) -> None:
        keys = [self._key("s", session_id), self._key("l", session_id)]
        await self._script("END", keys, [epoch, int(TOMBSTONE_S * 1000)])

    async def owner(self, session_id: str) -> tuple[str, int] | None:
        key = self._key("s", session_id)
        owner, epoch, state = await self._do(
            "owner", lambda: self._r.hmget(key, "owner", "epoch", "state")
        )
        if epoch is None:
            return None
        if _text(state) == "ended":
            return ("", 0)
        return (_text(owner), int(epoch))

    # -- confirmations ---------------------------------------------------------------------------

    async def open_confirmation(
        self, session_id: str, epoch: int, confirmation_id: str, ttl_s: float
    ) -> None:
        keys = [self._key("s", session_id), self._key("c", session_id, confirmation_id)]
        reply = await self._script("OPEN_CONFIRMATION", keys, [epoch, max(int(ttl_s * 1000), 1)])
        self._owned(session_id, reply)

    async def take_confirmation(self, session_id: str, epoch: int, confirmation_id: str) -> bool:
        keys = [self._key("s", session_id), self._key("c", session_id, confirmation_id)]
        reply = await self._script("TAKE_CONFIRMATION", keys, [epoch])
        return bool(int(self._owned(session_id, reply)[0]))

    # -- the tool-call ledger --------------------------------------------------------------------

    async def ledger_start(
        self, session_id: str, epoch: int, node: str, calls: Sequence[tuple[str, str]]
    ) -> dict[str, LedgerEntry | None]:
        now = self._unix()
        args: list[Any] = [epoch]
        for call_id, tool_id in calls:
            meta = {"tool_id": tool_id, "node": node, "epoch": epoch, "started_at": now}
            args += [call_id, orjson.dumps(meta)]
        keys = [self._key("s", session_id), self._key("l", session_id)]
        known = self._owned(session_id, await self._script("LEDGER_START", keys, args))
        started: dict[str, LedgerEntry | None] = {call_id: None for call_id, _ in calls}
        for i in range(0, len(known), 4):
            call_id = _text(known[i])
            started[call_id] = _entry(call_id, known[i + 1], known[i + 2], known[i + 3])
        return started

    async def ledger_finish(
        self, session_id: str, call_id: str, envelope: Mapping[str, Any]
    ) -> str | None:
        keys = [self._key("s", session_id), self._key("l", session_id)]
        owner = _text(await self._script("LEDGER_FINISH", keys, [call_id, orjson.dumps(envelope)]))
        return owner or None

    async def ledger_deliver(
        self, session_id: str, epoch: int, call_ids: Sequence[str]
    ) -> set[str]:
        keys = [self._key("s", session_id), self._key("l", session_id)]
        reply = await self._script("LEDGER_DELIVER", keys, [epoch, *call_ids])
        return {_text(call_id) for call_id in self._owned(session_id, reply)}

    async def ledger_open(self, session_id: str) -> list[LedgerEntry]:
        key = self._key("l", session_id)
        fields = await self._do("ledger_open", lambda: self._r.hgetall(key))
        calls: dict[str, dict[str, Any]] = {}
        for name, value in fields.items():
            call_id, _, part = _text(name).rpartition(":")
            calls.setdefault(call_id, {})[part] = value
        entries = []
        for call_id, parts in calls.items():
            entry = _entry(
                call_id, parts.get("state", b""), parts.get("meta", b""), parts.get("env", b"")
            )
            if entry is not None and entry.state is not LedgerState.DELIVERED:
                entries.append(entry)
        return entries

    # -- limits and single-use keys ------------------------------------------------------------

    async def admit_address(self, address: str, per_minute: int, now: float) -> bool:
        member = f"{now!r}:{secrets.token_hex(4)}"
        reply = await self._script(
            "RATE", [self._key("r", address)], [repr(now), 60, per_minute, member]
        )
        return bool(reply)

    async def acquire_user_slot(self, user_id: str, session_id: str, node: str, limit: int) -> bool:
        args = [session_id, node, limit, self._key("node", "")]
        return bool(await self._script("USER_ACQUIRE", [self._key("u", user_id)], args))

    async def keep_user_slot(self, user_id: str, session_id: str, node: str) -> None:
        key = self._key("u", user_id)
        await self._do("keep_user_slot", lambda: self._r.hset(key, session_id, node))

    async def release_user_slot(self, user_id: str, session_id: str) -> None:
        key = self._key("u", user_id)
        await self._do("release_user_slot", lambda: self._r.hdel(key, session_id))

    async def claim_once(self, key: str, ttl_s: float) -> bool:
        name = self._key("o", key)
        done = await self._do(
            "claim_once", lambda: self._r.set(name, "1", nx=True, px=max(int(ttl_s * 1000), 1))
        )
        return bool(done)

    # -- the bus ---------------------------------------------------------------------------------

    async def publish(self, node: str, message: Mapping[str, Any]) -> None:
        channel = self._key("bus", node)
        await self._do("publish", lambda: self._r.publish(channel, orjson.dumps(message)))

    async def messages(self, node: str) -> AsyncIterator[dict[str, Any]]:
        pubsub = self._r.pubsub(ignore_subscribe_messages=True)
        try:
            await self._do("subscribe", lambda: pubsub.subscribe(self._key("bus", node)))
            while not self._closed.is_set():
                try:
                    message = await pubsub.get_message(timeout=1.0)
                except _UNREACHABLE:
                    self._on_error("subscribe")
                    raise StoreUnavailable("the shared store's bus was lost") from None
                if message is None or message.get("type") != "message":
                    continue
                try:
                    body = orjson.loads(message["data"])
                except orjson.JSONDecodeError:
                    continue
                if isinstance(body, dict):
                    yield body
        finally:
            try:
                await pubsub.aclose()  # type: ignore[no-untyped-call]
            except (*_UNREACHABLE, RedisError):
                pass

    async def close(self) -> None:
        self._closed.set()
        try:
            await self._r.aclose()
        except (*_UNREACHABLE, RedisError):
            pass


def _entry(call_id: str, state: Any, meta: Any, envelope: Any) -> LedgerEntry | None:
    try:
        info = orjson.loads(meta)
        return LedgerEntry(
            call_id=call_id,
            tool_id=str(info["tool_id"]),
            state=LedgerState(_text(state)),
            node=str(info["node"]),
            epoch=int(info["epoch"]),
            started_at=float(info["started_at"]),
            envelope=orjson.loads(envelope) if envelope else None,
        )
    except (KeyError, TypeError, ValueError, orjson.JSONDecodeError):
        return None
