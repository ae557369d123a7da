"""One repetition of each kind of fault: a session of its own, the fault injected at an exact
moment, the failover watched from the client, every time on this process's
``time.perf_counter()`` (the client's arrivals, the fakes' frames: ``bench.failover.stage``).

Every session is a voice session (``session.start`` with ``model: "assistant"``, PCM16 16 kHz
in, 24 kHz out) whose microphone opens at ``session.started``: 20 ms frames in real time,
silence but for the utterances (``Microphone``). An utterance is ``tone_ms`` of a tone; the
OpenAI fake's server VAD (500 ms of silence, as the gateway configures it) ends the turn.

The clocks (all in ms in a sample):

- ``connect_refused`` / ``connect_429``: the OpenAI fake resets the connection (``refuse``) or
  answers the upgrade 429 (``status``) while the session starts, so the start moves on to
  Gemini. The fault's clock starts when ``session.start`` is handed to the socket; a text turn
  (``text.send``) goes the moment ``session.started`` arrives; ``fault_to_audio_ms`` ends at the
  first binary frame of its answer. ``to_switch_ms``: ``session.start`` → ``session.started``.
  The utterance follows, after that answer.
- ``lost``: the user's utterance; the moment the OpenAI fake sends ``speech_stopped`` (the turn
  ended, the answer is owed) it starts refusing connections and drops the live one (close 1011,
  what was not sent yet is discarded). The clock starts at that drop; the gateway's transport
  reconnects (``reconnect_attempts``, refused) and fails, then the session fails over.
  ``to_switch_ms``: drop → ``session.provider_changed``.
- ``stall_first``: the response to the utterance never sends anything. ``detection_ms`` runs
  from the moment the fake sent ``speech_stopped`` (the first moment the gateway could know
  the turn had ended: the event has one loopback hop to go) to ``session.provider_changed``
  at the client, minus ``first_output_voice_s``. The fault's clock (``fault_to_audio_ms``)
  starts when the fake held the response back (its ``on_applied``, as the response started).
- ``stall_mid``: the response stops after ``stall_after_chunks`` audio chunks (20 ms each; the
  fake paces them in real time). ``detection_ms`` runs from the last output the client received
  (a binary frame or an assistant ``transcript.delta``) to ``session.provider_changed``, minus
  ``output_gap_s`` (``detection_fake_ms``: the same from the fake's last chunk sent). The
  fault's clock starts when the fake held the next chunk back.

In every voice kind the fallback's first audio byte is the first binary frame after
``session.provider_changed`` (connect kinds: after ``session.started``); the fallback's user
transcript after it (``audio:<N>ms``) says what it heard of the utterance.

``tool``: a ``/tool journal {...}`` text turn (the fixture appends one line per execution to
the journal) whose call runs across the failover: the fault comes the moment the OpenAI fake
sends the ``response.done`` of the response that made the call (``lost``: refused and dropped
while the call runs, ``tool_sleep_ms``; ``stall_first``: the answer to its result never comes;
``stall_mid``: it stops after 2 chunks). Every other one has an open microphone (silence
streams, as a browser's does), the others send no audio at all. ``outcome``: ``answered`` (a
spoken reply after the switch), ``loop`` (the session failed over a second time instead), or
``no_answer``; ``executions``: the journal's lines of that call.

``reference``: no fault; a start on the ``fallback`` alias (Gemini alone), timed as the connect
kinds are: what a start costs without a failover.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from bench.failover.client import Arrival, Microphone, SessionClient, SessionClosed
from bench.failover.stage import ALIAS, FALLBACK_ALIAS, GatewaySettings, Stage
from bench.failover.stats import audio_loss, heard_ms
from fakes.faults import FaultKind

__all__ = ["RepPlan", "run_rep"]

INPUT_RATE = 16000
OUTPUT_RATE = 24000
TEXT_TURN = "hello"


@dataclass(frozen=True)
class RepPlan:
    tone_ms: int = 300
    stall_after_chunks: int = 5
    tool_sleep_ms: int = 400
    wait_s: float = 8.0  # the longest wait for any one thing a repetition expects
    settle_s: float = 2.0  # at most, for the previous session's upstreams to close


class Failed(Exception):
    """The repetition did not go as a failover should: the sample says why."""


Sample = dict[str, Any]


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def _is_audio(arrival: Arrival) -> bool:
    return arrival.event is None


def _is_user_transcript(arrival: Arrival) -> bool:
    event = arrival.event
    return (
        event is not None and event.get("type") == "transcript.done" and event.get("role") == "user"
    )


def _is_output(arrival: Arrival) -> bool:
    event = arrival.event
    if event is None:
        return True
    return event.get("type") == "transcript.delta" and event.get("role") == "assistant"


async def _open(stage: Stage, http: aiohttp.ClientSession) -> SessionClient:
    ws = await http.ws_connect(stage.session_url, autoping=True, max_msg_size=0)
    return SessionClient(ws)


async def _start(client: SessionClient, alias: str, wait_s: float) -> tuple[float, int]:
    """``session.start`` sent: when it went, and the index of ``session.started``."""
    audio = {"input_rate": INPUT_RATE, "output_rate": OUTPUT_RATE}
    sent = await client.send("session.start", mode="voice", model=alias, audio=audio)
    return sent, await client.wait_type("session.started", wait_s)


def _provider(client: SessionClient, index: int) -> str:
    event = client.arrivals[index].event
    assert event is not None
    return str(event.get("provider"))


async def _heard(client: SessionClient, after: int, sent_ms: int, wait_s: float) -> Sample:
    _, transcript = await client.wait_for(_is_user_transcript, wait_s, after)
    assert transcript.event is not None
    text = str(transcript.event.get("text"))
    heard = heard_ms(text)
    if heard is None:
        raise Failed(f"the fallback's user transcript is not audio:<N>ms: {text[:80]!r}")
    lost, extra = audio_loss(sent_ms, heard)
    return {"sent_ms": sent_ms, "heard_ms": heard, "audio_lost_ms": lost, "audio_extra_ms": extra}


async def _changed(client: SessionClient, after: int, reason: str, wait_s: float) -> int:
    index = await client.wait_type("session.provider_changed", wait_s, after)
    event = client.arrivals[index].event
    assert event is not None
    if (event.get("provider"), event.get("reason")) != ("gemini", reason):
        raise Failed(f"provider_changed {event.get('provider')}/{event.get('reason')}")
    return index


# -- the kinds ----------------------------------------------------------------------------------


async def _connect(
    kind: str, stage: Stage, client: SessionClient, mic: Microphone, plan: RepPlan
) -> Sample:
    faults = stage.openai.faults
    fault_name: FaultKind = "refuse" if kind == "connect_refused" else "status"
    before = faults.applied[fault_name]
    if kind == "connect_refused":
        faults.refuse = True
    else:
        faults.status = 429
    try:
        sent, started = await _start(client, ALIAS, plan.wait_s)
    finally:
        faults.clear()
    started_at = client.arrivals[started].at
    await client.send("text.send", text=TEXT_TURN)
    mic.start()
    if _provider(client, started) != "gemini":
        raise Failed(f"started on {_provider(client, started)}")
    audio, first = await client.wait_for(_is_audio, plan.wait_s, started)
    sample: Sample = {
        "fault_to_audio_ms": _ms(first.at - sent),
        "to_switch_ms": _ms(started_at - sent),
        "attempts": faults.applied[fault_name] - before,
    }
    done = await client.wait_type("response.done", plan.wait_s, audio)
    mic.say(plan.tone_ms)
    sample.update(await _heard(client, done, plan.tone_ms, plan.wait_s))
    return sample


async def _lost(stage: Stage, client: SessionClient, mic: Microphone, plan: RepPlan) -> Sample:
    faults, clock = stage.openai.faults, stage.clock
    _, started = await _start(client, ALIAS, plan.wait_s)
    if _provider(client, started) != "openai":
        raise Failed(f"started on {_provider(client, started)}")
    dropped: list[float] = []
    before = faults.applied["refuse"]

    def drop(connection: Any, message: Mapping[str, Any]) -> None:
        if message.get("type") == "input_audio_buffer.speech_stopped":
            clock.hook = None
            dropped.append(time.perf_counter())
            faults.refuse = True
            asyncio.get_running_loop().create_task(connection.drop(1011, "bench: lost"))

    clock.hook = drop
    mic.start()
    mic.say(plan.tone_ms)
    changed = await _changed(client, started, "lost", plan.wait_s)
    _, first = await client.wait_for(_is_audio, plan.wait_s, changed)
    if not dropped:
        raise Failed("failed over before the drop")
    fault = dropped[0]
    sample: Sample = {
        "fault_to_audio_ms": _ms(first.at - fault),
        "to_switch_ms": _ms(client.arrivals[changed].at - fault),
        "attempts": faults.applied["refuse"] - before,
    }
    sample.update(await _heard(client, changed, plan.tone_ms, plan.wait_s))
    return sample


async def _stall(
    kind: str,
    stage: Stage,
    client: SessionClient,
    mic: Microphone,
    plan: RepPlan,
    settings: GatewaySettings,
) -> Sample:
    faults, clock = stage.openai.faults, stage.clock
    _, started = await _start(client, ALIAS, plan.wait_s)
    if _provider(client, started) != "openai":
        raise Failed(f"started on {_provider(client, started)}")
    if kind == "stall_first":
        faults.fail_next("stall_first", 1)
    else:
        faults.fail_next("stall_mid", 1, after=plan.stall_after_chunks)
    mic.start()
    mic.say(plan.tone_ms)
    reason = "stall_first_output" if kind == "stall_first" else "stall_mid_response"
    changed = await _changed(client, started, reason, plan.wait_s)
    changed_at = client.arrivals[changed].at
    _, first = await client.wait_for(_is_audio, plan.wait_s, changed)
    fault = clock.first(kind, "applied")
    if fault is None:
        raise Failed("the fake never applied the stall")
    sample: Sample = {
        "fault_to_audio_ms": _ms(first.at - fault),
        "to_switch_ms": _ms(changed_at - fault),
    }
    if kind == "stall_first":
        turn_end = clock.first("input_audio_buffer.speech_stopped")
        if turn_end is None:
            raise Failed("the fake never ended the turn")
        sample["detection_ms"] = _ms(changed_at - turn_end - settings.first_output_voice_s)
    else:
        outputs = [a for a in client.arrivals[started:changed] if _is_output(a)]
        if not outputs:
            raise Failed("no output reached the client before the stall")
        sample["detection_ms"] = _ms(changed_at - outputs[-1].at - settings.output_gap_s)
        sample["chunks_heard"] = sum(1 for a in outputs if a.event is None)
        fake_chunks = clock.sent.get("response.output_audio.delta", [])
        if fake_chunks:
            sample["detection_fake_ms"] = _ms(changed_at - fake_chunks[-1] - settings.output_gap_s)
    sample.update(await _heard(client, changed, plan.tone_ms, plan.wait_s))
    return sample


def _made_a_call(message: Mapping[str, Any]) -> bool:
    if message.get("type") != "response.done":
        return False
    output = message.get("response", {}).get("output", [])
    return any(item.get("type") == "function_call" for item in output)


async def _tool(
    kind: str,
    stage: Stage,
    client: SessionClient,
    mic: Microphone,
    plan: RepPlan,
    open_mic: bool,
) -> Sample:
    faults, clock = stage.openai.faults, stage.clock
    _, started = await _start(client, ALIAS, plan.wait_s)
    if _provider(client, started) != "openai":
        raise Failed(f"started on {_provider(client, started)}")
    label = f"{kind}-{secrets.token_hex(4)}"
    faulted: list[float] = []

    def inject(connection: Any, message: Mapping[str, Any]) -> None:
        if not _made_a_call(message):
            return
        clock.hook = None
        faulted.append(time.perf_counter())
        if kind == "lost":
            faults.refuse = True
            asyncio.get_running_loop().create_task(connection.drop(1011, "bench: lost"))
        elif kind == "stall_first":
            faults.fail_next("stall_first", 1)
        else:
            faults.fail_next("stall_mid", 1, after=2)

    clock.hook = inject
    if open_mic:
        mic.start()
    arguments = json.dumps({"label": label, "sleep_ms": plan.tool_sleep_ms})
    await client.send("text.send", text=f"/tool journal {arguments}")
    sample: Sample = {"mic": "open" if open_mic else "quiet", "label": label}
    try:
        changed = await client.wait_type("session.provider_changed", plan.wait_s, started)
        sample["outcome"] = await _answer_or_loop(client, changed, plan.wait_s)
        first = next((a for a in client.arrivals[changed:] if _is_audio(a)), None)
        # the fault: the drop (lost), or the moment the fake held the answer back (stalls)
        fault = faulted[0] if kind == "lost" and faulted else clock.first(kind, "applied")
        if fault is not None and first is not None:
            sample["fault_to_audio_ms"] = _ms(first.at - fault)
    except (TimeoutError, SessionClosed) as problem:
        sample.setdefault("outcome", "no_answer")
        sample["error"] = type(problem).__name__
    finally:
        # every execution has been journaled by now, or is about to be (a call that runs)
        await _calls_settled(client, plan.tool_sleep_ms / 1000 + 0.5)
        sample["executions"] = sum(1 for line in stage.journal_lines() if line["label"] == label)
        sample["provider_changes"] = len(client.events("session.provider_changed"))
    return sample


async def _answer_or_loop(client: SessionClient, changed: int, wait_s: float) -> str:
    def answered_or_moved(arrival: Arrival) -> bool:
        event = arrival.event
        if event is None:
            return False
        if event.get("type") == "session.provider_changed":
            return True
        return (
            event.get("type") == "response.done"
            and event.get("status") == "completed"
            and bool(event.get("text"))
        )

    _, found = await client.wait_for(answered_or_moved, wait_s, changed + 1)
    assert found.event is not None
    return "loop" if found.event["type"] == "session.provider_changed" else "answered"


async def _calls_settled(client: SessionClient, wait_s: float) -> None:
    """Until every ``tool.started`` has its ``tool.finished`` (bounded)."""
    deadline = time.perf_counter() + wait_s
    while time.perf_counter() < deadline:
        started = {e["call_id"] for _, e in client.events("tool.started")}
        finished = {e["call_id"] for _, e in client.events("tool.finished")}
        if started <= finished:
            return
        await asyncio.sleep(0.05)


async def _reference(client: SessionClient, mic: Microphone, plan: RepPlan) -> Sample:
    sent, started = await _start(client, FALLBACK_ALIAS, plan.wait_s)
    started_at = client.arrivals[started].at
    await client.send("text.send", text=TEXT_TURN)
    mic.start()
    if _provider(client, started) != "gemini":
        raise Failed(f"started on {_provider(client, started)}")
    _, first = await client.wait_for(_is_audio, plan.wait_s, started)
    return {"fault_to_audio_ms": _ms(first.at - sent), "to_switch_ms": _ms(started_at - sent)}


# -- one repetition -----------------------------------------------------------------------------


async def run_rep(
    kind: str,
    variant: str,
    rep: int,
    stage: Stage,
    http: aiohttp.ClientSession,
    plan: RepPlan,
    settings: GatewaySettings,
) -> Sample:
    """One fault (or one reference start), in a session of its own; never raises for what
    the session did (the sample says), always leaves the fakes clean."""
    sample: Sample = {"kind": kind, "variant": variant, "rep": rep, "ok": False}
    began = time.perf_counter()
    client = await _open(stage, http)
    mic = Microphone(client, INPUT_RATE)
    run: Callable[[], Any]
    if variant == "reference":
        run = lambda: _reference(client, mic, plan)  # noqa: E731
    elif variant == "tool":
        run = lambda: _tool(kind, stage, client, mic, plan, open_mic=rep % 2 == 0)  # noqa: E731
    elif kind in ("connect_refused", "connect_429"):
        run = lambda: _connect(kind, stage, client, mic, plan)  # noqa: E731
    elif kind == "lost":
        run = lambda: _lost(stage, client, mic, plan)  # noqa: E731
    else:
        run = lambda: _stall(kind, stage, client, mic, plan, settings)  # noqa: E731
    gc.disable()
    try:
        sample.update(await run())
        sample["ok"] = variant != "tool" or sample.get("outcome") == "answered"
    except Failed as failure:
        sample["error"] = str(failure)
    except TimeoutError:
        sample["error"] = f"timed out ({plan.wait_s:g} s) after {_last_events(client)}"
    except SessionClosed as closed:
        sample["error"] = str(closed)[:300]
    finally:
        gc.enable()
        stage.clock.hook = None
        await mic.stop()
        await client.close()
        stage.openai.faults.clear()
        stage.clock.reset()
        await _settle(stage, plan.settle_s)
    sample["frames_sent"] = mic.frames_sent
    sample["wall_s"] = round(time.perf_counter() - began, 3)
    return sample


def _last_events(client: SessionClient) -> list[str]:
    return [a.type for a in client.arrivals if a.event is not None][-4:]


async def _settle(stage: Stage, wait_s: float) -> None:
    """The session's upstream connections closed (bounded), then forgotten: the next
    repetition starts from nothing open."""
    deadline = time.perf_counter() + wait_s
    servers = (stage.openai, stage.gemini)
    while time.perf_counter() < deadline:
        if all(c.closed.is_set() for server in servers for c in server.connections):
            break
        await asyncio.sleep(0.02)
    for server in servers:
        server.forget_closed()
    with contextlib.suppress(Exception):
        gc.collect()
