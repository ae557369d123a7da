"""The protocol's extension for routing (``docs/protocol.md`` 10.20, ``docs/routing.md``).

- ``session.provider_changed``: the session moved to another upstream of its model alias
  without the client reconnecting (a failover): ``provider``, ``model`` (null: the provider's
  configured one), ``reason`` (``connect``, ``lost``, ``closed``, ``stall_first_output``,
  ``stall_mid_response``) and ``previous`` (the target it left, ``provider/model``). A reply
  that was being spoken ends with ``response.done`` status ``interrupted`` before it; what the
  user said that the previous upstream had not answered is answered by the new one. A client
  may ignore it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .json_types import JsonObject

__all__ = ["ProviderChanged"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderChanged:
    TYPE: ClassVar[str] = "session.provider_changed"

    provider: str
    model: str | None
    reason: str
    previous: str

    def to_dict(self) -> JsonObject:
        return {
            "type": self.TYPE,
            "provider": self.provider,
            "model": self.model,
            "reason": self.reason,
            "previous": self.previous,
        }
