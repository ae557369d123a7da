"""The microphone track's receive buffer: every packet decoded as it arrives, in order.

aiortc's audio jitter buffer holds four packets before it lets the first go (80 ms on every
word the user says, and on the end of speech the model waits for), and a lost packet stalls it
until its 16 slots overflow (about 300 ms, then a burst: aiortc#543). For speech into a model
the gateway wants neither: ``InOrderAudio`` hands each Opus packet to the decoder the moment it
arrives, a gap is counted as lost at once (the decoder simply goes on: 20 ms missing), and a
packet older than one already decoded is dropped as late. A network that reorders packets
loses a frame where aiortc's buffer would have waited; on the paths WebRTC voice takes that is
rare, and the user's next words are never held back for it.

``use_in_order_audio`` puts it in place of the receiver's own buffer, before any packet
arrives. aiortc keeps that buffer private: when it is not where this version (1.16) has it,
the receiver keeps its own and a warning says so, nothing breaks.
"""

from __future__ import annotations

from typing import Any

import structlog
from aiortc.jitterbuffer import JitterBuffer, JitterFrame
from aiortc.rtp import RtpPacket
from aiortc.utils import uint16_add, uint16_gt

__all__ = ["InOrderAudio", "use_in_order_audio"]

_log = structlog.get_logger("webrtc")
_RECEIVERS_BUFFER = "_RTCRtpReceiver__jitter_buffer"  # aiortc 1.16's name for it


class InOrderAudio(JitterBuffer):
    def __init__(self) -> None:
        super().__init__(capacity=16)
        self._next: int | None = None  # the sequence number expected next
        self.lost = 0
        self.late = 0

    def add(self, packet: RtpPacket) -> tuple[bool, JitterFrame | None]:
        sequence = packet.sequence_number
        if self._next is not None and sequence != self._next:
            if uint16_gt(self._next, sequence):
                self.late += 1  # older than what was decoded: too late to be of use
                return False, None
            self.lost += uint16_add(sequence, -self._next)
        self._next = uint16_add(sequence, 1)
        data: bytes = getattr(packet, "_data", b"")  # the receiver's depayloaded frame
        return False, JitterFrame(data=data, timestamp=packet.timestamp)


def use_in_order_audio(receiver: Any) -> InOrderAudio | None:
    """The receiver's audio buffer replaced (call it as its track appears); None if this aiortc
    keeps it elsewhere."""
    if not isinstance(getattr(receiver, _RECEIVERS_BUFFER, None), JitterBuffer):
        _log.warning("webrtc_jitter_buffer_kept", reason="aiortc's receiver has no buffer here")
        return None
    buffer = InOrderAudio()
    setattr(receiver, _RECEIVERS_BUFFER, buffer)
    return buffer
