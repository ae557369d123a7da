"""``GATEWAY_HOLDING_CUE`` and the line the model is asked to say (``holding``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["NO_HOLDING", "CueSetting", "HoldingPolicy"]

CueSetting = Literal["auto", "line", "tone", "off"]


@dataclass(frozen=True, slots=True)
class HoldingPolicy:
    """Off unless a session is given the settings' (``GATEWAY_HOLDING_CUE``/``_LINE``)."""

    cue: CueSetting = "off"
    line: str = ""


NO_HOLDING = HoldingPolicy()
