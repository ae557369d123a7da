"""What a new target is given of what the previous one owed (a failover): the user's audio
since the last completed reply, replayed in the new provider's format, and the turn it owed
an answer to, asked again the way it was asked: the user's speech ended again (a commit with
push-to-talk, else enough silence for the provider's own detector), a typed message sent again,
tool results given again as late results (it did not make those calls), or a plain request to
answer (a reply the loss cut)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from gateway.routing.utterance import Format, Utterance, silence
from transports.base import ToolResult, Transport

__all__ = ["END_OF_TURN_S", "Handover", "TurnKind", "replay"]

# After a replayed utterance whose turn had ended: enough silence for any detector to end it.
END_OF_TURN_S = 1.0

# What the model was last given to answer: the user's speech (or push-to-talk commit), a typed
# message, tool results, or a plain request.
TurnKind = Literal["speech", "text", "results", "request"]


async def replay(new: Transport, said: Utterance, fmt: Format) -> bool:
    """What the user said since the last completed reply, to ``new`` in ``fmt``; False when
    there was nothing."""
    if not len(said):
        return False
    for pcm in said.as_format(fmt):
        if pcm:
            await new.send_audio(pcm)
    return True


@dataclass(frozen=True, slots=True)
class Handover:
    kind: TurnKind | None  # what the previous target was last given to answer
    given: Sequence[ToolResult]  # results given to it since its last completed reply
    unanswered: Sequence[str]  # the user's messages no reply followed
    manual_turns: bool  # push-to-talk: only a commit ends the user's turn

    async def ask_again(self, new: Transport, fmt: Format, *, replayed: bool) -> TurnKind:
        """Ask ``new`` for what was owed, as it was asked; what it now owes."""
        if self.kind == "speech" and replayed:
            if self.manual_turns:
                await new.commit_audio(respond=True)
            else:  # its own detector ends the turn, as the previous one's did
                await new.send_audio(silence(END_OF_TURN_S, fmt))
            return "speech"
        if self.kind == "text" and self.unanswered:
            await new.send_text("\n".join(self.unanswered))
            return "text"
        if self.kind == "results" and self.given:
            for result in self.given:  # it did not make these calls: it hears them as news
                await new.send_late_result(result)
            return "results"
        # A reply the loss cut, or a request: the conversation it was given is enough.
        await new.request_response()
        return "request"
