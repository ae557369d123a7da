"""The protocol's extensions for keys and budgets (``docs/protocol.md`` 10.19, ``docs/keys.md``).

- ``budget.warning``: a limit of the session's key, user or team has passed its soft fraction
  (80 % by default): ``scope`` (``key``, ``user`` or ``team``), ``metric`` (``spend``,
  ``tokens``, ``minutes``), ``window`` (``day`` or ``month``), ``used`` and ``limit`` (spend in
  the price table's currency, minutes in minutes), ``resets_at`` (UTC). Sent once per limit per
  session; the model is asked to wrap up at the user's next turn.
- ``session.ended`` with reason ``budget_exhausted`` carries ``budget``: the limit that ran out,
  in the same shape; reason ``key_revoked``: the session's key was revoked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from .json_types import JsonObject

__all__ = ["BudgetWarning"]


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetWarning:
    TYPE: ClassVar[str] = "budget.warning"

    limit: JsonObject  # scope, metric, window, used, limit, resets_at

    def to_dict(self) -> JsonObject:
        return {"type": self.TYPE, **self.limit}
