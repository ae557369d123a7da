"""``gateway serve --workers N``: N gateway processes on one port, each a node of the cluster.

The supervisor (this process) serves nothing itself. It starts each worker as its own
``python -m gateway serve`` with one worker, ``SO_REUSEPORT`` on the shared port (the kernel
spreads new connections over them), a node id of its own (``<id>-w<n>``), and one
prometheus-client multiprocess folder for all (so ``/metrics`` on any worker shows the whole
machine). SIGTERM and SIGINT go to every worker (each drains: with Redis its sessions move to
the others, or to other machines); a worker that dies otherwise is started again, after a pause
that grows if it keeps dying. More than one worker needs ``GATEWAY_REDIS_URL``
(``Settings`` says so at start).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import FrameType

import structlog
from prometheus_client import multiprocess

from gateway.config import Settings
from gateway.node import new_node_id

__all__ = ["supervise"]

_log = structlog.get_logger("workers")

# Beyond a worker's own drain limit, how long it may take to stop before it is killed.
STOP_MARGIN_S = 5.0
RESTART_BACKOFF_S = (0.5, 1.0, 2.0, 5.0)
# A worker that ran this long before dying starts again after the shortest pause.
HEALTHY_AFTER_S = 60.0
POLL_S = 0.2


def _metrics_folder() -> tuple[Path, bool]:
    """The shared metrics folder (emptied: old files would count dead processes), and whether
    it is ours to remove at the end."""
    given = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if given:
        folder = Path(given)
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.glob("*.db"):
            stale.unlink()
        return folder, False
    return Path(tempfile.mkdtemp(prefix="gateway-metrics-")), True


def supervise(settings: Settings) -> int:
    count = settings.worker_count()
    folder, ours = _metrics_folder()
    base = settings.node_id or new_node_id()
    stopping = False

    def environment(index: int) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            GATEWAY_WORKERS="1",
            GATEWAY_REUSE_PORT="1",
            GATEWAY_NODE_ID=f"{base}-w{index}",
            PROMETHEUS_MULTIPROC_DIR=str(folder),
        )
        return env

    def start(index: int) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "gateway", "serve"],
            env=environment(index),
            stdin=subprocess.DEVNULL,
        )

    workers = {index: start(index) for index in range(count)}
    started = dict.fromkeys(workers, time.monotonic())
    deaths = dict.fromkeys(workers, 0)
    _log.info("workers_started", workers=count, pids=[w.pid for w in workers.values()], node=base)

    def stop(signum: int, _: FrameType | None) -> None:
        nonlocal stopping
        stopping = True
        for worker in workers.values():
            if worker.poll() is None:
                worker.send_signal(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        while not stopping:
            time.sleep(POLL_S)
            for index, worker in list(workers.items()):
                code = worker.poll()
                if code is None or stopping:
                    continue
                multiprocess.mark_process_dead(worker.pid, str(folder))  # type: ignore[no-untyped-call]
                if time.monotonic() - started[index] > HEALTHY_AFTER_S:
                    deaths[index] = 0
                pause = RESTART_BACKOFF_S[min(deaths[index], len(RESTART_BACKOFF_S) - 1)]
                deaths[index] += 1
                _log.warning(
                    "worker_died", worker=index, pid=worker.pid, code=code, restart_in_s=pause
                )
                time.sleep(pause)
                if not stopping:
                    workers[index] = start(index)
                    started[index] = time.monotonic()
        deadline = time.monotonic() + settings.drain_limit_s() + STOP_MARGIN_S
        codes = []
        for worker in workers.values():
            try:
                codes.append(worker.wait(timeout=max(deadline - time.monotonic(), 0.1)))
            except subprocess.TimeoutExpired:
                worker.kill()
                codes.append(worker.wait())
        _log.info("workers_stopped", codes=codes)
        return 0 if all(code == 0 for code in codes) else 1
    finally:
        if ours:
            shutil.rmtree(folder, ignore_errors=True)
