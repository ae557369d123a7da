"""When the gateway may put a ``clientContent`` of its own before Gemini Live. Pure.

A ``clientContent`` cuts the turn the server is in, whatever it is: a reply being given, a reply
it owes (to a text or tool results just sent, to a ``toolCall`` it made), or a turn held by
BLOCKING calls, whose ids it then cancels (``toolCallCancellation``): their results, however
ready, can no longer be given. So what the gateway adds on its own (a late or orphaned tool
result as a turn, a silent result or a pending message as context) waits while a turn is in
progress and goes once it is over (``turnComplete``): the context frames, then one turn (a turn
is a reply, which must end before the next one starts).

The user's text does cut the turn (that is barge-in): context frames waiting go just before it
(they were meant for the start of the user's turn), and the ``interrupted`` it causes is ours,
not the user speaking. The turn it cut then completes, but the reply to the text is still due.
"""

from __future__ import annotations

__all__ = ["TurnGate", "starts_turn"]


def starts_turn(frame: str) -> bool:
    """A ``clientContent`` the model answers (``turnComplete: true``), as ``wire`` builds it."""
    return frame.startswith('{"clientContent"') and frame.endswith('"turnComplete":true}}')


class TurnGate:
    def __init__(self) -> None:
        self.waiting: list[str] = []  # our own frames, until the turn in progress is over
        # A server turn is in progress, which its output may not show yet: we asked for a reply
        # (a text, tool results) or the model called tools; until its turnComplete.
        self.reply_due = False
        self.own_interrupts = 0  # frames we sent that cut a turn: their `interrupted` is ours
        self._cut_by_us = False  # the turn ending now was cut by one of our frames

    def sent(self, *, cuts: bool) -> None:
        """A turn of ours went out; ``cuts``: the server was in a turn, which it cuts."""
        self.reply_due = True
        if cuts:
            self.own_interrupts += 1

    def place(self, frame: str, *, busy: bool) -> list[str]:
        """One of our own frames (a turn, or context): what to send now (it, or nothing while
        the server is ``busy`` in a turn: it waits)."""
        if busy:
            self.waiting.append(frame)
            return []
        if starts_turn(frame):
            self.reply_due = True
        return [frame]

    def sent_back_to_back(self, frames: list[str]) -> None:
        """A new connection's first frames: each turn after the first cuts the one before."""
        for n in range(sum(1 for frame in frames if starts_turn(frame))):
            self.sent(cuts=n > 0)

    def interrupted(self) -> bool:
        """An ``interrupted``: True when one of our frames caused it (not the user speaking)."""
        if not self.own_interrupts:
            return False
        self.own_interrupts -= 1
        self._cut_by_us = True
        return True

    def turn_complete(self) -> None:
        if not self._cut_by_us:
            self.reply_due = False  # else the reply to what cut it is still to come
        self._cut_by_us = False
        self.own_interrupts = 0

    def ready(self) -> list[str]:
        """What waited, to send now that no turn is in progress: the context frames up to and
        including one turn."""
        frames: list[str] = []
        while self.waiting:
            frame = self.waiting.pop(0)
            frames.append(frame)
            if starts_turn(frame):
                self.reply_due = True
                break
        return frames

    def context_before_user(self) -> list[str]:
        """The context frames waiting, taken out to go just before the user's text."""
        context = [f for f in self.waiting if not starts_turn(f)]
        self.waiting = [f for f in self.waiting if starts_turn(f)]
        return context

    def connection_lost(self) -> list[str]:
        """Everything waiting (for the next connection, in order); no turn is in progress."""
        frames, self.waiting = self.waiting, []
        self.reply_due = False
        self.own_interrupts = 0
        self._cut_by_us = False
        return frames
