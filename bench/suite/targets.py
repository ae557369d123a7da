"""The targets of the benchmark suite and the load generator's arguments for each: pure.

Every target relays the same upstream, the OpenAI Realtime fake in echo mode (each
``input_audio_buffer.append`` answered by one ``response.output_audio.delta`` with the same
audio). Frames are 20 ms of PCM16; the Go load generator (``bench/goload``, see
``bench.goload_runner``) speaks one of three client protocols to reach it:

- ``openai``: OpenAI Realtime events (``direct``, ``floor``, ``litellm``, and
  ``gateway_compat``: this gateway's own ``/v1/realtime``, which first sends a ``session.update``
  as a GA client does);
- ``gateway``: our client protocol, ``session.start`` then binary PCM both ways;
- ``pcm``: raw binary PCM both ways (Pipecat behind a raw serializer).

A frame is matched by its stamp when it comes back byte-identical, or by bytes when the relay
may re-chunk or resample it (frame k is back once (k+1) × out-frame-bytes have arrived).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import orjson

__all__ = [
    "ALL_TARGETS",
    "BASELINE_ROWS",
    "DEFAULT_TARGETS",
    "FRAME_MS",
    "OPTIONAL_TARGETS",
    "REDIS_TARGETS",
    "SPECS",
    "TargetSpec",
    "compat_session_update",
    "gateway_start",
    "load_args",
    "pingpong_args",
]

FRAME_MS = 20
COMPAT_MODEL = "gpt-realtime"  # gateway_compat: a gpt-… model picks the OpenAI upstream
Proto = Literal["openai", "gateway", "pcm"]
Match = Literal["stamp", "bytes"]


def _frame_bytes(rate_hz: int) -> int:
    return rate_hz * 2 * FRAME_MS // 1000


def gateway_start(input_rate: int, output_rate: int) -> str:
    """Our client protocol's ``session.start`` for a voice session at these rates."""
    audio = {"input_rate": input_rate, "output_rate": output_rate}
    return orjson.dumps({"type": "session.start", "mode": "voice", "audio": audio}).decode()


def compat_session_update() -> str:
    """The ``session.update`` a GA client sends to ``/v1/realtime`` before its audio: PCM16 at
    24 kHz both ways (the endpoint's only format, so the gateway resamples neither way) and no
    turn detection (the endpoint shows it back without applying it; the fake in echo mode runs
    no VAD whatever it is told, and answers every append with its audio, commit or not)."""
    pcm = {"type": "audio/pcm", "rate": 24000}
    audio = {"input": {"format": pcm, "turn_detection": None}, "output": {"format": pcm}}
    session = {"type": "realtime", "output_modalities": ["audio"], "audio": audio}
    return orjson.dumps({"type": "session.update", "session": session}).decode()


@dataclass(frozen=True)
class TargetSpec:
    name: str
    proto: Proto
    process: str  # the relaying process: a key of the fleet's processes
    title: str  # one line for the table's notes
    match: Match = "stamp"
    input_rate: int = 24000
    output_rate: int = 24000
    deflate: bool = False  # the client offers permessage-deflate
    paced: bool = False  # output paced like playback: a round trip is at least one frame
    # Frames a session's tail may never complete by bytes: a streaming resampler holds back
    # part of the last input until more comes (none does at the end of a run), so serial
    # round trips cannot be measured either (``pingpong`` is skipped).
    held_back_frames: int = 0
    # compression on each hop, as configured (the client hop is also probed at start)
    compression: tuple[tuple[str, str], ...] = ()
    path: str = "/v1/session"  # on a gateway process: where the client connects
    session_update: str | None = None  # openai: sent once session.created has come

    @property
    def pingpong(self) -> bool:
        return self.held_back_frames == 0

    @property
    def frame_bytes(self) -> int:
        return _frame_bytes(self.input_rate)

    @property
    def out_frame_bytes(self) -> int:
        return _frame_bytes(self.output_rate)

    @property
    def start(self) -> str | None:
        if self.proto != "gateway":
            return None
        return gateway_start(self.input_rate, self.output_rate)


_OFF = "off"
_FAKE_HOP = ("relay → fake", "off (the relay offers none; the fake would accept it)")

SPECS: dict[str, TargetSpec] = {
    spec.name: spec
    for spec in (
        TargetSpec(
            "direct",
            "openai",
            "fake",
            "client straight to the fake: the physical limit",
            compression=(("client → fake", _OFF),),
        ),
        TargetSpec(
            "floor",
            "openai",
            "floor",
            "a bare verbatim websockets relay (bench/peers/floor_relay.py)",
            compression=(("client → floor", _OFF), _FAKE_HOP),
        ),
        TargetSpec(
            "litellm",
            "openai",
            "litellm",
            "LiteLLM's proxy relaying /v1/realtime",
            compression=(
                ("client → litellm", "off (uvicorn: ws_per_message_deflate=False)"),
                ("litellm → fake", "off (websockets.connect defaulted to compression=None)"),
            ),
        ),
        TargetSpec(
            "pipecat",
            "pcm",
            "pipecat",
            "Pipecat OpenAIRealtimeLLMService behind FastAPIWebsocketTransport, raw PCM; "
            "default output pacing",
            match="bytes",
            paced=True,
            compression=(
                ("client → pipecat", "off (uvicorn: ws_per_message_deflate=False)"),
                ("pipecat → fake", "off (its websocket_connect given compression=None)"),
            ),
        ),
        TargetSpec(
            "pipecat_nopace",
            "pcm",
            "pipecat_nopace",
            "the same with the playback-clock sleep removed",
            match="bytes",
            compression=(
                ("client → pipecat", "off (uvicorn: ws_per_message_deflate=False)"),
                ("pipecat → fake", "off (its websocket_connect given compression=None)"),
            ),
        ),
        TargetSpec(
            "gateway",
            "gateway",
            "gateway",
            "ours: binary client frames, 24 kHz in and out (no resampling)",
            compression=(
                ("client → gateway", _OFF),
                ("gateway → fake", "off (the openai SDK's default)"),
            ),
        ),
        TargetSpec(
            "gateway_compat",
            "openai",
            "gateway",
            "ours: /v1/realtime, OpenAI's GA protocol (base64 JSON both ways) to the OpenAI "
            "upstream; a session.update first",
            path=f"/v1/realtime?model={COMPAT_MODEL}",
            session_update=compat_session_update(),
            compression=(
                ("client → gateway", "off (aiohttp: compress=False on /v1/realtime)"),
                ("gateway → fake", "off (the openai SDK's default)"),
            ),
        ),
        TargetSpec(
            "gateway_16k",
            "gateway",
            "gateway",
            "ours at 16 kHz in, 24 kHz out (resampled; matched by bytes)",
            match="bytes",
            input_rate=16000,
            # gateway/audio/resample.py holds nothing back (a minimum-phase filter, every
            # output at once): serial round trips are measured as at 24 kHz.
            compression=(
                ("client → gateway", _OFF),
                ("gateway → fake", "off (the openai SDK's default)"),
            ),
        ),
        TargetSpec(
            "gateway_base",
            "gateway",
            "gateway_base",
            "ours at the baseline commit (--baseline REV): the same row, the code before",
            compression=(
                ("client → gateway", _OFF),
                ("gateway → fake", "off (the openai SDK's default)"),
            ),
        ),
        TargetSpec(
            "gateway_compat_base",
            "openai",
            "gateway_base",
            "gateway_compat at the baseline commit (--baseline REV): /v1/realtime measured "
            "against the code before, in the same run",
            path=f"/v1/realtime?model={COMPAT_MODEL}",
            session_update=compat_session_update(),
            compression=(
                ("client → gateway", "off (aiohttp: compress=False on /v1/realtime)"),
                ("gateway → fake", "off (the openai SDK's default)"),
            ),
        ),
        TargetSpec(
            "gateway_base_16k",
            "gateway",
            "gateway_base",
            "gateway_16k at the baseline commit (--baseline REV): a change to the resampler "
            "measured against the code before, in the same run",
            match="bytes",
            input_rate=16000,
            compression=(
                ("client → gateway", _OFF),
                ("gateway → fake", "off (the openai SDK's default)"),
            ),
        ),
        TargetSpec(
            "gateway_alias",
            "gateway",
            "gateway_alias",
            "ours on a model alias of two targets (GATEWAY_MODELS: OpenAI, then Gemini): the "
            "session's upstream is the routed transport that fails over (nothing fails here)",
            compression=(
                ("client → gateway", _OFF),
                ("gateway → fake", "off (the openai SDK's default)"),
            ),
        ),
        TargetSpec(
            "gateway_traced",
            "gateway",
            "gateway_traced",
            "ours with tracing on (OTEL_TRACES_EXPORTER=console: every span sampled and "
            "exported, to the process's log)",
            compression=(
                ("client → gateway", _OFF),
                ("gateway → fake", "off (the openai SDK's default)"),
            ),
        ),
        TargetSpec(
            "gateway_redis",
            "gateway",
            "gateway_redis",
            "ours with GATEWAY_REDIS_URL: sessions recorded in a local redis-server (scale)",
            compression=(
                ("client → gateway", _OFF),
                ("gateway → fake", "off (the openai SDK's default)"),
            ),
        ),
        TargetSpec(
            "gateway_w2",
            "gateway",
            "gateway_w2",
            "ours as gateway serve --workers 2 on Redis: two worker processes, one port (scale)",
            compression=(
                ("client → gateway", _OFF),
                ("gateway → fake", "off (the openai SDK's default)"),
            ),
        ),
        TargetSpec(
            "gateway_deflate",
            "gateway",
            "gateway",
            "ours with the client offering permessage-deflate",
            deflate=True,
            compression=(
                ("client → gateway", "offered by the client; see the probe for what was agreed"),
                ("gateway → fake", "off (the openai SDK's default)"),
            ),
        ),
    )
}
ALL_TARGETS: tuple[str, ...] = tuple(SPECS)
# Rows not run by default: ``gateway_base`` needs ``--baseline REV``; the Redis rows belong to
# ``scripts/bench scale``; ``gateway_traced`` is asked for beside ``gateway`` (tracing's cost).
OPTIONAL_TARGETS = frozenset(
    {
        "gateway_base",
        "gateway_compat_base",
        "gateway_base_16k",
        "gateway_redis",
        "gateway_w2",
        "gateway_traced",
        "gateway_alias",
    }
)
# With ``--baseline REV``: our rows that get the row measuring them at REV right after them
# (``gateway_base_16k`` is asked for by name).
BASELINE_ROWS: dict[str, str] = {"gateway": "gateway_base", "gateway_compat": "gateway_compat_base"}
# The gateway rows that share sessions through Redis, and their worker processes.
REDIS_TARGETS = {"gateway_redis": 1, "gateway_w2": 2}
DEFAULT_TARGETS: tuple[str, ...] = tuple(t for t in SPECS if t not in OPTIONAL_TARGETS)


def _common_args(spec: TargetSpec, url: str, headers: list[str], warmup: int) -> list[str]:
    args = ["-url", url, "-proto", spec.proto, "-match", spec.match]
    args += ["-frame-bytes", str(spec.frame_bytes), "-out-frame-bytes", str(spec.out_frame_bytes)]
    args += ["-warmup", str(warmup)]
    for header in headers:
        args += ["-header", header]
    if spec.start is not None:
        args += ["-start", spec.start]
    if spec.session_update is not None:
        args += ["-session-update", spec.session_update]
    if spec.deflate:
        args.append("-deflate")
    return args


def pingpong_args(
    spec: TargetSpec, url: str, headers: list[str], rounds: int, warmup: int, timeout_s: float
) -> list[str]:
    """``goload pingpong``: ``rounds`` serial round trips after ``warmup`` unmeasured ones."""
    common = _common_args(spec, url, headers, warmup)
    return ["pingpong", *common, "-n", str(rounds), "-timeout", f"{timeout_s:.0f}s"]


def load_args(
    spec: TargetSpec,
    url: str,
    headers: list[str],
    *,
    sessions: int,
    fps: float,
    seconds: float,
    warmup: int,
    grace_s: float,
    timeout_s: float,
) -> list[str]:
    """``goload load``: ``sessions`` × ``fps`` for ``seconds`` after ``warmup`` frames each."""
    args = ["load", *_common_args(spec, url, headers, warmup)]
    args += ["-c", str(sessions), "-rate", f"{fps:g}", "-dur", f"{seconds:g}"]
    return [*args, "-grace", f"{grace_s:g}s", "-timeout", f"{timeout_s:.0f}s"]
