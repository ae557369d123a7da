"""The Lua scripts of ``RedisStore``: each check-and-write is one atomic script.

Scripts that act as a session's owner start with ``owned``: the record's epoch must be the
caller's, and the session not ended; they answer ``{'missing'}``, ``{'fenced'}`` or
``{'ok', ...}``. JSON is built and read in Python only (Redis' cjson would round numbers).
"""

from __future__ import annotations

__all__ = [
    "CLAIM",
    "END",
    "HEARTBEAT",
    "LEDGER_DELIVER",
    "LEDGER_FINISH",
    "LEDGER_START",
    "OPEN_CONFIRMATION",
    "RATE",
    "REGISTER",
    "SAVE",
    "TAKE_CONFIRMATION",
    "USER_ACQUIRE",
]

_OWNED = """
local function owned(key, epoch)
  local f = redis.call('HMGET', key, 'epoch', 'state')
  if not f[1] then return 'missing' end
  if f[2] == 'ended' or tonumber(f[1]) ~= tonumber(epoch) then return 'fenced' end
  return 'ok'
end
"""

# KEYS: session; ARGV: only_if_absent, user, tenant, token, owner, epoch, state, snap, saved_at,
# ttl_ms
REGISTER = """
if ARGV[1] == '1' and redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'user', ARGV[2], 'tenant', ARGV[3], 'token', ARGV[4],
  'owner', ARGV[5], 'epoch', ARGV[6], 'state', ARGV[7], 'snap', ARGV[8], 'saved_at', ARGV[9])
redis.call('PEXPIRE', KEYS[1], ARGV[10])
return 1
"""

# KEYS: session, ledger; ARGV: epoch, snap, token ('' keeps it), parked, saved_at, ttl_ms
SAVE = (
    _OWNED
    + """
local o = owned(KEYS[1], ARGV[1])
if o ~= 'ok' then return {o} end
local state = 'live'
if ARGV[4] == '1' then state = 'parked' end
redis.call('HSET', KEYS[1], 'snap', ARGV[2], 'saved_at', ARGV[5], 'state', state)
if ARGV[3] ~= '' then redis.call('HSET', KEYS[1], 'token', ARGV[3]) end
redis.call('PEXPIRE', KEYS[1], ARGV[6])
if redis.call('EXISTS', KEYS[2]) == 1 then redis.call('PEXPIRE', KEYS[2], ARGV[6]) end
return {'ok'}
"""
)

# KEYS: session, nodes hash; ARGV: token, user, tenant, node, window_s, force, now, node prefix
CLAIM = """
local r = redis.call('HMGET', KEYS[1], 'token', 'user', 'tenant', 'owner', 'epoch', 'state',
  'snap', 'saved_at')
if not r[1] or r[6] == 'ended' then return {'not_found'} end
if r[1] ~= ARGV[1] or r[2] ~= ARGV[2] or r[3] ~= ARGV[3] then return {'not_found'} end
local recovered = '0'
if r[6] == 'live' and r[4] ~= ARGV[4] then
  if redis.call('EXISTS', ARGV[8] .. r[4]) == 1 then
    if ARGV[6] ~= '1' then return {'busy', r[4]} end
  else
    local last = tonumber(r[8]) or 0
    local seen = redis.call('HGET', KEYS[2], r[4])
    if seen then
      local t = tonumber(seen)
      if t and t > last then last = t end
    end
    if tonumber(ARGV[7]) - last > tonumber(ARGV[5]) then return {'not_found'} end
    recovered = '1'
  end
end
local epoch = redis.call('HINCRBY', KEYS[1], 'epoch', 1)
redis.call('HSET', KEYS[1], 'owner', ARGV[4], 'state', 'live')
return {'claimed', r[4], tostring(epoch), recovered, r[7], r[8]}
"""

# KEYS: session, ledger; ARGV: epoch, tombstone_ms
END = """
local e = redis.call('HGET', KEYS[1], 'epoch')
if not e or tonumber(e) ~= tonumber(ARGV[1]) then return 0 end
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[1], 'state', 'ended', 'token', '', 'owner', '', 'snap', '')
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"""

# KEYS: session, confirmation; ARGV: epoch, ttl_ms
OPEN_CONFIRMATION = (
    _OWNED
    + """
local o = owned(KEYS[1], ARGV[1])
if o ~= 'ok' then return {o} end
redis.call('SET', KEYS[2], '1', 'PX', ARGV[2])
return {'ok'}
"""
)

# KEYS: session, confirmation; ARGV: epoch
TAKE_CONFIRMATION = (
    _OWNED
    + """
local o = owned(KEYS[1], ARGV[1])
if o ~= 'ok' then return {o} end
return {'ok', redis.call('DEL', KEYS[2])}
"""
)

# KEYS: session, ledger; ARGV: epoch, then call id and meta JSON pairs. Each call: started now
# (its id left out of the answer), or its state, meta and envelope as they were.
LEDGER_START = (
    _OWNED
    + """
local o = owned(KEYS[1], ARGV[1])
if o ~= 'ok' then return {o} end
local out = {'ok'}
for i = 2, #ARGV, 2 do
  local id = ARGV[i]
  local state = redis.call('HGET', KEYS[2], id .. ':state')
  if state then
    table.insert(out, id)
    table.insert(out, state)
    table.insert(out, redis.call('HGET', KEYS[2], id .. ':meta') or '')
    table.insert(out, redis.call('HGET', KEYS[2], id .. ':env') or '')
  else
    redis.call('HSET', KEYS[2], id .. ':state', 'started', id .. ':meta', ARGV[i + 1])
  end
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
return out
"""
)

# KEYS: session, ledger; ARGV: call id, envelope JSON. Answers the session's owner now.
# An entry the store lost (it restarted empty while the call ran) is recorded finished too, for
# the session's time (five minutes without a record).
LEDGER_FINISH = """
local state = redis.call('HGET', KEYS[2], ARGV[1] .. ':state')
if state == 'started' or not state then
  redis.call('HSET', KEYS[2], ARGV[1] .. ':state', 'finished', ARGV[1] .. ':env', ARGV[2])
  if not state then
    local ttl = redis.call('PTTL', KEYS[1])
    redis.call('PEXPIRE', KEYS[2], ttl > 0 and ttl or 300000)
  end
end
return redis.call('HGET', KEYS[1], 'owner') or ''
"""

# KEYS: session, ledger; ARGV: epoch, call ids. The owner holds each call's result: it may give
# it to the model unless that was done (a call whose entry the store lost included).
LEDGER_DELIVER = (
    _OWNED
    + """
local o = owned(KEYS[1], ARGV[1])
if o ~= 'ok' then return {o} end
local out = {'ok'}
for i = 2, #ARGV do
  if redis.call('HGET', KEYS[2], ARGV[i] .. ':state') ~= 'delivered' then
    redis.call('HSET', KEYS[2], ARGV[i] .. ':state', 'delivered')
    table.insert(out, ARGV[i])
  end
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
return out
"""
)

# KEYS: the node's heartbeat, the nodes hash; ARGV: node, now (unix s), lease ms, kept s.
# Nodes silent longer than ``kept`` leave the hash.
HEARTBEAT = """
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all, 2 do
  if tonumber(all[i + 1]) < tonumber(ARGV[2]) - tonumber(ARGV[4]) then
    redis.call('HDEL', KEYS[2], all[i])
  end
end
return 1
"""

# KEYS: the address's window; ARGV: now, window_s, limit, member. The in-memory limiter's
# semantics: an admission leaves the window once it is window_s old.
RATE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[1]) - tonumber(ARGV[2]))
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4])
redis.call('PEXPIRE', KEYS[1], math.ceil(tonumber(ARGV[2]) * 1000))
return 1
"""

# KEYS: the user's sessions (session → node); ARGV: session, node, limit, node key prefix.
# Sessions of nodes that died are dropped before counting.
USER_ACQUIRE = """
local all = redis.call('HGETALL', KEYS[1])
local count = 0
for i = 1, #all, 2 do
  if all[i] ~= ARGV[1] then
    if redis.call('EXISTS', ARGV[4] .. all[i + 1]) == 1 then
      count = count + 1
    else
      redis.call('HDEL', KEYS[1], all[i])
    end
  end
end
if count >= tonumber(ARGV[3]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
"""
