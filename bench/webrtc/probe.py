"""The gateway, with the bench's own window into it: ``python -m bench.webrtc.probe``.

The gateway exposes no count of its asyncio tasks or of its live aiortc objects (``/metrics``
has its open sessions and peer connections, not what a closed one may leave), so ``scripts/bench
webrtc`` runs it through this wrapper: exactly ``gateway serve`` (``gateway.app.run``, same
settings, same loop), plus a thread that answers ``GET /counts`` on
``127.0.0.1:$BENCH_PROBE_PORT``. The thread does nothing until asked; the counting runs on the
gateway's loop (``call_soon_threadsafe``), after a full collection:

- ``tasks``: ``asyncio.all_tasks`` of the gateway's loop, and the 12 commonest coroutines;
- ``objects``: live instances, by class, of what a WebRTC call is made of (aiortc's peer
  connection, transports, senders, receivers, tracks, data channels; the Opus codecs; the
  edge's call, link and reply track, and the gateway's ``Session``), found with
  ``gc.get_objects`` (objects made before the gateway froze its start-up heap,
  ``gateway.app.tune_gc``, are not seen: no call exists then);
- ``threads``: by name (aiortc decodes each received track in a thread of its own).

It is a bench instrument, not the gateway's: what the gateway itself should expose is listed
in ``docs/performance.md`` (section 6, WebRTC).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import json
import os
import sys
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["count_live"]

_loop: asyncio.AbstractEventLoop | None = None


# The gateway's own classes of a call, wherever the edge keeps them (it is being reworked):
# looked up in the modules already loaded, never imported here (the edge loads aiortc at the
# first offer, not at start).
_GATEWAY_CLASSES = (
    ("gateway.edges.webrtc.call", "NativeCall"),
    ("gateway.edges.webrtc.routes", "_Call"),
    ("gateway.edges.rtc.peer", "PeerLink"),
    ("gateway.edges.rtc.audio_out", "PcmOutTrack"),
    ("gateway.edges.webrtc.audio_out", "PcmOutTrack"),
    ("gateway.session", "Session"),
)
_AIORTC_CLASSES = (
    "RTCPeerConnection",
    "RTCIceGatherer",
    "RTCIceTransport",
    "RTCDtlsTransport",
    "RTCSctpTransport",
    "RTCDataChannel",
    "RTCRtpTransceiver",
    "RTCRtpSender",
    "RTCRtpReceiver",
)


def _watched() -> dict[str, type]:
    found: dict[str, type] = {}
    aiortc = sys.modules.get("aiortc")
    if aiortc is not None:
        for name in _AIORTC_CLASSES:
            found[name] = getattr(aiortc, name)
        found["MediaStreamTrack"] = sys.modules["aiortc.mediastreams"].MediaStreamTrack
        opus = sys.modules.get("aiortc.codecs.opus")
        if opus is not None:
            found["OpusEncoder"], found["OpusDecoder"] = opus.OpusEncoder, opus.OpusDecoder
    for module_name, name in _GATEWAY_CLASSES:
        cls = getattr(sys.modules.get(module_name), name, None)
        if isinstance(cls, type):
            found[name] = cls
    return found


def _gauges() -> dict[str, Any]:
    """Counters the edge keeps itself, when it has them (``PeerLink.live``)."""
    link = getattr(sys.modules.get("gateway.edges.rtc.peer"), "PeerLink", None)
    live = getattr(link, "live", None)
    return {} if live is None else {"PeerLink.live": live}


def count_live() -> dict[str, Any]:
    """The counts, on the gateway's loop (the caller is)."""
    gc.collect()
    watched = _watched()
    objects: Counter[str] = Counter({name: 0 for name in watched})
    names_of: dict[type, list[str]] = {}  # per concrete class: the watched classes it is
    for obj in gc.get_objects():
        kind = type(obj)
        names = names_of.get(kind)
        if names is None:
            names = names_of[kind] = [n for n, cls in watched.items() if issubclass(kind, cls)]
        for name in names:
            objects[name] += 1
    tasks = asyncio.all_tasks()
    coroutines = Counter(getattr(t.get_coro(), "__qualname__", "?") for t in tasks)
    threads = Counter(thread.name.rstrip("0123456789_-") for thread in threading.enumerate())
    return {
        "tasks": len(tasks),
        "task_coroutines": dict(coroutines.most_common(12)),
        "objects": dict(objects),
        "threads": dict(threads),
        "gauges": _gauges(),
    }


def _counts_from_loop() -> dict[str, Any]:
    loop = _loop
    if loop is None:
        return {"error": "the gateway has not started"}
    answer: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()

    def on_loop() -> None:
        try:
            answer.set_result(count_live())
        except Exception as error:
            answer.set_result({"error": repr(error)})

    loop.call_soon_threadsafe(on_loop)
    return answer.result(timeout=30)


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps(_counts_from_loop()).encode()
        self.send_response(200 if self.path == "/counts" else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def main() -> int:
    import gateway.app as gateway_app

    tune_gc = gateway_app.tune_gc

    def capture_loop_then_tune() -> None:  # called once, on the loop, once it listens
        global _loop
        _loop = asyncio.get_running_loop()
        tune_gc()

    gateway_app.tune_gc = capture_loop_then_tune
    server = ThreadingHTTPServer(("127.0.0.1", int(os.environ["BENCH_PROBE_PORT"])), _Handler)
    threading.Thread(target=server.serve_forever, name="bench-probe", daemon=True).start()
    return gateway_app.run()


if __name__ == "__main__":
    sys.exit(main())
