"""The four ways a lane of the latency bench talks: what it sends first, how a frame goes out,
which incoming message carries reply audio.

- ``OpenAIDirect``: OpenAI Realtime straight to the fake; ``session.update`` first, the same
  session the gateway asks for (server VAD with its defaults, input transcription, audio out),
  in PCM16 24 kHz or, for the phone baseline, ``audio/pcmu`` both ways;
- ``GeminiDirect``: Gemini Live straight to the fake (``wss://``), a ``setup`` like the gateway's
  (audio out, both transcriptions, resumption, context compression), PCM16 16 kHz in;
- ``GatewayBrowser``: the gateway's client protocol on ``/v1/session``, ``session.start`` in
  voice mode at one rate both ways, binary PCM16 frames;
- ``TwilioPhone``: the gateway's ``/twilio/media`` as Twilio drives it: the voice webhook hands
  out the stream token (``prepare``), then ``connected``, ``start``, numbered ``media`` frames of
  µ-law; every ``mark`` is echoed at once, ``stop`` ends the call.

The other carriers' phones, on ``/phone/media``, are in ``bench.latency.carrier_peers``.

``encode`` and ``hear`` are pure (unit-tested); only ``prepare`` and ``handshake`` do I/O.
The clients are the measuring instrument and share a core with the fake, so a direct lane does
not parse the many upstream events that cannot carry audio (a substring test first): through
the gateway that work is the gateway's, on its own core, and a direct lane that paid it would
look slower than it is.
"""

from __future__ import annotations

import asyncio
import base64
import secrets
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson
from websockets.asyncio.client import ClientConnection

from bench.latency.audio import WireFormat
from bench.relay.targets import GEMINI_MODEL, GeminiDirectCodec, OpenAIDirectCodec

__all__ = [
    "GatewayBrowser",
    "GeminiDirect",
    "Heard",
    "OpenAIDirect",
    "Peer",
    "TwilioPhone",
    "gemini_direct_setup",
    "openai_session_update",
    "stream_token_from_twiml",
]

TRANSCRIPTION_MODEL = "gpt-4o-mini-transcribe"  # the gateway's (transports.openai_realtime.wire)


@dataclass(frozen=True)
class Heard:
    audio: bool = False  # the message carries reply audio
    replies: tuple[str, ...] = ()  # what the client answers at once (Twilio's mark echoes)


class Peer(Protocol):
    @property
    def url(self) -> str: ...

    @property
    def headers(self) -> dict[str, str]: ...

    @property
    def events(self) -> Counter[str]:  # errors and other notable messages, by kind
        ...

    async def prepare(self) -> None: ...

    async def handshake(self, ws: ClientConnection) -> None: ...

    # the message that carries ``frame``; None: held, to leave with a later frame (a carrier
    # that streams longer chunks than the lanes' 20 ms frames)
    def encode(self, frame: bytes) -> str | bytes | None: ...

    def hear(self, message: str | bytes) -> Heard: ...

    def goodbye(self) -> list[str]: ...


_AUDIO = Heard(audio=True)
_NOTHING = Heard()


async def _wait_for(ws: ClientConnection, wanted: str, key: str = "type") -> None:
    """Read until a JSON message whose ``key`` is ``wanted`` (the caller bounds the wait)."""
    while True:
        message = await ws.recv()
        event = orjson.loads(message)
        if not isinstance(event, dict):
            continue
        if event.get(key) == wanted:
            return
        if event.get(key) in ("error", "session.ended"):
            raise RuntimeError(f"waiting for {wanted}: {str(message)[:300]}")


def openai_session_update(wire: WireFormat) -> dict[str, Any]:
    """The ``session.update`` of the direct OpenAI lanes: the gateway's voice session, in
    ``wire``'s format both ways."""
    audio_format = (
        {"type": "audio/pcmu"} if wire == "pcmu" else {"type": "audio/pcm", "rate": 24000}
    )
    return {
        "type": "session.update",
        "session": {
            "type": "realtime",
            "output_modalities": ["audio"],
            "audio": {
                "input": {
                    "format": audio_format,
                    "turn_detection": {
                        "type": "server_vad",
                        "create_response": True,
                        "interrupt_response": True,
                    },
                    "transcription": {"model": TRANSCRIPTION_MODEL},
                },
                "output": {"format": dict(audio_format)},
            },
        },
    }


@dataclass
class OpenAIDirect:
    url: str  # ws://…/v1/realtime?model=…
    wire: WireFormat
    headers: dict[str, str] = field(default_factory=lambda: {"Authorization": "Bearer sk-bench"})
    events: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self._codec = OpenAIDirectCodec(self.events)

    async def prepare(self) -> None:
        pass

    async def handshake(self, ws: ClientConnection) -> None:
        await _wait_for(ws, "session.created")
        await ws.send(orjson.dumps(openai_session_update(self.wire)).decode())
        await _wait_for(ws, "session.updated")

    def encode(self, frame: bytes) -> str:
        return self._codec.encode(frame)  # base64 of the wire bytes, whatever the format

    def hear(self, message: str | bytes) -> Heard:
        text = message if isinstance(message, str) else message.decode()
        if "output_audio.delta" not in text and '"error"' not in text:
            return _NOTHING  # most of the upstream's events: not parsed
        return _AUDIO if any(self._codec.decode(text)) else _NOTHING

    def goodbye(self) -> list[str]:
        return []


def gemini_direct_setup(model: str = GEMINI_MODEL) -> str:
    """The direct Gemini lanes' ``setup``: what the gateway's voice session asks for."""
    setup = {
        "model": f"models/{model}",
        "generationConfig": {"responseModalities": ["AUDIO"]},
        "inputAudioTranscription": {},
        "outputAudioTranscription": {},
        "sessionResumption": {},
        "contextWindowCompression": {"slidingWindow": {}},
    }
    return orjson.dumps({"setup": setup}).decode()


@dataclass
class GeminiDirect:
    url: str  # wss://…/ws/…BidiGenerateContent
    headers: dict[str, str] = field(default_factory=lambda: {"x-goog-api-key": "bench"})
    events: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self._codec = GeminiDirectCodec(self.events)  # realtimeInput at 16 kHz

    async def prepare(self) -> None:
        pass

    async def handshake(self, ws: ClientConnection) -> None:
        await ws.send(gemini_direct_setup())
        while "setupComplete" not in orjson.loads(await ws.recv()):
            pass

    def encode(self, frame: bytes) -> str:
        return self._codec.encode(frame)

    def hear(self, message: str | bytes) -> Heard:
        data = message if isinstance(message, bytes) else message.encode()
        if b"inlineData" not in data and b"goAway" not in data:
            return _NOTHING  # transcriptions, turn ends, resumption handles: not parsed
        return _AUDIO if any(self._codec.decode(data)) else _NOTHING

    def goodbye(self) -> list[str]:
        return []


@dataclass
class GatewayBrowser:
    url: str  # ws://…/v1/session
    rate: int  # input and output
    headers: dict[str, str] = field(default_factory=dict)
    events: Counter[str] = field(default_factory=Counter)

    async def prepare(self) -> None:
        pass

    async def handshake(self, ws: ClientConnection) -> None:
        audio = {"input_rate": self.rate, "output_rate": self.rate}
        start = {"type": "session.start", "mode": "voice", "audio": audio}
        await ws.send(orjson.dumps(start).decode())  # text: a binary frame is audio
        await _wait_for(ws, "session.started")

    def encode(self, frame: bytes) -> bytes:
        return frame

    def hear(self, message: str | bytes) -> Heard:
        if isinstance(message, bytes):
            return _AUDIO if message else _NOTHING
        event = orjson.loads(message)
        kind = event.get("type")
        if kind == "error":
            self.events[f"error:{event.get('code')}"] += 1
        elif kind == "session.ended":
            self.events[f"session.ended:{event.get('reason')}"] += 1
        return _NOTHING

    def goodbye(self) -> list[str]:
        return ['{"type":"session.end"}']


def stream_token_from_twiml(twiml: str) -> str:
    """The ``token`` ``<Parameter>`` of the voice webhook's ``<Connect><Stream>`` (empty with
    the gateway's auth off: the stream is then not checked)."""
    root = ET.fromstring(twiml)
    for parameter in root.iter("Parameter"):
        if parameter.get("name") == "token":
            return str(parameter.get("value", ""))
    raise ValueError(f"no stream token in the TwiML: {twiml[:300]}")


def _post_voice_webhook(http_url: str, call_sid: str) -> str:
    body = urllib.parse.urlencode({"CallSid": call_sid, "From": "+15550001111"}).encode()
    request = urllib.request.Request(f"{http_url}/twilio/voice", data=body, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:
        text: str = response.read().decode()
    return text


@dataclass
class TwilioPhone:
    http_url: str  # the gateway's http://…
    headers: dict[str, str] = field(default_factory=dict)
    events: Counter[str] = field(default_factory=Counter)
    call_sid: str = field(default_factory=lambda: "CA" + secrets.token_hex(16))
    stream_sid: str = field(default_factory=lambda: "MZ" + secrets.token_hex(16))
    _token: str = ""
    _chunks: int = 0

    @property
    def url(self) -> str:
        return self.http_url.replace("http://", "ws://", 1) + "/twilio/media"

    async def prepare(self) -> None:
        twiml = await asyncio.to_thread(_post_voice_webhook, self.http_url, self.call_sid)
        self._token = stream_token_from_twiml(twiml)

    async def handshake(self, ws: ClientConnection) -> None:
        connected = {"event": "connected", "protocol": "Call", "version": "1.0.0"}
        await ws.send(orjson.dumps(connected).decode())  # Twilio sends text frames only
        start = {
            "accountSid": "AC" + "0" * 32,
            "streamSid": self.stream_sid,
            "callSid": self.call_sid,
            "tracks": ["inbound"],
            "customParameters": {"token": self._token},
            "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": 8000, "channels": 1},
        }
        await ws.send(self._message("start", sequenceNumber="1", start=start))

    def encode(self, frame: bytes) -> str:
        self._chunks += 1
        media = {
            "track": "inbound",
            "chunk": str(self._chunks),
            "timestamp": str(self._chunks * 20),
            "payload": base64.b64encode(frame).decode("ascii"),
        }
        return self._message("media", sequenceNumber=str(self._chunks + 1), media=media)

    def hear(self, message: str | bytes) -> Heard:
        event = orjson.loads(message)
        kind = event.get("event")
        if kind == "media":
            return _AUDIO if event.get("media", {}).get("payload") else _NOTHING
        if kind == "mark":  # played at once, as far as this caller is concerned
            return Heard(replies=(self._message("mark", mark=event.get("mark", {})),))
        self.events[f"twilio:{kind}"] += 1
        return _NOTHING

    def goodbye(self) -> list[str]:
        return [self._message("stop", stop={"accountSid": "AC", "callSid": self.call_sid})]

    def _message(self, event: str, **body: Any) -> str:
        return orjson.dumps({"event": event, "streamSid": self.stream_sid, **body}).decode()
