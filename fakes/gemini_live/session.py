"""The per-connection protocol state of the fake Gemini Live server, as pure code.

Inputs are parsed client messages (any mix of snake_case and camelCase names), "send goAway
now" and "close now"; outputs are ``Action``s (``wire``) for the async shell. Nothing here
awaits, sleeps or reads a clock, so every rule is testable without an event loop.
``FakeGeminiSession`` parses and takes inputs; its base ``turns.TurnEngine`` runs the turns and
the tool calls (BLOCKING and NON_BLOCKING: see ``turns``).

Theory of operation. One connection is in one phase at a time:

=================  ===========================================================================
phase              what moves it on
=================  ===========================================================================
AWAITING_SETUP     ``setup`` → IDLE (``setupComplete``), or SETUP_HANG when
                   ``setup_complete=False``; anything else → close 1007; a bad setup → 1007;
                   an unknown resumption handle → 1008 "Session not found"
SETUP_HANG         nothing: every message is ignored (noted)
IDLE               an input → GENERATING (speech, ``/hang``) or TOOLS_PENDING (BLOCKING tool
                   calls); NON_BLOCKING results due → GENERATING (their answer)
GENERATING         the run ends → IDLE (``generationComplete``, ``turnComplete``); barge-in or
                   an ``INTERRUPT`` result → IDLE (``interrupted``, ``turnComplete``); a
                   toolCall of NON_BLOCKING calls only goes on GENERATING (the acknowledgement)
TOOLS_PENDING      every BLOCKING call id answered → GENERATING (the same turn goes on) or
                   TOOLS_PENDING again (the brain called more tools); barge-in → IDLE
                   (``interrupted``, ``toolCallCancellation``, ``turnComplete``)
CLOSED             terminal: a ``Close`` was emitted (a refused message, ``/drop``, a brain
                   failure, the end of a ``goAway``), or the socket went away
=================  ===========================================================================

A turn that ends (completed or interrupted) starts what waited for it: the NON_BLOCKING results
due (one turn for all), else the newest input that waited.

- Inputs: ``clientContent`` turns go to the history and (with ``turnComplete``) the newest user
  text is answered; ``realtimeInput.text`` likewise; audio feeds the server VAD (``audio_input``),
  an utterance end sends ``inputTranscription`` (when enabled) and is answered. What answers is
  ``routing.decide`` (directives, then the session's ``LocalBrain``).
- Barge-in: any ``clientContent`` while busy interrupts; detected speech, ``activityStart`` and
  ``realtimeInput.text`` interrupt when ``interrupt_on_speech`` and the setup's
  ``activityHandling`` allow it, else the input waits until the turn is over (only the newest
  waiting input is answered).
- Resumption (``memory``): with ``sessionResumption`` on, a turn starts with
  ``sessionResumptionUpdate {"newHandle": "", "resumable": false}``, a ``toolCall`` is followed
  by another one (tools pending), and a turn's end (completed or interrupted) is followed by a
  fresh handle (``resumable: true``), unless NON_BLOCKING calls are still open (then
  ``resumable: false`` again; see ``turns``); a connection that resumed gets a handle right
  after ``setupComplete``. The brain and history live in the session's memory, so they survive.
- Tools: ``turns`` (the semantics) and ``tools`` (the bookkeeping and the checks of
  ``toolResponse``); a declaration's ``behavior`` is checked by ``setup``, and a
  ``contextUpdate`` that replaces the tools is checked the same way.
- Echo mode: each audio input is answered at once by one ``modelTurn`` carrying the same base64
  text (split in ~960 kB pieces only if it would not fit a 1 MiB frame); no VAD, no brain.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fakes.gemini_live import messages as to_client
from fakes.gemini_live.audio_input import AudioInput, InputEvent, SpeechStarted, pcm_rate
from fakes.gemini_live.memory import SessionStore
from fakes.gemini_live.options import FakeGeminiOptions
from fakes.gemini_live.routing import Input, NothingInput, TextInput, UtteranceInput
from fakes.gemini_live.setup import apply_context_update, function_declarations, parse_setup
from fakes.gemini_live.turns import BUSY, ENTITY_NOT_FOUND, GO_AWAY_REASON, Phase, TurnEngine
from fakes.gemini_live.wire import (
    INVALID_ARGUMENT,
    NOT_FOUND,
    Action,
    ProtocolError,
    Send,
    SendRaw,
    client_message,
    decode_base64,
    expect_list,
    expect_object,
    is_base64_text,
)
from transports.local.brain import utterance_transcript

__all__ = [
    "ENTITY_NOT_FOUND",
    "GO_AWAY_REASON",
    "SESSION_NOT_FOUND",
    "FakeGeminiSession",
    "Phase",
]

SESSION_NOT_FOUND = "Session not found"
_BASE64_FAILED = "Invalid value at 'realtime_input.audio.data' (TYPE_BYTES), Base64 decoding failed"


def _invalid(reason: str) -> ProtocolError:
    return ProtocolError(INVALID_ARGUMENT, reason)


def _text_of(parts: list[Any]) -> str | None:
    texts = [p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)]
    return "".join(texts) if texts else None


class FakeGeminiSession(TurnEngine):
    """The protocol of one connection: parsing and inputs here, turns in ``TurnEngine``."""

    def __init__(
        self, options: FakeGeminiOptions | None = None, store: SessionStore | None = None
    ) -> None:
        super().__init__(options, store)
        self.resumed_from: str | None = None
        self._input = AudioInput()
        self._user_text: str | None = None  # newest user text of clientContent, unanswered

    @property
    def _speech_interrupts(self) -> bool:
        return self.options.interrupt_on_speech and self._config().interrupts

    # Inputs ---------------------------------------------------------------------------------

    def handle(self, raw: Any) -> list[Action]:
        """One parsed client message (JSON value) → actions."""
        if self.phase is Phase.CLOSED:
            return []
        try:
            return self._dispatch(raw)
        except ProtocolError as error:
            return self.close(error.code, error.reason)

    def invalid_frame(self, detail: str) -> list[Action]:
        """A frame that is not JSON: the service closes with 1007."""
        return self.close(INVALID_ARGUMENT, f"Invalid JSON payload received. {detail}")

    # Dispatch -------------------------------------------------------------------------------

    def _dispatch(self, raw: Any) -> list[Action]:
        key, body = client_message(raw)
        if self.phase is Phase.AWAITING_SETUP:
            if key != "setup":
                raise _invalid(f"The first message must be setup, got {key}.")
            return self._setup(body)
        if self.phase is Phase.SETUP_HANG:
            self.ignored.append(f"{key} before setupComplete")
            return []
        if key == "setup":
            raise _invalid("setup must be the first message, and only the first.")
        if key == "clientContent":
            return self._client_content(expect_object(body, "clientContent"))
        if key == "realtimeInput":
            return self._realtime_input(expect_object(body, "realtimeInput"))
        if key == "toolResponse":
            return self._tool_response(expect_object(body, "toolResponse"))
        return self._context_update(body)

    def _context_update(self, body: Any) -> list[Action]:
        tools = body.get("tools") if isinstance(body, dict) else None
        if isinstance(tools, dict) and "tools" in tools:
            functions = function_declarations(tools["tools"], "context_update.tools.tools")
            self.config = dataclasses.replace(
                self._config(), function_names=functions.names, non_blocking=functions.non_blocking
            )
        self.setup = apply_context_update(self.setup, body)
        return []

    def _setup(self, body: Any) -> list[Action]:
        config = parse_setup(body)
        if config.handle is not None:
            memory = self.store.restore(config.handle)
            if memory is None:
                raise ProtocolError(NOT_FOUND, SESSION_NOT_FOUND)
        else:
            memory = self.store.new_session()
        self.setup, self.config, self.memory = dict(body), config, memory
        self.resumed_from = config.handle
        self._input = AudioInput(
            automatic=config.automatic_activity, silence_duration_ms=config.silence_duration_ms
        )
        if not self.options.setup_complete:
            self.phase = Phase.SETUP_HANG
            return []
        self.phase = Phase.IDLE
        actions: list[Action] = [Send(to_client.setup_complete())]
        if config.resumption and config.handle is not None:
            actions.append(
                Send(to_client.resumption_update(self.store.issue(memory), resumable=True))
            )
        return actions

    # Client content and text ------------------------------------------------------------------

    def _client_content(self, body: dict[str, Any]) -> list[Action]:
        turns = [
            expect_object(turn, f"clientContent.turns[{index}]")
            for index, turn in enumerate(expect_list(body.get("turns"), "clientContent.turns"))
        ]
        actions = self._interrupt() if self.phase in BUSY else []  # always, as documented
        for turn in turns:
            parts = expect_list(turn.get("parts"), "clientContent.turns.parts")
            role = turn.get("role") or "user"
            self._brain_memory().history.append({"role": role, "parts": parts})
            text = _text_of(parts)
            if role == "user" and text is not None:
                self._user_text = text
        if body.get("turnComplete") is True:
            text, self._user_text = self._user_text, None
            given: Input = TextInput(text) if text is not None else NothingInput()
            actions += self._answer(given, interrupt=True)
        return actions

    def _realtime_input(self, body: dict[str, Any]) -> list[Action]:
        if len(body) != 1:
            raise _invalid(
                "Invalid JSON payload received. realtimeInput has exactly one field, "
                f"got {sorted(body)}."
            )
        ((key, value),) = body.items()
        if key == "audio":
            return self._audio(expect_object(value, "realtimeInput.audio"))
        if key == "mediaChunks":
            chunks = expect_list(value, "realtimeInput.mediaChunks")
            if chunks and pcm_rate(expect_object(chunks[0], "mediaChunks[0]").get("mimeType")):
                return self._audio(chunks[0])  # only the first chunk is used, as the API says
            self.ignored.append("realtimeInput.mediaChunks without audio")
            return []
        if key == "video":
            self.ignored.append("realtimeInput.video")
            return []
        if key == "text":
            if not isinstance(value, str):
                raise _invalid("Invalid value at 'realtime_input.text' (TYPE_STRING).")
            return self._answer(TextInput(value), interrupt=self._speech_interrupts, heard=value)
        if key in ("activityStart", "activityEnd"):
            return self._activity(key)
        if key == "audioStreamEnd":
            if value is True and self._input.automatic:
                return self._heard(self._input.stream_end())
            return []
        raise _invalid(f'Invalid JSON payload received. Unknown name "{key}" at realtimeInput.')

    # Audio ----------------------------------------------------------------------------------

    def _audio(self, blob: dict[str, Any]) -> list[Action]:
        data = blob.get("data")
        if self.options.echo:
            if not isinstance(data, str) or not is_base64_text(data):
                raise _invalid(_BASE64_FAILED)
            return [SendRaw(frame) for frame in to_client.echo_frames(data)]
        rate = pcm_rate(blob.get("mimeType"))
        pcm = decode_base64(data)
        if pcm is None:
            raise _invalid(_BASE64_FAILED)
        if rate is None:
            self.ignored.append(f"audio of type {blob.get('mimeType')!r}")
            return []
        memory = self._brain_memory()
        memory.input_audio_ms += round(len(pcm) // 2 * 1000 / rate)
        return self._heard(self._input.feed(pcm, rate))

    def _heard(self, events: list[InputEvent]) -> list[Action]:
        actions: list[Action] = []
        for event in events:
            if self.phase is Phase.CLOSED:
                break
            if isinstance(event, SpeechStarted):
                if self.phase in BUSY and self._speech_interrupts:
                    actions += self._interrupt()
            else:
                actions += self._utterance(event.duration_ms)
        return actions

    def _activity(self, key: str) -> list[Action]:
        if self._input.automatic:
            if self.options.reject_manual_activity:
                raise _invalid(
                    f"{key} is only allowed when automatic activity detection is disabled."
                )
            self.ignored.append(f"{key} with automatic activity detection on")
            return []
        if key == "activityStart":
            self._input.activity_start()
            return self._heard([SpeechStarted()])
        ended = self._input.activity_end()
        if ended is None:
            self.ignored.append("activityEnd without activityStart")
            return []
        return self._heard([ended])

    def _utterance(self, duration_ms: int) -> list[Action]:
        transcript = utterance_transcript(duration_ms)
        actions: list[Action] = []
        if self._config().input_transcription:
            actions.append(Send(to_client.input_transcription(transcript)))
        return actions + self._answer(
            UtteranceInput(duration_ms), interrupt=self._speech_interrupts, heard=transcript
        )
