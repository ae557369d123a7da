"""Where a ``CompatBridge``'s audio goes when it is not the client's ``response.output_audio.delta``
events: a WebRTC call's reply track (``track_playout.TrackPlayout``), as on OpenAI's WebRTC
interface, where the audio is the track's and the data channel carries everything else.

The bridge calls the sink in the session's order (``Outbound(ordered=True)``): ``audio`` with each
frame of the session's audio (PCM16, 24 kHz) once the translator has opened the response's item
and part for it, ``after_event`` after each session event is translated (with what it became),
and ``clear`` for the client's ``output_audio_buffer.clear``. Each returns the GA server events it
adds (``output_audio_buffer.*``), which the bridge sends after the translator's.
"""

from __future__ import annotations

from typing import Protocol

from gateway.edges.realtime.server_wire import ServerEvent
from gateway.protocol import ServerEvent as GatewayEvent

__all__ = ["AudioSink"]


class AudioSink(Protocol):
    def audio(self, pcm: bytes) -> list[ServerEvent]: ...

    def after_event(
        self, event: GatewayEvent, translated: list[ServerEvent]
    ) -> list[ServerEvent]: ...

    def clear(self) -> list[ServerEvent]: ...
