"""The breakers of upstream targets shared by every node, on Redis (``redis.asyncio``).

Keys, under ``prefix`` (the store's ``GATEWAY_REDIS_PREFIX``, joined with ``:`` as
``gateway.store.redis`` joins its own):

    {p}:breaker:{target}   hash: failures (unix times, space-separated), open_until, probes,
                           expires_at (the caller's clock; absent fields: closed, none, 0)
    {p}:breakers           set of the targets with a record (``states``)

Each operation is one Lua script, atomic across nodes, applying the rules of
``gateway.routing.breaker`` exactly: the caller passes its time and every bound derived from it
(``now - window_s``, ``now + cooldown_s``...) as the decimal ``repr`` of a float, which Lua reads
back to the same double, so the script compares the very numbers the pure functions compare.
A record lapses at ``expires_at`` on the caller's clock (scripts treat it as absent); the keys'
TTL (``forget_after_s`` plus a minute for clocks apart between nodes) only collects them.

Redis unreachable (or refusing): the breaker fails OPEN toward serving. ``admit`` allows,
``failure`` is dropped with a log line, ``success`` is dropped: a store outage must never stop
calls to healthy providers, and a broken provider then fails its sessions as it would without a
breaker. An operation waits ``timeout_s`` at most; after a failure Redis is left alone for
``outage_backoff_s``, so an outage costs session starts no waiting. One line says the store is
unreachable, one that it answers again. ``states`` raises ``StoreUnavailable`` (the admin API
answers that already); nothing else here raises it.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Sequence
from typing import Any

import redis.asyncio as redis
import structlog
from redis.commands.core import AsyncScript
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.clock import Clock
from gateway.routing.breaker import (
    ALLOWED,
    PROBE,
    Admission,
    BreakerPolicy,
    BreakerState,
    BreakerView,
    view,
)
from gateway.routing.health import log_opened
from gateway.store.base import StoreUnavailable

__all__ = ["TTL_SLACK_S", "RedisTargetHealth"]

# Redis expires a record this long after it lapsed on the caller's clock: nodes' clocks differ.
TTL_SLACK_S = 60.0

_UNREACHABLE = (RedisConnectionError, RedisTimeoutError, OSError, asyncio.TimeoutError)
_log = structlog.get_logger("routing")

# KEYS: the target's hash, the index; ARGV: now, ttl_ms, target, expires_at, then the script's.
_COMMON = """
local now = tonumber(ARGV[1])
local function load()
  local f = redis.call('HMGET', KEYS[1], 'failures', 'open_until', 'probes', 'expires_at')
  if not f[4] then return nil end
  if tonumber(f[4]) <= now then
    redis.call('DEL', KEYS[1])  -- lapsed: as if there were none
    return nil
  end
  return {failures = f[1] or '', open_until = f[2] and tonumber(f[2]), until_text = f[2],
    probes = tonumber(f[3] or '0')}
end
local function save(fields)
  fields[#fields + 1] = 'expires_at'
  fields[#fields + 1] = ARGV[4]
  redis.call('HSET', KEYS[1], unpack(fields))
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('SADD', KEYS[2], ARGV[3])
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
"""

# ARGV[5]: probes per half-open period, ARGV[6]: now - cooldown_s.
ADMIT = (
    _COMMON
    + """
local r = load()
if not r or not r.open_until then return {'allowed'} end
if now < r.open_until then return {'cooling', r.until_text} end
if r.probes < tonumber(ARGV[5]) then
  save({'probes', r.probes + 1})
  return {'probe'}
end
if r.open_until <= tonumber(ARGV[6]) then
  save({'open_until', ARGV[1], 'probes', 1})  -- the probes never reported: a new period
  return {'probe'}
end
return {'probing', r.until_text}
"""
)

# ARGV[5]: failures that open, ARGV[6]: now - window_s, ARGV[7]: now + cooldown_s.
FAILURE = (
    _COMMON
    + """
local r = load()
if r and r.open_until then
  if now < r.open_until then return 'open' end
  redis.call('DEL', KEYS[1])
  save({'open_until', ARGV[7]})
  return 'reopened'
end
local kept = {}
if r then
  for t in string.gmatch(r.failures, '%S+') do
    if tonumber(t) > tonumber(ARGV[6]) then kept[#kept + 1] = t end
  end
end
kept[#kept + 1] = ARGV[1]
if #kept >= tonumber(ARGV[5]) then
  redis.call('DEL', KEYS[1])
  save({'open_until', ARGV[7]})
  return 'opened'
end
save({'failures', table.concat(kept, ' ')})
return 'counted'
"""
)

SUCCESS = (
    _COMMON
    + """
local r = load()
if r and r.open_until and now >= r.open_until then
  redis.call('DEL', KEYS[1])
  redis.call('SREM', KEYS[2], ARGV[3])
  return 'closed'
end
return 'kept'
"""
)

# KEYS: the index; ARGV: now, the targets' key prefix. Lapsed records leave; the others are
# answered as target, failures, open_until, probes, expires_at.
STATES = """
local now = tonumber(ARGV[1])
local out = {}
for _, target in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local key = ARGV[2] .. target
  local f = redis.call('HMGET', key, 'failures', 'open_until', 'probes', 'expires_at')
  if not f[4] or tonumber(f[4]) <= now then
    redis.call('DEL', key)
    redis.call('SREM', KEYS[1], target)
  else
    for _, v in ipairs({target, f[1] or '', f[2] or '', f[3] or '0', f[4]}) do
      out[#out + 1] = v
    end
  end
end
return out
"""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisTargetHealth:
    """``timeout_s``: how long an operation may wait for Redis before the breaker steps aside.
    Once Redis failed, the next ``outage_backoff_s`` (on the clock's monotonic time) do not ask
    it at all: a hung Redis slows one session start a second, not every one. ``on_error``:
    every failed operation, by name (a metric). The client is the caller's to close."""

    def __init__(
        self,
        client: redis.Redis,
        policy: BreakerPolicy,
        clock: Clock,
        prefix: str,
        *,
        timeout_s: float = 0.5,
        outage_backoff_s: float = 1.0,
        on_error: Callable[[str], None] = lambda op: None,
    ) -> None:
        self._r = client
        self._policy = policy
        self._clock = clock
        self._target_prefix = f"{prefix}:breaker:"
        self._index = f"{prefix}:breakers"
        self._timeout_s = timeout_s
        self._outage_backoff_s = outage_backoff_s
        self._skip_until = -math.inf  # monotonic: Redis is not asked before then
        self._on_error = on_error
        self._ttl_ms = math.ceil((policy.forget_after_s + TTL_SLACK_S) * 1000)
        self._admit = client.register_script(ADMIT)
        self._failure = client.register_script(FAILURE)
        self._success = client.register_script(SUCCESS)
        self._states = client.register_script(STATES)
        self._reachable = True

    # -- the port --------------------------------------------------------------------------------

    async def admit(self, target: str) -> Admission:
        now = self._now()
        extra = [self._policy.half_open_probes, repr(now - self._policy.cooldown_s)]
        try:
            reply = await self._run("breaker_admit", self._admit, target, now, extra)
        except StoreUnavailable:
            return ALLOWED  # fail open: the store's outage is not the provider's
        verdict = _text(reply[0])
        if verdict == "allowed":
            return ALLOWED
        if verdict == "probe":
            return PROBE
        open_until = float(_text(reply[1]))
        if verdict == "cooling":
            return Admission.refused(open_until - now)
        return Admission.refused(open_until + self._policy.cooldown_s - now)

    async def failure(self, target: str, reason: str) -> None:
        now = self._now()
        policy = self._policy
        extra = [policy.failures, repr(now - policy.window_s), repr(now + policy.cooldown_s)]
        try:
            reply = await self._run("breaker_failure", self._failure, target, now, extra)
        except StoreUnavailable:
            _log.warning("breaker_failure_dropped", target=target, reason=reason)
            return
        outcome = _text(reply)
        if outcome in ("opened", "reopened"):
            log_opened(target, reason, again=outcome == "reopened", cooldown_s=policy.cooldown_s)

    async def success(self, target: str) -> None:
        try:
            reply = await self._run("breaker_success", self._success, target, self._now(), [])
        except StoreUnavailable:
            return  # nothing to undo: a dropped success leaves the breaker as it was
        if _text(reply) == "closed":
            _log.info("breaker_closed", target=target)

    async def states(self) -> dict[str, BreakerView]:
        now = self._now()
        reply = await self._call(
            "breaker_states",
            lambda: self._states(keys=[self._index], args=[repr(now), self._target_prefix]),
        )
        found: dict[str, BreakerView] = {}
        for i in range(0, len(reply), 5):
            target, failures, open_until, probes, expires_at = map(_text, reply[i : i + 5])
            state = BreakerState(
                failures=tuple(float(t) for t in failures.split()),
                open_until=float(open_until) if open_until else None,
                probes_taken=int(probes),
                expires_at=float(expires_at),
            )
            found[target] = view(state, self._policy, now)
        return dict(sorted(found.items()))

    # -- plumbing --------------------------------------------------------------------------------

    def _now(self) -> float:
        return self._clock.now().timestamp()  # wall time: the record is read by other nodes

    async def _run(
        self, op: str, script: AsyncScript, target: str, now: float, extra: Sequence[Any]
    ) -> Any:
        keys = [self._target_prefix + target, self._index]
        args = [repr(now), self._ttl_ms, target, repr(now + self._policy.forget_after_s), *extra]
        return await self._call(op, lambda: script(keys=keys, args=args))

    async def _call(self, op: str, work: Callable[[], Any]) -> Any:
        if self._clock.monotonic() < self._skip_until:
            raise StoreUnavailable(f"the shared store failed a moment ago ({op} not tried)")
        try:
            async with asyncio.timeout(self._timeout_s):
                reply = await work()
        except (*_UNREACHABLE, RedisError) as exc:
            self._on_error(op)
            self._skip_until = self._clock.monotonic() + self._outage_backoff_s
            if self._reachable:  # one line per outage, not one per session
                self._reachable = False
                _log.warning(
                    "breaker_store_unreachable",
                    op=op,
                    error=type(exc).__name__,
                    effect="every target admitted, failures dropped, until it answers",
                )
            raise StoreUnavailable(
                f"the shared store did not answer ({op}: {type(exc).__name__})"
            ) from None
        if not self._reachable:
            self._reachable = True
            _log.info("breaker_store_reachable", op=op)
        return reply
