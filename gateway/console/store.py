"""Where the console's views live: ``ConsoleStore``.

Each node publishes, once a second, one blob of what it holds (its live sessions' summaries,
whether it drains, its version) and appends its sessions' new timeline entries. Any node's
console reads every node's blob and any session's timeline, so the operator sees the whole
fleet from whichever node answers. On Redis (beside the sessions):

    {p}:console:n:{node}   the node's blob (JSON), expiring 3 publications after its last
    {p}:console:nodes      the nodes that published (a set; members whose blob expired are gone)
    {p}:console:t:{sid}    the session's timeline (a list of JSON entries, the last
                           ``TIMELINE_KEPT``), kept ``TIMELINE_TTL_S`` after its last entry

In memory (one node, no Redis) the same, in dictionaries. Nothing here runs per audio frame.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # redis-py is installed only with the redis extra
    from gateway.store.redis import RedisStore

__all__ = ["TIMELINE_KEPT", "TIMELINE_TTL_S", "ConsoleStore", "MemoryConsole", "RedisConsole"]

TIMELINE_KEPT = 1000  # entries of one session
TIMELINE_TTL_S = 24 * 3600
ENDED_KEPT = 500  # timelines of sessions that ended, in memory


class ConsoleStore(Protocol):
    async def publish(self, node: str, blob: bytes, ttl_s: float) -> None: ...

    async def blobs(self) -> dict[str, bytes]:
        """Every node's last blob that has not expired."""
        ...

    async def heartbeats(self) -> dict[str, float]:
        """Every node's last heartbeat (unix seconds), dead ones included for a while."""
        ...

    async def append(self, entries: dict[str, list[bytes]]) -> None:
        """New timeline entries, by session."""
        ...

    async def timeline(self, session_id: str) -> list[bytes]: ...


class MemoryConsole:
    def __init__(self, node: str) -> None:
        self._node = node
        self._blob: bytes | None = None
        self._timelines: OrderedDict[str, list[bytes]] = OrderedDict()
        self.beat = 0.0  # set by the console as it publishes: this node is the only one

    async def publish(self, node: str, blob: bytes, ttl_s: float) -> None:
        self._blob = blob

    async def blobs(self) -> dict[str, bytes]:
        return {} if self._blob is None else {self._node: self._blob}

    async def heartbeats(self) -> dict[str, float]:
        return {self._node: self.beat} if self.beat else {}

    async def append(self, entries: dict[str, list[bytes]]) -> None:
        for session_id, added in entries.items():
            kept = self._timelines.setdefault(session_id, [])
            self._timelines.move_to_end(session_id)
            kept.extend(added)
            del kept[:-TIMELINE_KEPT]
        while len(self._timelines) > ENDED_KEPT:
            self._timelines.popitem(last=False)

    async def timeline(self, session_id: str) -> list[bytes]:
        return list(self._timelines.get(session_id, ()))


class RedisConsole:
    def __init__(self, store: RedisStore) -> None:
        self._store = store
        self._r: Any = store.client
        self._nodes = store.key("console", "nodes")

    def _blob_key(self, node: str) -> str:
        return self._store.key("console", "n", node)

    async def publish(self, node: str, blob: bytes, ttl_s: float) -> None:
        async def write() -> None:
            async with self._r.pipeline(transaction=False) as pipe:
                pipe.set(self._blob_key(node), blob, px=int(ttl_s * 1000))
                pipe.sadd(self._nodes, node)
                await pipe.execute()

        await self._store.guarded("console_publish", write)

    async def blobs(self) -> dict[str, bytes]:
        async def read() -> dict[str, bytes]:
            nodes = sorted(n.decode() for n in await self._r.smembers(self._nodes))
            if not nodes:
                return {}
            values = await self._r.mget([self._blob_key(n) for n in nodes])
            gone = [n for n, v in zip(nodes, values, strict=True) if v is None]
            if gone:
                await self._r.srem(self._nodes, *gone)
            return {n: v for n, v in zip(nodes, values, strict=True) if v is not None}

        return await self._store.guarded("console_blobs", read)

    async def heartbeats(self) -> dict[str, float]:
        async def read() -> dict[str, float]:
            beats = await self._r.hgetall(self._store.key("nodes"))
            return {k.decode(): float(v) for k, v in beats.items()}

        return await self._store.guarded("console_heartbeats", read)

    async def append(self, entries: dict[str, list[bytes]]) -> None:
        async def write() -> None:
            async with self._r.pipeline(transaction=False) as pipe:
                for session_id, added in entries.items():
                    key = self._store.key("console", "t", session_id)
                    pipe.rpush(key, *added)
                    pipe.ltrim(key, -TIMELINE_KEPT, -1)
                    pipe.expire(key, TIMELINE_TTL_S)
                await pipe.execute()

        if entries:
            await self._store.guarded("console_append", write)

    async def timeline(self, session_id: str) -> list[bytes]:
        key = self._store.key("console", "t", session_id)

        async def read() -> list[bytes]:
            return list(await self._r.lrange(key, 0, -1))

        return await self._store.guarded("console_timeline", read)
