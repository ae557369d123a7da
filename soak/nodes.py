"""Which gateway nodes a soak client may go to now, and how to reach them. The fleet marks a
node draining or down while it restarts it; clients pick among those up, as a load balancer
would, and a resume goes to another node than the one the session was on when it can."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field

import jwt

__all__ = ["AUTH_SECRET", "Node", "NodeDirectory", "user_token"]

AUTH_SECRET = "soak-secret-0123456789abcdef0123456789"
TOKEN_TTL_S = 3 * 3600


def user_token(sub: str) -> str:
    now = int(time.time())
    claims = {"sub": sub, "roles": ["caregiver"], "iat": now, "exp": now + TOKEN_TTL_S}
    return jwt.encode(claims, AUTH_SECRET, "HS256")


@dataclass
class Node:
    name: str
    port: int
    state: str = "down"  # "up", "draining", "down"
    # A restart marks this: sessions on it from then on meet a drain (their latency is apart).
    restarts: list[float] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def session_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/v1/session"

    @property
    def media_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/twilio/media"


class NodeDirectory:
    def __init__(self, nodes: list[Node], rng: random.Random) -> None:
        self.nodes = {node.name: node for node in nodes}
        self._rng = rng

    def with_rng(self, rng: random.Random) -> NodeDirectory:
        """The same nodes (their states shared), picked from another stream: a session's own,
        so that where it goes does not depend on when other sessions picked."""
        view = NodeDirectory([], rng)
        view.nodes = self.nodes
        return view

    def pick(self, avoid: str | None = None) -> Node | None:
        """A node that is up, other than ``avoid`` when there is one."""
        up = [n for n in self.nodes.values() if n.state == "up"]
        others = [n for n in up if n.name != avoid]
        choice = others or up
        return self._rng.choice(choice) if choice else None

    def other(self, name: str) -> Node:
        return next(n for n in self.nodes.values() if n.name != name)
