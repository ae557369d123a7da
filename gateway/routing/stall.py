"""When an upstream counts as stalled. Pure: times are passed in.

After the user's turn ends (or tool results are given back) the model owes a first output
(audio, text or a tool call) within ``first_output_s``; once a response is producing, it may not
fall silent for longer than ``gap_s`` before it is done. The user talking, a cancel or the end of
the response owe nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Stall", "StallWatch"]

Stall = Literal["stall_first_output", "stall_mid_response"]


@dataclass(slots=True)
class StallWatch:
    first_output_s: float
    gap_s: float
    # Set while an output is owed: when the turn ended (no output since).
    owed_since: float | None = None
    # Set while a response is producing: when its last output came.
    last_output: float | None = None

    def turn_ended(self, now: float) -> None:
        """The user's turn ended, or the model was given what it waits for: it owes an answer
        (unless it is already producing one)."""
        if self.last_output is None and self.owed_since is None:
            self.owed_since = now

    def output(self, now: float) -> None:
        self.owed_since = None
        self.last_output = now

    def response_done(self) -> None:
        self.owed_since = None
        self.last_output = None

    def quiet(self) -> None:
        """Nothing is owed: the user is talking, or the response was cancelled."""
        self.owed_since = None
        self.last_output = None

    @property
    def deadline(self) -> float | None:
        if self.owed_since is not None:
            return self.owed_since + self.first_output_s
        if self.last_output is not None:
            return self.last_output + self.gap_s
        return None

    def stalled(self, now: float) -> Stall | None:
        if self.owed_since is not None and now >= self.owed_since + self.first_output_s:
            return "stall_first_output"
        if self.last_output is not None and now >= self.last_output + self.gap_s:
            return "stall_mid_response"
        return None
