"""A bad client can never crash or stall the gateway, and other sessions do not notice.

Property-based (hypothesis): random JSON, random non-JSON text, random binary frames and random
orders of valid-ish events are thrown at one session while a healthy "bystander" session stays open
on the same gateway. After every example the fuzzed connection either still answers ``ping`` with
``pong`` or was closed by the server right after a ``session.ended``; every ``error`` has the
docs/protocol.md section 6 shape (and echoes the offending ``event_id``); the bystander still gets
its ``You said: …`` reply and its pong; ``/healthz`` is 200; and once the fuzzed client is gone,
only the bystander is left in ``SessionManager.sessions`` and ``gateway_active_sessions``.

Sequences of events are checked against an oracle (which error, with which ``event_id``, for
each frame, and the pongs in order) and against the order guarantees of section 6; a client that
floods 2,000 frames without reading does not slow the bystander down.

How hypothesis meets asyncio here: one gateway per test (``gateway_factory``, on pytest-asyncio's
loop). The ``@given`` property is a plain function run in a worker thread
(``asyncio.to_thread``); each example submits its coroutine to the test's loop with
``run_coroutine_threadsafe`` and waits for it. So the server, the bystander and every example
share one loop, examples run one at a time, and the fixture cleans everything up. Examples are
derandomized (the same ones on every run) and the example database is off.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import random
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from harness import (
    Client,
    ConnectionClosed,
    Gateway,
    GatewayFactory,
    b64,
    pcm_silence,
    pcm_tone,
    types,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# -- the contract (docs/protocol.md sections 5 and 6) ---------------------------------------------

CLIENT_TYPES = (
    "session.start",
    "audio.append",
    "audio.commit",
    "audio.clear",
    "audio.playback",
    "text.send",
    "response.cancel",
    "confirmation.respond",
    "session.update",
    "session.end",
    "ping",
)
ERROR_CODES = frozenset(
    {
        "invalid_json",
        "invalid_event",
        "unknown_event",
        "invalid_audio",
        "payload_too_large",
        "not_started",
        "already_started",
        "session_start_timeout",
        "forbidden",
        "rate_limited",
        "confirmation_not_found",
        "confirmation_expired",
        "upstream_unavailable",
        "upstream_error",
        "resume_failed",
        "internal",
    }
)
ERROR_FIELDS = frozenset({"type", "code", "message", "retryable", "fatal", "event_id"})
END_REASONS = frozenset(
    {"client", "intent", "idle_timeout", "max_duration", "upstream_failed", "shutdown", "error"}
)
# What the gateway may answer to one known-type event, whatever its fields (never "internal").
KNOWN_TYPE_CODES = frozenset(
    {
        "invalid_event",
        "invalid_audio",
        "not_started",
        "already_started",
        "forbidden",
        "confirmation_not_found",
        "resume_failed",
        "upstream_unavailable",
        "upstream_error",
    }
)

# The fuzz gateway: no rate limiting in the way of the properties (each example is a fresh
# session; the bystander sends two events per example), and a short resume window so that a
# client that just drops its socket is forgotten quickly. The flood test uses the defaults.
FUZZ_GATEWAY: dict[str, Any] = {
    "client_events_per_s": 100_000.0,
    "client_events_burst": 100_000,
    "resume_window_s": 0.05,
}
EXAMPLE_TIMEOUT_S = 30.0

FUZZ = settings(
    max_examples=80,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
FUZZ_SLOW = settings(FUZZ, max_examples=60)  # examples that may wait for a quiet session


# -- one gateway, one bystander, many examples ---------------------------------------------------


@dataclass
class World:
    gw: Gateway
    bystander: Client
    loop: asyncio.AbstractEventLoop
    counter: int = 0
    # Fuzzed connections being hung up (see ``fuzz``); their failures fail the test.
    closing: list[asyncio.Task[None]] = field(default_factory=list)

    def next_id(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}-{self.counter}"

    def run(self, coro: Coroutine[Any, Any, None]) -> None:
        """From the hypothesis thread: run one example on the gateway's loop."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            future.result(timeout=EXAMPLE_TIMEOUT_S)
        finally:
            future.cancel()

    def hang_ups_so_far(self) -> None:
        for task in [t for t in self.closing if t.done()]:
            self.closing.remove(task)
            task.result()  # raises what the hang-up found wrong

    async def check_unaffected(self) -> None:
        """The server is up, the bystander is served, and no fuzzed session is left over."""
        self.hang_ups_so_far()
        async with self.gw.http.get(f"{self.gw.url}/healthz") as response:
            assert response.status == 200
            assert await response.json() == {"status": "ok"}

        word = self.next_id("still-here")
        reply = await self.bystander.say(word)
        assert reply[0]["type"] == "response.started"
        assert {e["type"] for e in reply[1:-1]} == {"text.delta"}
        assert reply[-1]["status"] == "completed"
        assert reply[-1]["text"] == f"You said: {word}"
        assert "".join(e["delta"] for e in reply[1:-1]) == reply[-1]["text"]
        ping = self.next_id("bystander")
        await self.bystander.send("ping", id=ping)
        assert await self.bystander.next() == {"type": "pong", "id": ping}
        assert not [e for e in self.bystander.events if e["type"] in ("error", "session.ended")]

        only = {self.bystander.started["session_id"]}
        await wait_for_condition(lambda: set(self.gw.manager.sessions) == only)
        assert self.gw.metric("gateway_active_sessions") == 1


@asynccontextmanager
async def world(gateway_factory: GatewayFactory, **overrides: Any) -> AsyncIterator[World]:
    gw = await gateway_factory(**{**FUZZ_GATEWAY, **overrides})
    async with gw.session("text", sub="bob") as bystander:
        w = World(gw, bystander, asyncio.get_running_loop())
        try:
            yield w
        finally:
            results = await asyncio.gather(*w.closing, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result


async def run_property(test: Callable[[], None]) -> None:
    """Run a ``@given`` property (a plain function) off the loop, so it can drive the loop."""
    await asyncio.to_thread(test)


async def wait_for_condition(condition: Callable[[], bool], within: float = 3.0) -> None:
    """Server-side bookkeeping has no event to wait for: poll it, bounded in count and time."""
    for _ in range(int(within / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    assert condition(), "condition not reached in time"


# -- one fuzzed connection ----------------------------------------------------------------------


@dataclass
class Outcome:
    events: list[dict[str, Any]]  # after our own session.start (when there was one)
    answered: bool  # our probe ping got its pong: the connection stayed usable
    probe_at: int  # index in ``events`` of that pong (len(events) when not answered)
    timeline: list[tuple[str, Any]]  # the same events with the audio frames, in order
    close_code: int | None = None  # when the server's close was waited for
    settled: bool = False  # the session went quiet after the probe (all its work was done)

    @property
    def errors(self) -> list[dict[str, Any]]:
        """The errors up to the probe's pong."""
        return [e for e in self.events[: self.probe_at] if e["type"] == "error"]


async def fuzz(
    w: World, stage: str, frames: list[str | bytes], *, finish: str = "end", settle: bool = False
) -> Outcome:
    """Open a connection (started in ``stage`` mode, or not at all for ``"prestart"``), send the
    frames blind, then probe with a ping. With ``settle``, read on until the session goes quiet.
    Then end the session (``finish="end"``) or drop the socket (``"close"``). Returns what the
    client saw up to then (its pong, the quiet, or ``session.ended``).

    The server closes the socket only some 250 ms after ``session.ended`` (its session timer's
    tick), so the rest of the connection (reading to the close, checking its code and the
    events that came after) goes on in the background while the next example runs; a failure
    there fails the next example's ``check_unaffected`` (or the end of the test).
    """
    seen: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(connection(w, stage, frames, finish, settle, seen))
    w.closing.append(task)
    await asyncio.wait([seen, task], return_when=asyncio.FIRST_COMPLETED)
    if not seen.done():
        w.closing.remove(task)
        task.result()  # raises what went wrong before the outcome was known
    outcome = seen.result()
    check_stream(outcome)
    return outcome


async def connection(
    w: World,
    stage: str,
    frames: list[str | bytes],
    finish: str,
    settle: bool,
    seen: asyncio.Future[Outcome],
) -> None:
    async with w.gw.connect(sub="mallory") as client:
        if stage != "prestart":
            await client.start(stage)
        skip, skip_timeline = len(client.events), len(client.timeline)
        await send_all(client, frames)
        answered = await probe(client, w.next_id("probe"))
        probe_at = len(client.events) - skip - (1 if answered else 0)
        ended = not answered
        if answered and settle:
            ended = await quiet(client)
        if not ended and finish == "end":
            await client.send("session.end")
            last = await client.last("session.ended")
            # (or the session ended on its own just before: /fail, an END_VOICE_SESSION intent)
            assert last["reason"] in ("client", "upstream_failed", "intent"), last
            ended = True
        seen.set_result(
            Outcome(
                client.events[skip:],
                answered,
                probe_at,
                client.timeline[skip_timeline:],
                settled=answered and settle,
            )
        )
        if not ended:
            return  # the client drops the socket (the session is parked, then forgotten)
        # The session has ended: the server closes the socket with 1000.
        code = client.close_code or await client.wait_closed()
        assert code == 1000, code
        check_stream(
            Outcome(client.events[skip:], answered, probe_at, client.timeline[skip_timeline:], code)
        )


async def quiet(client: Client, window: float = 0.2, limit: float = 5.0) -> bool:
    """Read until nothing arrives for ``window`` seconds (the local model and the fast tools are
    done by then); True when the session ended meanwhile."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            event = await client.next(within=window)
        except TimeoutError:
            return False
        if event["type"] == "session.ended":
            return True
    raise AssertionError(f"the session did not go quiet within {limit} s")


async def send_all(client: Client, frames: list[str | bytes]) -> None:
    for frame in frames:
        try:
            await client.send_raw(frame)
        except ConnectionResetError:  # the server ended the session on an earlier frame
            return


async def probe(client: Client, probe_id: str) -> bool:
    """True when the probe's pong arrives; False when the session ends (or the socket closes)
    first."""
    with contextlib.suppress(ConnectionResetError):
        await client.send("ping", id=probe_id)
    try:
        while True:
            event = await client.next()
            if event["type"] == "pong" and event["id"] == probe_id:
                return True
            if event["type"] == "session.ended":
                return False
    except ConnectionClosed:
        return False


def check_error(error: dict[str, Any]) -> None:
    """docs/protocol.md section 6: the shape of every ``error`` event."""
    assert set(error) <= ERROR_FIELDS, error
    assert error["code"] in ERROR_CODES, error
    assert error["code"] != "internal", f"a client input caused an internal error: {error}"
    assert isinstance(error["message"], str), error
    assert error["message"], error
    assert isinstance(error["retryable"], bool), error
    assert isinstance(error["fatal"], bool), error
    assert isinstance(error.get("event_id", ""), str), error


def check_stream(outcome: Outcome) -> None:
    """Error shapes, the order guarantees of section 6, and how the connection ended."""
    started: set[str] = set()
    done: set[str] = set()
    speaking: str | None = None  # the open response: audio belongs to it
    tools_started: set[str] = set()
    tools_finished: set[str] = set()
    confirmations: set[str] = set()
    ended: list[int] = []
    for index, (kind, item) in enumerate(outcome.timeline):
        if kind == "audio":
            assert speaking is not None, "audio outside a response (or after speech.started)"
            continue
        event: dict[str, Any] = item
        type_ = event["type"]
        if type_ == "error":
            check_error(event)
        elif type_ == "session.ended":
            assert event["reason"] in END_REASONS, event
            ended.append(index)
        elif type_ == "speech.started":
            speaking = None  # no audio of the interrupted response follows speech.started
        elif type_ == "response.started":
            assert event["response_id"] not in started, event
            started.add(event["response_id"])
            speaking = event["response_id"]
        elif type_ in ("text.delta", "response.done") or (
            type_ in ("transcript.delta", "transcript.done") and event["role"] == "assistant"
        ):
            rid = event["response_id"]
            assert rid in started, f"{event} before its response.started"
            assert rid not in done, f"{event} after its response.done"
            if type_ == "response.done":
                done.add(rid)
                speaking = None if speaking == rid else speaking
        elif type_ == "tool.started":
            assert event["call_id"] not in tools_started, event
            tools_started.add(event["call_id"])
        elif type_ == "tool.finished":
            assert event["call_id"] in tools_started, event
            assert event["call_id"] not in tools_finished, event
            tools_finished.add(event["call_id"])
        elif type_ == "confirmation.requested":
            confirmations.add(event["confirmation_id"])
        elif type_ == "confirmation.resolved":
            assert event["confirmation_id"] in confirmations, event
    assert len(ended) <= 1, "session.ended twice"
    if outcome.settled and not ended:
        # All the work of a quiet session is finished: every response and tool call.
        assert started == done, f"responses without response.done: {started - done}"
        assert tools_started == tools_finished, tools_started - tools_finished
    if ended:
        assert ended[0] == len(outcome.timeline) - 1, outcome.timeline[ended[0] :]
    if not outcome.answered:
        # The session was ended by the server: session.ended (always sent before the close).
        assert ended, f"no session.ended, after {outcome.events[-3:]}"
    if outcome.close_code is not None:
        assert ended, "closed without session.ended"
        assert outcome.close_code == 1000, outcome.close_code


# -- strategies ---------------------------------------------------------------------------------

# 64-bit integers: the range every JSON parser of the gateway's stack keeps exact.
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
TOOL_NAMES = ["get_current_time", "kb_search", "create_care_log", "echo", "", "nope"]
PLAUSIBLE: dict[str, st.SearchStrategy[Any]] = {
    "mode": st.sampled_from(["voice", "text", "Voice", "", "chat"]),
    "provider": st.sampled_from(["local", "openai", "gemini", "chat", "LOCAL", ""]),
    "model": st.text(max_size=10),
    "voice": st.text(max_size=10),
    "instructions": st.text(max_size=30),
    "locale": st.sampled_from(["en-US", "fr", ""]),
    "audio": st.dictionaries(
        st.sampled_from(["input_rate", "output_rate", "rate"]),
        st.sampled_from([8000, 16000, 24000, 48000, 44100, 0, -1, "16000", True, 16000.0]),
        max_size=3,
    ),
    "tools": st.lists(st.sampled_from(TOOL_NAMES) | json_scalars, max_size=3),
    "metadata": st.dictionaries(
        st.text(max_size=5), st.text(max_size=5) | json_scalars, max_size=18
    ),
    "resume": st.fixed_dictionaries(
        {},
        optional={
            "session_id": st.sampled_from(["sess_0", ""]) | json_scalars,
            "resume_token": st.text(max_size=8) | json_scalars,
        },
    ),
    "tool_dialect": st.sampled_from(["native", "inline", "json", "xml"]),
    "audio_b64": st.binary(max_size=64).map(lambda b: base64.b64encode(b).decode())
    | st.sampled_from(["", "=", "not base64!", "QQ", "AAA=", "ÿÿ"]),
    "response_id": st.sampled_from(["resp_1", "r", ""]) | st.text(max_size=8),
    "played_ms": st.integers(-5, 10**9) | st.sampled_from([1.5, "10", True]),
    "text": st.sampled_from(["hi", "", "/say x", "/tool get_current_time {}", "x" * 16_001])
    | st.text(max_size=30),
    "confirmation_id": st.sampled_from(["conf_0", ""]) | st.text(max_size=8),
    "decision": st.sampled_from(["approve", "reject", "yes", "APPROVE", ""]),
    "parameters": st.dictionaries(st.text(max_size=5), json_scalars, max_size=3),
    "reason": st.text(max_size=10),
    "id": json_values,
}


def _field_name(name: str) -> str:
    return "audio" if name == "audio_b64" else name


ids = st.text(min_size=1, max_size=10)
even_pcm = st.binary(min_size=1, max_size=200).map(lambda b: b[: len(b) // 2 * 2] or b"\0\0")
# One valid body per event type: the starting point that mutations then break.
VALID: dict[str, st.SearchStrategy[dict[str, Any]]] = {
    "session.start": st.fixed_dictionaries(
        {"mode": st.sampled_from(["voice", "text"])},
        optional={
            "provider": st.just("local"),
            "model": st.text(max_size=10),
            "voice": st.text(max_size=10),
            "instructions": st.text(max_size=30),
            "locale": st.sampled_from(["en-US", "fr-FR"]),
            "audio": st.fixed_dictionaries(
                {},
                optional={
                    "input_rate": st.sampled_from([8000, 16000, 24000, 48000]),
                    "output_rate": st.sampled_from([8000, 16000, 24000, 48000]),
                },
            ),
            "tools": st.lists(st.sampled_from(["get_current_time", "kb_search", "echo"])),
            "metadata": st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=4),
        },
    ),
    "audio.append": st.fixed_dictionaries({"audio": even_pcm.map(b64)}),
    "audio.commit": st.just({}),
    "audio.clear": st.just({}),
    "audio.playback": st.fixed_dictionaries(
        {"response_id": ids, "played_ms": st.integers(0, 10**6)}
    ),
    "text.send": st.fixed_dictionaries({"text": st.text(min_size=1, max_size=30)}),
    "response.cancel": st.just({}),
    "confirmation.respond": st.fixed_dictionaries(
        {"confirmation_id": ids, "decision": st.sampled_from(["approve", "reject"])},
        optional={"parameters": st.dictionaries(st.text(max_size=5), json_scalars, max_size=3)},
    ),
    "session.update": st.sampled_from([{"mode": "voice"}, {"mode": "text"}])
    | st.fixed_dictionaries({"instructions": st.text(max_size=20)}),
    "session.end": st.fixed_dictionaries({}, optional={"reason": st.text(max_size=10)}),
    "ping": st.fixed_dictionaries({}, optional={"id": json_scalars}),
}
other_types = (
    st.sampled_from(["", "PING", "session.started", "pong", "error", "text_send"])
    | st.text(max_size=15)
    | json_values
)


EVENT_IDS: dict[str, st.SearchStrategy[Any]] = {
    "none": st.none(),
    "string": ids,
    "any": json_values,
}


@st.composite
def event_objects(draw: st.DrawFn) -> dict[str, Any]:
    """A JSON object that looks like a client event: a valid event of a random type, then up
    to three mutations (a field dropped, set to a plausible or arbitrary value, an unknown field
    added, the type replaced), and an ``event_id`` that may be anything."""
    type_ = draw(st.sampled_from(CLIENT_TYPES))
    message: dict[str, Any] = {"type": type_, **draw(VALID[type_])}
    for _ in range(draw(st.sampled_from([0, 0, 1, 1, 2, 3]))):
        mutation = draw(st.sampled_from(["drop", "set", "extra", "retype"]))
        if mutation == "drop" and message:
            del message[draw(st.sampled_from(sorted(message)))]
        elif mutation == "set":
            name = draw(st.sampled_from(sorted(PLAUSIBLE)))
            message[_field_name(name)] = draw(PLAUSIBLE[name] | json_values)
        elif mutation == "extra":
            message[draw(st.text(max_size=10))] = draw(json_values)
        else:
            message["type"] = draw(other_types)
    event_id = draw(st.sampled_from(["none", "string", "string", "any"]).flatmap(EVENT_IDS.get))
    if event_id is not None:
        message["event_id"] = event_id
    return message


stages = st.sampled_from(["prestart", "text", "voice"])
finishes = st.sampled_from(["end", "close"])


# -- 1. random JSON -----------------------------------------------------------------------------


def expected_codes(value: Any, stage: str) -> tuple[frozenset[str], bool]:
    """The codes one JSON frame may get, and whether it must get exactly one error."""
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        return frozenset({"invalid_event"}), True
    if value["type"] not in CLIENT_TYPES:
        return frozenset({"unknown_event"}), True
    if value.get("event_id") is not None and not isinstance(value["event_id"], str):
        return frozenset({"invalid_event"}), True
    if stage == "prestart" and value["type"] not in ("session.start", "ping", "session.end"):
        return frozenset({"invalid_event", "invalid_audio", "not_started"}), True
    return KNOWN_TYPE_CODES, False


async def json_example(w: World, value: Any, ascii_only: bool, stage: str, finish: str) -> None:
    outcome = await fuzz(w, stage, [json.dumps(value, ensure_ascii=ascii_only)], finish=finish)
    codes, exactly_one = expected_codes(value, stage)
    errors = outcome.errors
    assert len(errors) <= 1, errors
    if exactly_one:
        assert len(errors) == 1, outcome.events
    for error in errors:
        assert error["code"] in codes, (error, value)
        assert error["fatal"] is (error["code"] == "upstream_unavailable"), error
        raw_id = value.get("event_id") if isinstance(value, dict) else None
        if error["code"] == "upstream_error":
            continue  # the model's error, not this event's
        if isinstance(raw_id, str):
            assert error.get("event_id") == raw_id, (error, value)
        else:
            assert "event_id" not in error, (error, value)
    await w.check_unaffected()


async def test_random_json_gets_errors_and_the_server_stays_up(
    gateway_factory: GatewayFactory,
) -> None:
    async with world(gateway_factory) as w:

        @FUZZ
        @given(
            value=st.one_of(event_objects(), event_objects(), event_objects(), json_values),
            ascii_only=st.booleans(),
            stage=stages,
            finish=finishes,
        )
        def random_json(value: Any, ascii_only: bool, stage: str, finish: str) -> None:
            w.run(json_example(w, value, ascii_only, stage, finish))

        await run_property(random_json)


# -- 2. text that is not JSON ---------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(name)


def is_json(text: str) -> bool:
    """RFC 8259 JSON (no NaN/Infinity, which Python's json would accept)."""
    try:
        json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return False
    return True


def _cut(text_and_cut: tuple[str, int]) -> str:
    text, cut = text_and_cut
    return text[: cut % max(len(text), 1)]


broken_json = (
    st.text(max_size=60)
    | st.sampled_from(
        [
            "",
            " ",
            "{",
            "[" * 5000,
            '{"type":"ping"',
            '{"type":"ping"}x',
            '{"type":"ping"}{"type":"ping"}',
            "\ufeff{}",
            "{'type': 'ping'}",
            '{"type": "ping", "id": NaN}',
            '{"type": "ping", "id": Infinity}',
            '{"type": "ping",}',
            "nul",
            "\x00",
            '{"type":"text.send","text":"\\ud800"',
        ]
    )
    | st.tuples(event_objects().map(json.dumps), st.integers(0, 500)).map(_cut)
).filter(lambda text: not is_json(text))


async def not_json_example(w: World, text: str, stage: str, finish: str) -> None:
    outcome = await fuzz(w, stage, [text], finish=finish)
    assert outcome.answered
    assert len(outcome.errors) == 1, outcome.events
    error = outcome.errors[0]
    assert error["code"] == "invalid_json", error
    assert "event_id" not in error  # nothing of an unparseable frame is trusted
    assert error["retryable"] is False
    assert error["fatal"] is False
    await w.check_unaffected()


async def test_text_that_is_not_json_gets_invalid_json(gateway_factory: GatewayFactory) -> None:
    async with world(gateway_factory) as w:

        @FUZZ
        @given(text=broken_json, stage=stages, finish=finishes)
        def not_json(text: str, stage: str, finish: str) -> None:
            w.run(not_json_example(w, text, stage, finish))

        await run_property(not_json)


# -- 3. random binary ---------------------------------------------------------------------------


def expected_binary_code(frame: bytes, stage: str) -> str | None:
    if not frame or len(frame) % 2:
        return "invalid_audio"
    if stage == "prestart":
        return "not_started"
    if stage == "text":
        return "invalid_event"  # audio is voice-mode only
    return None


async def binary_example(w: World, frames: list[bytes], stage: str, finish: str) -> None:
    outcome = await fuzz(w, stage, list(frames), finish=finish)
    assert outcome.answered
    expected = [code for f in frames if (code := expected_binary_code(f, stage)) is not None]
    assert [e["code"] for e in outcome.errors] == expected, outcome.events
    for error in outcome.errors:
        assert "event_id" not in error  # a binary frame has none
        assert error["retryable"] is False
        assert error["fatal"] is False
    await w.check_unaffected()


async def test_random_binary_frames_get_errors_and_the_server_stays_up(
    gateway_factory: GatewayFactory,
) -> None:
    async with world(gateway_factory) as w:

        @FUZZ
        @given(
            frames=st.lists(st.binary(max_size=5000), min_size=1, max_size=4),
            stage=stages,
            finish=finishes,
        )
        def random_binary(frames: list[bytes], stage: str, finish: str) -> None:
            w.run(binary_example(w, frames, stage, finish))

        await run_property(random_binary)


# -- 4. random orders of valid-ish events -------------------------------------------------------

DIRECTIVES = [
    "hello",
    "/say x",
    "/say one two three",
    "/silence",
    "/tool get_current_time {}",
    '/tool get_current_time {"timezone":"Europe/Paris"}',
    "/badjson kb_search",
    '/tool kb_search {"query":"fees"}',
    '/tool calendar_create_event {"title":"Dentist","start":"2026-12-01T10:00:00+01:00"}',
    "yes",
    '/tool echo {"text":"hi","count":2}',
    "/tool crasher {}",
    '/tool raises_tool_error {"type":"NOT_FOUND"}',
    '/tools get_current_time {} ;; echo {"text":"a"}',
    '/tool remember_for_next_turn {"message":"ask about the dentist"}',
    '/tool ignore_user {"duration_ms":1000}',
    '/tool sleepy {"ms":30}',
    "/tool end_voice_session {}",
    "/tool create_care_log {}",
    "/tool no_such_tool {}",
    "/error oops",
    "/fail",
]
TONE = pcm_tone(120)
SILENCE = pcm_silence(400)
ping_ids = (
    st.none()
    | st.booleans()
    | st.integers(-1000, 1000)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
)
actions = st.one_of(
    st.builds(lambda m: {"type": "session.start", "mode": m}, st.sampled_from(["voice", "text"])),
    st.builds(
        lambda t: {"type": "text.send", "text": t},
        st.one_of(
            st.sampled_from(DIRECTIVES),
            st.sampled_from(DIRECTIVES),
            st.sampled_from(DIRECTIVES),
            st.text(min_size=1, max_size=20),
        ),
    ),
    st.builds(
        lambda a: {"type": "audio.append", "audio": base64.b64encode(a).decode()},
        st.sampled_from([TONE, SILENCE, b""]) | st.binary(max_size=400),
    ),
    st.sampled_from([TONE, SILENCE, b"", b"\x01"]) | st.binary(max_size=2000),
    # session.end is one in six of these: a sequence should usually get to its end.
    st.sampled_from(
        [
            {"type": "audio.commit"},
            {"type": "audio.commit"},
            {"type": "audio.clear"},
            {"type": "response.cancel"},
            {"type": "response.cancel"},
            {"type": "session.end", "reason": "fuzz"},
        ]
    ),
    st.builds(
        lambda c, d: {"type": "confirmation.respond", "confirmation_id": c, "decision": d},
        st.sampled_from(["conf_0"]) | st.text(min_size=1, max_size=8),
        st.sampled_from(["approve", "reject"]),
    ),
    st.builds(
        lambda m: {"type": "session.update", **m},
        st.sampled_from([{"mode": "voice"}, {"mode": "text"}, {"instructions": "Be brief."}]),
    ),
    st.builds(lambda i: {"type": "ping", "id": i}, ping_ids),
    st.builds(
        lambda r, ms: {"type": "audio.playback", "response_id": r, "played_ms": ms},
        st.sampled_from(["resp_1", "resp_2"]) | st.text(min_size=1, max_size=8),
        st.integers(0, 10**6),
    ),
)


@dataclass
class Oracle:
    """What the reader must answer, frame by frame: error codes and pong ids, in order."""

    started: bool
    mode: str | None
    errors: list[tuple[str, str | None]] = field(default_factory=list)  # (code, event_id)
    pongs: list[Any] = field(default_factory=list)
    ended: bool = False

    def feed(self, action: dict[str, Any] | bytes, event_id: str) -> None:
        if self.ended:
            return
        if isinstance(action, bytes):
            if not action or len(action) % 2:
                self.errors.append(("invalid_audio", None))
            elif not self.started:
                self.errors.append(("not_started", None))
            elif self.mode != "voice":
                self.errors.append(("invalid_event", None))
            return
        kind = action["type"]
        if kind == "ping":
            self.pongs.append(action["id"])
        elif kind == "session.end":
            self.ended = True
        elif kind == "audio.append" and _whole_samples(action["audio"]) is False:
            self.errors.append(("invalid_audio", event_id))
        elif kind == "session.start":
            if self.started:
                self.errors.append(("already_started", event_id))
            else:
                self.started, self.mode = True, action["mode"]
        elif not self.started:
            self.errors.append(("not_started", event_id))
        elif kind == "audio.append" and self.mode != "voice":
            self.errors.append(("invalid_event", event_id))
        elif kind == "confirmation.respond":
            self.errors.append(("confirmation_not_found", event_id))
        elif kind == "session.update" and "mode" in action:
            self.mode = action["mode"]


def _whole_samples(encoded: str) -> bool:
    pcm = base64.b64decode(encoded)
    return bool(pcm) and len(pcm) % 2 == 0


def _typed(value: Any) -> tuple[str, Any]:
    return (type(value).__name__, value)


async def sequence_example(
    w: World, stage: str, sequence: list[dict[str, Any] | bytes], finish: str, settle: bool
) -> None:
    oracle = Oracle(started=stage != "prestart", mode=None if stage == "prestart" else stage)
    frames: list[str | bytes] = []
    for index, action in enumerate(sequence):
        event_id = f"ev{index}"
        oracle.feed(action, event_id)
        frames.append(
            action if isinstance(action, bytes) else json.dumps({**action, "event_id": event_id})
        )
    outcome = await fuzz(w, stage, frames, finish=finish, settle=settle)

    got_errors = [
        (e["code"], e.get("event_id"))
        for e in outcome.events
        if e["type"] == "error" and e["code"] != "upstream_error"
    ]
    got_pongs = [_typed(e["id"]) for e in outcome.events[: outcome.probe_at] if e["type"] == "pong"]
    want_pongs = [_typed(i) for i in oracle.pongs]
    cut_short = any(e["type"] == "session.ended" for e in outcome.events[: outcome.probe_at])
    if cut_short or not outcome.answered:
        # The session ended on the way (session.end, /fail, an END_VOICE_SESSION intent): the
        # frames after that are not answered, the ones before are answered as always.
        assert got_errors == oracle.errors[: len(got_errors)], (got_errors, oracle.errors)
        assert got_pongs == want_pongs[: len(got_pongs)], (got_pongs, want_pongs)
    else:
        assert got_errors == oracle.errors, outcome.events
        assert got_pongs == want_pongs, outcome.events
    for error in outcome.events:
        if error["type"] == "error" and error["code"] == "upstream_error":
            assert "event_id" not in error, error
            assert error["fatal"] is False, error
    await w.check_unaffected()


async def test_random_event_orders_are_answered_in_order(gateway_factory: GatewayFactory) -> None:
    async with world(gateway_factory) as w:

        @FUZZ_SLOW
        @given(
            stage=stages,
            sequence=st.lists(actions, min_size=1, max_size=15),
            finish=finishes,
            settle=st.booleans(),
        )
        def random_orders(
            stage: str, sequence: list[dict[str, Any] | bytes], finish: str, settle: bool
        ) -> None:
            w.run(sequence_example(w, stage, sequence, finish, settle))

        await run_property(random_orders)


# -- 5. a flood that nobody reads ---------------------------------------------------------------


def flood_frames(count: int, seed: int) -> list[str | bytes]:
    """A deterministic random mix of everything a bad client can send."""
    rng = random.Random(seed)
    makers: list[Callable[[], str | bytes]] = [
        lambda: json.dumps({"type": "ping", "id": rng.randrange(10**6)}),
        lambda: json.dumps({"type": "text.send", "text": rng.choice(DIRECTIVES[:12])}),
        lambda: json.dumps({"type": rng.choice(["bogus", "session.start", "audio.commit"])}),
        lambda: json.dumps({"type": "confirmation.respond", "confirmation_id": "c", "x": 1}),
        lambda: "{" * rng.randrange(1, 50),
        lambda: json.dumps({"type": "ping", "junk": "x" * rng.randrange(60_000)}),
        lambda: rng.randbytes(rng.randrange(0, 64_000)),
        lambda: TONE if rng.random() < 0.5 else SILENCE,
        lambda: json.dumps({"type": "audio.append", "audio": base64.b64encode(TONE).decode()}),
    ]
    return [rng.choice(makers)() for _ in range(count)]


async def test_a_flooding_client_that_never_reads_does_not_stall_others(
    gateway_factory: GatewayFactory,
) -> None:
    gw = await gateway_factory()  # default limits: rate limiting is part of the defence
    # The flood ends with session.end (never rate limited): the flooder's session is gone once
    # the server has worked through every frame before it.
    frames = [*flood_frames(2000, seed=20240601), json.dumps({"type": "session.end"})]
    async with (
        gw.session("text", sub="bob") as bystander,
        gw.connect(sub="mallory") as flooder,
    ):
        flooded = (await flooder.start("voice"))["session_id"]
        round_trips: list[float] = []
        # 200 frames at a time, and after each batch (while the server is still working through
        # it) one round trip of the bystander: a reply or a pong.
        for n, first_frame in enumerate(range(0, len(frames), 200)):
            batch = frames[first_frame : first_frame + 200]
            for frame in batch:
                await flooder.send_raw(frame)
            began = time.monotonic()
            if n % 2 == 0:
                reply = await bystander.say(f"during flood {n}")
                assert reply[-1]["text"] == f"You said: during flood {n}"
            else:
                await bystander.send("ping", id=n)
                assert await bystander.next(within=2.0) == {"type": "pong", "id": n}
            round_trips.append(time.monotonic() - began)
        assert len(round_trips) == 11
        assert max(round_trips) < 1.0, round_trips
        assert not [e for e in bystander.events if e["type"] == "error"]
        await wait_for_condition(lambda: flooded not in gw.manager.sessions, within=10)

        # Now the flooder reads: it was answered (errors, pongs, replies), up to session.ended.
        ended = await flooder.last("session.ended", within=10)
        assert ended["reason"] == "client"
        assert await flooder.wait_closed() == 1000
        errors = [e for e in flooder.events if e["type"] == "error"]
        for error in errors:
            check_error(error)
        codes = {e["code"] for e in errors}
        assert {"rate_limited", "invalid_json", "invalid_audio", "unknown_event"} <= codes
        limited = next(e for e in errors if e["code"] == "rate_limited")
        assert limited["retryable"] is True
        assert limited["fatal"] is False
        assert any(e["type"] == "pong" for e in flooder.events)

        # Still serving: the bystander after the flood, and a new session.
        reply = await bystander.say("after the flood")
        assert reply[-1]["text"] == "You said: after the flood"
        async with gw.session("text", sub="carol") as newcomer:
            reply = await newcomer.say("hi")
            assert reply[-1]["text"] == "You said: hi"
            await newcomer.send("session.end")
            await newcomer.last("session.ended")
        await wait_for_condition(
            lambda: set(gw.manager.sessions) == {bystander.started["session_id"]}
        )
        assert gw.metric("gateway_active_sessions") == 1
        async with gw.http.get(f"{gw.url}/healthz") as response:
            assert response.status == 200


# -- nothing may follow session.ended -----------------------------------------------------------
# Regression tests: the model may have more queued (a response.started, a speech frame, a held
# response.done) when the session ends; none of it may reach the client after session.ended.


async def test_nothing_follows_session_ended_when_a_response_is_in_flight(
    gateway: Gateway,
) -> None:
    async with gateway.session("text") as client:
        await client.send("text.send", text="/tool get_current_time {}")
        await client.send("session.end")
        assert await client.wait_closed() == 1000
        last = client.events[-1]
        assert (last["type"], last["reason"]) == ("session.ended", "client"), types(client.events)
        assert set(last) == {"type", "reason", "usage"}


async def test_no_audio_follows_session_ended(gateway: Gateway) -> None:
    async with gateway.session("voice") as client:
        await client.send("text.send", text="hello")
        await client.send("ping", id="p")
        await client.until("pong", id="p")  # the reply's speech is on its way
        await client.send("session.end")
        assert await client.wait_closed() == 1000
        kinds = [kind if kind == "audio" else event["type"] for kind, event in client.timeline]
        assert "audio" in kinds
        assert kinds[-1] == "session.ended", kinds[kinds.index("session.ended") :]
