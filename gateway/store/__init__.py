"""Where a dropped client's session waits for a resume: a narrow async interface.

``MemoryStore`` is the embedded default (one process). A shared implementation (Redis) lets a
client resume on another gateway node; it only has to keep ``ResumeRecord`` values, which are
plain data.
"""

from gateway.store.base import ResumeRecord, SessionSnapshot, SessionStore, hash_token
from gateway.store.memory import MemoryStore

__all__ = ["MemoryStore", "ResumeRecord", "SessionSnapshot", "SessionStore", "hash_token"]
