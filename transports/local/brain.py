"""The local model's mind: deterministic replies to text, utterances and tool results.

Pure (no asyncio, no clock): ``LocalBrain`` turns one input into one ``Reply``; the transport
shell turns replies into events and does any waiting. Free mode follows these rules, in order:

- after a ``CONFIRMATION_REQUIRED`` result, a message that is exactly ``yes`` or ``confirm``
  (case-insensitive, trimmed, trailing punctuation ignored) calls the same tool(s) again with the
  same arguments plus ``"confirmation_id"``; any other message forgets the pending confirmation;
- ``/tool NAME {json}`` calls NAME with that JSON text (``{}`` when missing);
- ``/tools A {..} ;; B {..}`` calls several tools in one batch, in order;
- ``/badjson NAME`` calls NAME with the invalid arguments ``{"x": `` on purpose;
- ``/say TEXT`` says TEXT; ``/silence`` says nothing (an empty reply);
- ``/slow MS TEXT`` says TEXT after MS milliseconds; ``/fail`` makes the upstream fail;
- ``/error TEXT`` fails this one response with a non-fatal upstream error TEXT;
- anything else (including an unknown ``/word``) → ``You said: <text>``;
- a voice utterance of N ms has the transcript ``audio:<N>ms`` → ``You said: audio:<N>ms``;
- once every call of a batch has its result → ``Tool results: NAME=<envelope JSON>; …`` in call
  order (compact JSON, sorted keys); a late result (``reply_to_late_result``) is answered at once
  in the same format, as a batch of one;
- a request to answer with nothing new to answer (``reply_to_nothing``) → ``I'm listening.``

``tool_choice`` (a ``ToolOffer``: the tools offered, in order, and the choice), as a model
follows it: ``none`` → a reply that would call tools says ``You said: <input>`` instead (as
does one that calls only tools not offered, when the offer says only those may be called);
``required`` → a reply without a call calls the first tool offered with ``{}``; a forced tool
→ the reply is one call of it (with the arguments the input gave it, else ``{}``). Without an
offer (None) the rules above stand alone.

Scenario mode (``from_scenario``) replaces all of these rules by a script (``scenario.py``).
Call ids are ``call_1``, ``call_2``… per brain (``number_calls_apart`` changes the prefix, for a
brain that takes over a conversation whose earlier calls another brain numbered).
"""

from __future__ import annotations

import os
import string
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from transports.base import ForcedTool, ToolChoice
from transports.local.scenario import (
    Scenario,
    ScenarioInput,
    ScenarioStep,
    TextInput,
    ToolResultsInput,
    UtteranceInput,
    describe_expectation,
    describe_input,
    expectation_matches,
)

__all__ = [
    "BAD_JSON_ARGUMENTS",
    "FAIL_MESSAGE",
    "LISTENING",
    "CallTools",
    "Fail",
    "LocalBrain",
    "PendingConfirmation",
    "Reply",
    "ResponseError",
    "Say",
    "ToolCall",
    "ToolOffer",
    "ToolResultTuple",
    "compact_json",
    "merge_confirmation_id",
    "utterance_transcript",
]

BAD_JSON_ARGUMENTS = '{"x": '
FAIL_MESSAGE = "local model asked to fail"
LISTENING = "I'm listening."
_YES_WORDS = frozenset({"yes", "confirm"})
_TRAILING = string.punctuation + string.whitespace

# (call_id, name, envelope), as the transport hands results over.
ToolResultTuple = tuple[str, str, Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class ToolCall:
    call_id: str
    name: str
    arguments: str  # JSON text, passed on verbatim (possibly invalid on purpose)


@dataclass(frozen=True, slots=True)
class Say:
    text: str
    delay_ms: int = 0  # think before answering: the shell waits this long (wall clock)
    type: Literal["say"] = "say"


@dataclass(frozen=True, slots=True)
class CallTools:
    calls: tuple[ToolCall, ...]
    type: Literal["call_tools"] = "call_tools"


@dataclass(frozen=True, slots=True)
class Fail:
    message: str = FAIL_MESSAGE
    type: Literal["fail"] = "fail"


@dataclass(frozen=True, slots=True)
class ResponseError:
    """A provider error for one response; the session goes on (a 'server_error' event)."""

    message: str
    type: Literal["response_error"] = "response_error"


Reply = Say | CallTools | Fail | ResponseError


@dataclass(frozen=True, slots=True)
class ToolOffer:
    """The tools a reply may call (their names, in the order offered) and ``tool_choice``;
    ``only_offered``: a call of any other tool is not made (a model told its functions by name
    cannot call another one)."""

    names: tuple[str, ...]
    choice: ToolChoice = "auto"
    only_offered: bool = False


@dataclass(frozen=True, slots=True)
class PendingConfirmation:
    name: str
    arguments: str  # the original call's arguments
    confirmation_id: str


def utterance_transcript(duration_ms: int) -> str:
    return f"audio:{duration_ms}ms"


def compact_json(value: Any) -> str:
    """Compact JSON with sorted keys; nested read-only mappings are accepted too."""
    return orjson.dumps(value, default=_mapping_to_dict, option=orjson.OPT_SORT_KEYS).decode()


def _mapping_to_dict(value: Any) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def merge_confirmation_id(arguments: str, confirmation_id: str) -> str:
    """The same arguments plus ``confirmation_id``; non-object arguments are replaced."""
    try:
        parsed = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        parsed = None
    merged = dict(parsed) if isinstance(parsed, dict) else {}
    merged["confirmation_id"] = confirmation_id
    return orjson.dumps(merged).decode()


def _is_yes(text: str) -> bool:
    return text.strip().rstrip(_TRAILING).lower() in _YES_WORDS


def _confirmation_id(envelope: Mapping[str, Any]) -> str | None:
    error = envelope.get("error")
    if envelope.get("ok") is not False or not isinstance(error, Mapping):
        return None
    confirmation_id = error.get("confirmationId")
    if error.get("type") != "CONFIRMATION_REQUIRED" or not isinstance(confirmation_id, str):
        return None
    return confirmation_id


def _split_name_and_arguments(spec: str) -> tuple[str, str]:
    name, *arguments = spec.split(None, 1)
    return name, arguments[0].strip() if arguments else "{}"


class LocalBrain:
    def __init__(self, scenario: Scenario | None = None) -> None:
        self.scenario = scenario
        self.scenario_mismatches = 0
        self._next_step = 0
        self._calls_made = 0
        self._call_prefix = "call_"
        self._open_batch: tuple[ToolCall, ...] = ()
        self._batch_results: dict[str, Mapping[str, Any]] = {}
        self._pending: tuple[PendingConfirmation, ...] = ()

    @classmethod
    def from_scenario(cls, path: str | os.PathLike[str]) -> LocalBrain:
        return cls(Scenario.load(path))

    def number_calls_apart(self, prefix: str) -> None:
        """Number calls ``<prefix>1``, ``<prefix>2``…: ids no other brain gave."""
        self._call_prefix = prefix

    @property
    def open_call_ids(self) -> tuple[str, ...]:
        """Calls of the last batch still waiting for a result."""
        return tuple(c.call_id for c in self._open_batch if c.call_id not in self._batch_results)

    @property
    def pending_confirmations(self) -> tuple[PendingConfirmation, ...]:
        return self._pending

    @property
    def scenario_finished(self) -> bool:
        return self.scenario is not None and self._next_step >= len(self.scenario.steps)

    # Inputs ---------------------------------------------------------------------------------

    def reply_to_text(self, text: str, offer: ToolOffer | None = None) -> Reply:
        return self._offered(offer, text.strip(), lambda: self._text(text))

    def _text(self, text: str) -> Reply:
        if self.scenario is not None:
            return self._scripted(TextInput(text))
        pending, self._pending = self._pending, ()
        if pending and _is_yes(text):
            return self._call_tools(
                (p.name, merge_confirmation_id(p.arguments, p.confirmation_id)) for p in pending
            )
        return self._command(text.strip())

    def reply_to_utterance(self, duration_ms: int, offer: ToolOffer | None = None) -> Reply:
        transcript = utterance_transcript(duration_ms)
        return self._offered(offer, transcript, lambda: self._utterance(transcript))

    def _utterance(self, transcript: str) -> Reply:
        if self.scenario is not None:
            return self._scripted(UtteranceInput(transcript))
        self._pending = ()  # an utterance is never a typed "yes"
        return Say(f"You said: {transcript}")

    def reply_to_nothing(self, offer: ToolOffer | None = None) -> Reply:
        """Asked to answer with nothing new to answer."""
        return self._offered(offer, "", lambda: Say(LISTENING))

    def _offered(self, offer: ToolOffer | None, said: str, reply_of: Callable[[], Reply]) -> Reply:
        """``reply_of()`` as ``offer``'s ``tool_choice`` lets it be (see the module docstring);
        ``said``: the input, for the words that replace a call that may not be made."""
        before = (self._open_batch, self._batch_results, self._pending)
        reply = reply_of()
        if offer is None:
            return reply
        choice = offer.choice
        if isinstance(reply, CallTools) and offer.only_offered:
            kept = [(c.name, c.arguments) for c in reply.calls if c.name in offer.names]
            if len(kept) < len(reply.calls):
                self._open_batch, self._batch_results, self._pending = before
                reply = self._call_tools(kept) if kept else Say(f"You said: {said}")
        if isinstance(reply, CallTools):
            if choice == "none":
                self._open_batch, self._batch_results, self._pending = before  # never made
                return Say(f"You said: {said}")
            if isinstance(choice, ForcedTool) and [c.name for c in reply.calls] != [choice.name]:
                self._open_batch, self._batch_results, self._pending = before  # never made
                given = next((c.arguments for c in reply.calls if c.name == choice.name), "{}")
                return self._call_tools([(choice.name, given)])
        if isinstance(reply, Say):
            if isinstance(choice, ForcedTool):
                return self._call_tools([(choice.name, "{}")])
            if choice == "required" and offer.names:
                return self._call_tools([(offer.names[0], "{}")])
        return reply

    def reply_to_tool_results(
        self, results: Iterable[ToolResultTuple], offer: ToolOffer | None = None
    ) -> Reply | None:
        """Collect results of the open batch; the reply comes once every call has one.

        Results for call ids outside the open batch (unknown, or of an earlier batch) and repeated
        results for the same call are ignored. ``None`` means nothing to answer yet.
        """
        open_ids = set(self.open_call_ids)
        for call_id, _name, envelope in results:
            if call_id in open_ids:
                self._batch_results[call_id] = envelope
                open_ids.discard(call_id)
        if not self._open_batch or open_ids:
            return None
        batch, envelopes = self._open_batch, self._batch_results
        self._open_batch, self._batch_results = (), {}
        self._pending = tuple(
            PendingConfirmation(call.name, call.arguments, confirmation_id)
            for call in batch
            if (confirmation_id := _confirmation_id(envelopes[call.call_id])) is not None
        )
        named = [(call.name, envelopes[call.call_id]) for call in batch]
        return self._offered(offer, "tool results", lambda: self._answer_results(named))

    def reply_to_late_result(
        self,
        call_id: str,
        name: str,
        envelope: Mapping[str, Any],
        offer: ToolOffer | None = None,
    ) -> Reply:
        """A result the model no longer waited for (a confirmation the client approved or
        rejected, for a call of an earlier batch): answered at once like a batch of one.

        It settles the confirmation, so a pending spoken "yes" is forgotten. ``call_id`` is only
        informative: the open batch, if any, keeps waiting for its own results.
        """
        self._pending = ()
        return self._offered(
            offer, "tool results", lambda: self._answer_results([(name, envelope)])
        )

    def _answer_results(self, named_envelopes: list[tuple[str, Mapping[str, Any]]]) -> Reply:
        if self.scenario is not None:
            return self._scripted(ToolResultsInput(tuple(name for name, _ in named_envelopes)))
        parts = [f"{name}={compact_json(envelope)}" for name, envelope in named_envelopes]
        return Say("Tool results: " + "; ".join(parts))

    # Free mode ------------------------------------------------------------------------------

    def _command(self, text: str) -> Reply:
        command, *arguments = text.split(None, 1) or [""]
        rest = arguments[0].strip() if arguments else ""
        match command:
            case "/tool" if rest:
                return self._call_tools([_split_name_and_arguments(rest)])
            case "/tools":
                specs = [spec for spec in rest.split(";;") if spec.strip()]
                if specs:
                    return self._call_tools(_split_name_and_arguments(spec) for spec in specs)
            case "/badjson" if rest:
                return self._call_tools([(rest.split()[0], BAD_JSON_ARGUMENTS)])
            case "/say":
                return Say(rest)
            case "/silence":
                return Say("")
            case "/fail":
                return Fail()
            case "/error":
                return ResponseError(rest or "local model error")
            case "/slow":
                delay, *slow_text = rest.split(None, 1) or [""]
                if delay.isdigit():
                    return Say(slow_text[0] if slow_text else "", delay_ms=int(delay))
                return Say("Usage: /slow MS TEXT")
        return Say(f"You said: {text}")

    def _call_tools(
        self, calls: Iterable[tuple[str, str]], ids: Sequence[str | None] = ()
    ) -> CallTools:
        """``ids``: a scenario's own call ids, by position (None: numbered here)."""
        batch = []
        for i, (name, arguments) in enumerate(calls):
            self._calls_made += 1
            given = ids[i] if i < len(ids) else None
            call_id = given or f"{self._call_prefix}{self._calls_made}"
            batch.append(ToolCall(call_id, name, arguments))
        self._open_batch, self._batch_results = tuple(batch), {}
        return CallTools(self._open_batch)

    # Scenario mode --------------------------------------------------------------------------

    def _scripted(self, given: ScenarioInput) -> Reply:
        assert self.scenario is not None
        steps = self.scenario.steps
        number = self._next_step + 1  # steps are numbered from 1 in messages
        if self._next_step >= len(steps):
            self.scenario_mismatches += 1
            return Say(
                f"Scenario mismatch at step {number}: expected the end of scenario "
                f"{self.scenario.name!r}, got {describe_input(given)}"
            )
        step = steps[self._next_step]
        if not expectation_matches(step.expect, given):
            self.scenario_mismatches += 1
            return Say(
                f"Scenario mismatch at step {number}: expected "
                f"{describe_expectation(step.expect)}, got {describe_input(given)}"
            )
        self._next_step += 1
        return self._scripted_reply(step)

    def _scripted_reply(self, step: ScenarioStep) -> Reply:
        if step.say is not None:
            return Say(step.say, delay_ms=step.delay_ms)
        confirmations = {p.name: p.confirmation_id for p in self._pending}
        calls = [
            (call.name, merge_confirmation_id(call.arguments, confirmations[call.name]))
            if call.with_confirmation and call.name in confirmations
            else (call.name, call.arguments)
            for call in step.calls
        ]
        return self._call_tools(calls, [call.call_id for call in step.calls])
