"""Keys and budget counters shared by every node, on the session store's Redis (same
connections, same prefix, same timeouts: ``RedisStore.guarded``).

    {p}:key:{hash}       JSON record of a key, by the SHA-256 of its secret (the secret itself
                         is never stored)
    {p}:keyid:{id}       the hash of key ``id``
    {p}:keys             set of key ids
    {p}:revoked          sorted set: key id by the unix time it was revoked
    {p}:team:{id}        JSON record of a team;  {p}:teams  set of ids
    {p}:ulim:{id}        JSON limits of a user;  {p}:ulims  set of ids
    {p}:b:{counter}      a budget counter (``key:k_1:spend:d2026-11-29``; float; 400 days)
    {p}:bi:{day}         set of the scopes charged that day (the usage report's index)
    {p}:bs:{scope}       hash session → node: the scope's open sessions
    {p}:call:{id}        JSON record of a placed call (90 days)
    {p}:callby:{carrier}:{carrier's id}   its id, by the carrier's id of the call (90 days)

A charge is one script: every counter added and the limited ones read back in one atomic step,
so two nodes charging at once both see the sum of both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from gateway.budgets.limits import parse_limits
from gateway.calls.records import CallRecord
from gateway.governance.ports import CALLS_KEPT_S, COUNTERS_KEPT_S
from gateway.keys.records import ApiKey, Team, UserLimits
from gateway.store.redis import RedisStore

__all__ = ["RedisGovernance"]

# KEYS: n counters to add, m counters to read, the day's index; ARGV: n, ttl_ms, n amounts,
# the scopes to index.
CHARGE = """
local n = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
for i = 1, n do
  redis.call('INCRBYFLOAT', KEYS[i], ARGV[2 + i])
  redis.call('PEXPIRE', KEYS[i], ttl)
end
local index = KEYS[#KEYS]
for j = 3 + n, #ARGV do redis.call('SADD', index, ARGV[j]) end
redis.call('PEXPIRE', index, ttl)
local out = {}
for i = n + 1, #KEYS - 1 do out[#out + 1] = redis.call('GET', KEYS[i]) or '0' end
return out
"""

# KEYS: each scope's sessions; ARGV: session, node, node key prefix, each scope's limit. All or
# none; sessions of dead nodes are dropped before counting. Returns 0, or the full scope's index.
ACQUIRE = """
for i = 1, #KEYS do
  local all = redis.call('HGETALL', KEYS[i])
  local count = 0
  for j = 1, #all, 2 do
    if all[j] ~= ARGV[1] then
      if redis.call('EXISTS', ARGV[3] .. all[j + 1]) == 1 then
        count = count + 1
      else
        redis.call('HDEL', KEYS[i], all[j])
      end
    end
  end
  if count >= tonumber(ARGV[3 + i]) then return i end
end
for i = 1, #KEYS do redis.call('HSET', KEYS[i], ARGV[1], ARGV[2]) end
return 0
"""


def _float(value: Any) -> float:
    return float(_str(value))


def _str(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisGovernance:
    def __init__(self, store: RedisStore, *, owns_store: bool = False) -> None:
        """``owns_store``: ``close`` closes the store too (the CLI's; a node's store is closed
        with the node)."""
        self._store = store
        self._owns_store = owns_store
        self._r = store.client
        self._charge = self._r.register_script(CHARGE)
        self._acquire = self._r.register_script(ACQUIRE)
        self._ttl_ms = COUNTERS_KEPT_S * 1000

    def _k(self, *parts: str) -> str:
        return self._store.key(*parts)

    async def _json(self, op: str, key: str) -> Any:
        raw = await self._store.guarded(op, lambda: self._r.get(key))
        return None if raw is None else orjson.loads(raw)

    # -- keys, teams, users ----------------------------------------------------------------------

    async def key_by_hash(self, secret_hash: str) -> ApiKey | None:
        raw = await self._json("key_by_hash", self._k("key", secret_hash))
        return None if raw is None else ApiKey.from_record(raw)

    async def key(self, key_id: str) -> ApiKey | None:
        secret_hash = await self._store.guarded(
            "key", lambda: self._r.get(self._k("keyid", key_id))
        )
        if secret_hash is None:
            return None
        return await self.key_by_hash(_str(secret_hash))

    async def put_key(self, key: ApiKey) -> None:
        def write() -> Any:
            pipe = self._r.pipeline(transaction=True)
            pipe.set(self._k("key", key.secret_hash), orjson.dumps(key.to_record()))
            pipe.set(self._k("keyid", key.key_id), key.secret_hash)
            pipe.sadd(self._k("keys"), key.key_id)
            if key.revoked_at is not None:
                pipe.zadd(self._k("revoked"), {key.key_id: key.revoked_at})
            return pipe.execute()

        await self._store.guarded("put_key", write)

    async def keys(self) -> list[ApiKey]:
        ids = await self._store.guarded("keys", lambda: self._r.smembers(self._k("keys")))
        found = [await self.key(i) for i in sorted(map(_str, ids))]
        return [key for key in found if key is not None]

    async def revoked_since(self, since: float) -> dict[str, float]:
        found: list[Any] = await self._store.guarded(
            "revoked_since",
            lambda: self._r.zrangebyscore(self._k("revoked"), since, "+inf", withscores=True),
        )
        return {_str(pair[0]): float(pair[1]) for pair in found}

    async def team(self, team_id: str) -> Team | None:
        raw = await self._json("team", self._k("team", team_id))
        return None if raw is None else Team.from_record(raw)

    async def put_team(self, team: Team) -> None:
        def write() -> Any:
            pipe = self._r.pipeline(transaction=True)
            pipe.set(self._k("team", team.team_id), orjson.dumps(team.to_record()))
            pipe.sadd(self._k("teams"), team.team_id)
            return pipe.execute()

        await self._store.guarded("put_team", write)

    async def teams(self) -> list[Team]:
        ids = await self._store.guarded("teams", lambda: self._r.smembers(self._k("teams")))
        found = [await self.team(i) for i in sorted(map(_str, ids))]
        return [team for team in found if team is not None]

    async def user_limits(self, user_id: str) -> UserLimits | None:
        raw = await self._json("user_limits", self._k("ulim", user_id))
        return None if raw is None else UserLimits(user_id, parse_limits(raw))

    async def put_user_limits(self, user: UserLimits) -> None:
        def write() -> Any:
            pipe = self._r.pipeline(transaction=True)
            pipe.set(self._k("ulim", user.user_id), orjson.dumps(user.limits.as_json()))
            pipe.sadd(self._k("ulims"), user.user_id)
            return pipe.execute()

        await self._store.guarded("put_user_limits", write)

    async def users_with_limits(self) -> list[UserLimits]:
        ids = await self._store.guarded("users", lambda: self._r.smembers(self._k("ulims")))
        found = [await self.user_limits(i) for i in sorted(map(_str, ids))]
        return [user for user in found if user is not None]

    # -- counters --------------------------------------------------------------------------------

    async def charge(
        self,
        entries: Sequence[tuple[str, float]],
        read: Sequence[str],
        *,
        day: str,
        scopes: Sequence[str],
    ) -> dict[str, float]:
        keys = [
            *(self._k("b", name) for name, _ in entries),
            *(self._k("b", name) for name in read),
            self._k("bi", day),
        ]
        args: list[Any] = [len(entries), self._ttl_ms, *(repr(a) for _, a in entries), *scopes]
        reply = await self._store.guarded(
            "budget_charge", lambda: self._charge(keys=keys, args=args)
        )
        return {name: _float(value) for name, value in zip(read, reply, strict=True)}

    async def read(self, counters: Sequence[str]) -> dict[str, float]:
        if not counters:
            return {}
        names = list(counters)
        values = await self._store.guarded(
            "budget_read", lambda: self._r.mget([self._k("b", name) for name in names])
        )
        return {
            name: 0.0 if v is None else _float(v) for name, v in zip(names, values, strict=True)
        }

    async def charged_on(self, day: str) -> set[str]:
        members = await self._store.guarded(
            "budget_index", lambda: self._r.smembers(self._k("bi", day))
        )
        return {_str(m) for m in members}

    # -- concurrency slots -----------------------------------------------------------------------

    async def acquire_slots(
        self, session_id: str, node: str, slots: Sequence[tuple[str, int]]
    ) -> str | None:
        if not slots:
            return None
        keys = [self._k("bs", scope) for scope, _ in slots]
        args: list[Any] = [session_id, node, self._k("node", ""), *(n for _, n in slots)]
        full = await self._store.guarded(
            "budget_acquire", lambda: self._acquire(keys=keys, args=args)
        )
        return None if int(full) == 0 else slots[int(full) - 1][0]

    async def keep_slots(self, session_id: str, node: str, scopes: Sequence[str]) -> None:
        def write() -> Any:
            pipe = self._r.pipeline(transaction=False)
            for scope in scopes:
                pipe.hset(self._k("bs", scope), session_id, node)
            return pipe.execute()

        if scopes:
            await self._store.guarded("budget_keep", write)

    async def release_slots(self, session_id: str, scopes: Sequence[str]) -> None:
        def write() -> Any:
            pipe = self._r.pipeline(transaction=False)
            for scope in scopes:
                pipe.hdel(self._k("bs", scope), session_id)
            return pipe.execute()

        if scopes:
            await self._store.guarded("budget_release", write)

    # -- placed calls ----------------------------------------------------------------------------

    async def put_call(self, record: CallRecord) -> None:
        """Written merged with what is kept (``CallRecord.merged``): read and written under
        WATCH, so a write from another node in between makes this one read again."""
        key = self._k("call", record.call_id)

        async def merge(pipe: Any) -> None:
            raw = await pipe.get(key)
            merged = record
            if raw is not None:
                merged = CallRecord.from_record(orjson.loads(raw)).merged(record)
            pipe.multi()
            pipe.set(key, orjson.dumps(merged.to_record()), ex=CALLS_KEPT_S)
            if merged.carrier_call_id:
                by = self._k("callby", merged.carrier, merged.carrier_call_id)
                pipe.set(by, merged.call_id, ex=CALLS_KEPT_S)

        await self._store.guarded("put_call", lambda: self._r.transaction(merge, key))

    async def call(self, call_id: str) -> CallRecord | None:
        raw = await self._json("call", self._k("call", call_id))
        return None if raw is None else CallRecord.from_record(raw)

    async def call_by_carrier(self, carrier: str, carrier_call_id: str) -> CallRecord | None:
        by = self._k("callby", carrier, carrier_call_id)
        call_id = await self._store.guarded("call_by_carrier", lambda: self._r.get(by))
        return None if call_id is None else await self.call(_str(call_id))

    async def close(self) -> None:
        if self._owns_store:
            await self._store.close()
