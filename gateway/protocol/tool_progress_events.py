"""The protocol's extensions for tools that take time (``docs/protocol.md`` 10.14).

- ``tool.slow``: a call the model waits for has run past the mode's soft limit; the caller is
  hearing a holding cue (``cue``: ``line``, a short sentence from the model that does not enter
  the conversation; ``tone``, a soft tone from the gateway; ``none``).
- ``tool.started.background``: the call runs in the background: the model was told it started
  and the conversation goes on; ``tool.finished`` comes when its work ends, and its result
  enters the conversation then.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from .json_types import JsonObject

__all__ = ["HoldingCue", "ToolSlow"]

HoldingCue = Literal["line", "tone", "none"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSlow:
    TYPE: ClassVar[str] = "tool.slow"

    call_id: str
    name: str
    elapsed_ms: int
    soft_limit_ms: int
    cue: HoldingCue

    def to_dict(self) -> JsonObject:
        return {
            "type": self.TYPE,
            "call_id": self.call_id,
            "name": self.name,
            "elapsed_ms": self.elapsed_ms,
            "soft_limit_ms": self.soft_limit_ms,
            "cue": self.cue,
        }
