"""The conversation state of ``RealtimeCodec`` and what the session puts into it.

``RealtimeInputs`` holds everything that lasts across connections (the replay log, the uplink
buffer, pending calls and requests) and turns the session's inputs (audio, text, tool results,
cancel, truncate, mode changes) into client frames queued in ``outbox``; it also knows what a new
connection needs (``resume``). ``codec.RealtimeCodec`` adds the decoding of server events. The
rules both keep are in the theory of operation of ``codec``. Pure: no I/O, no clock.
"""

from __future__ import annotations

import base64
import dataclasses
from binascii import b2a_base64
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from transports import events as ev
from transports.base import Mode, ToolChoice, ToolResult, TurnDetection, UpstreamConfig
from transports.openai_realtime import wire
from transports.openai_realtime.replay import Entry, ReplayLog
from transports.openai_realtime.responses import ResponseState
from transports.openai_realtime.uplink import Uplink

__all__ = ["RealtimeInputs"]

_RESPONSE_CREATE_ID = "gw_response_"


class RealtimeInputs:
    def __init__(
        self,
        config: UpstreamConfig,
        *,
        transcription_model: str = wire.DEFAULT_TRANSCRIPTION_MODEL,
    ) -> None:
        self.config = config
        self.mode: Mode = config.mode
        self.instructions = config.instructions
        self.transcription_model = transcription_model
        self.outbox: deque[str] = deque()
        self.events: list[ev.UpstreamEvent] = []  # the shell's interface; this codec emits none
        # (event name, details) for the shell to log; never audio or tool data.
        self.notes: list[tuple[str, dict[str, Any]]] = []
        self.connected = False
        self.session_id = ""
        self.expires_at: float | None = None
        self.expired = False  # the server said session_expired: the close that follows is planned
        self.interrupt_response = True
        self.completed_responses = 0  # progress: the transport bounds reconnects between them
        self.replay = ReplayLog()
        for item in config.history:
            self.replay.add(Entry("system" if item.role == "tool" else item.role, item.text))
        self.bytes_per_ms = wire.bytes_per_ms(config)  # both ways: one format in and out
        self.uplink = Uplink(self.bytes_per_ms)
        self._config_sent = ""  # the last session.update built for the server
        self._active: ResponseState | None = None
        self._requested = ""  # event id of a response.create whose response.created is awaited
        self._requests = 0
        self._last_request = ""
        self._want_response = False
        # The response wanted answers tool results only: a forced tool_choice is not applied.
        self._want_follow_up = False
        self._holding_requested = False  # the awaited response.created is a holding line
        self._cancel_next = False  # the client cancelled a response that was not created yet
        self._commit_pending = False  # push-to-talk released while offline
        self._commit_pending_respond = False  # ... and the model was asked to answer it
        # One of our items reached the conversation after the active response had started.
        self._unseen_input = False
        self._recent: OrderedDict[str, ResponseState] = OrderedDict()
        self._seen_calls: OrderedDict[str, None] = OrderedDict()
        self._awaiting: dict[str, set[str]] = {}  # response id → calls without an output

    @property
    def active_response_id(self) -> str | None:
        return None if self._active is None else self._active.response_id

    def session_update(self) -> str:
        """The ``session.update`` for the current mode and instructions (remembered as sent)."""
        self._config_sent = wire.session_update(
            wire.session_config(
                self.config,
                self.mode,
                self.instructions,
                transcription_model=self.transcription_model,
            )
        )
        return self._config_sent

    # -- session → server ----------------------------------------------------------------------

    def _send(self, frame: str) -> None:
        if self.connected:
            self.outbox.append(frame)

    def audio(self, pcm: bytes, encoded: str | None = None) -> None:
        """``encoded``: ``pcm`` as standard base64 when the client sent it so, appended as is
        when the frame goes up whole (no gathering)."""
        if not self.connected:
            self.uplink.keep_offline(pcm)
            return
        chunk = self.uplink.take(pcm)
        if chunk is None:
            return
        if chunk is not pcm or encoded is None:  # binascii without base64's Python wrapper
            encoded = b2a_base64(chunk, newline=False).decode("ascii")
        self.outbox.append(wire.audio_append(encoded))

    def commit(self, *, respond: bool = True) -> None:
        """Push-to-talk end of utterance: the model answers what it heard (unless not
        ``respond``: then only ``request_response`` asks it to)."""
        if not self.connected:
            self._commit_pending = True  # resume() commits the buffered utterance
            self._commit_pending_respond = self._commit_pending_respond or respond
            return
        chunk = self.uplink.flush()
        if chunk is not None:
            self.outbox.append(wire.audio_append(base64.b64encode(chunk).decode("ascii")))
        if self.uplink.uncommitted >= self.uplink.min_commit:
            self.uplink.committed()
            self.outbox.append(wire.audio_commit())
            if respond:
                self.request_response()

    def clear(self) -> None:
        self.uplink.clear()
        self._commit_pending = self._commit_pending_respond = False
        self._send(wire.audio_clear())

    def user_text(self, text: str) -> None:
        r = self._active
        if r is not None and not r.interrupted:
            self._cancel(r, by_client=True)  # a new message supersedes the answer in progress
        self._add_item(Entry("user", text))
        self.request_response()

    def context(self, text: str) -> None:
        self._add_item(Entry("system", text))

    def tool_results(self, results: Sequence[ToolResult]) -> None:
        for result in results:
            response_id = next(
                (rid for rid, ids in self._awaiting.items() if result.call_id in ids), None
            )
            if response_id is None:
                self.notes.append(("tool_result_ignored", {"call_id": result.call_id}))
                continue
            self._add_item(Entry("output", _json(result.envelope), call_id=result.call_id))
            waiting = self._awaiting[response_id]
            waiting.discard(result.call_id)
            if not waiting:
                del self._awaiting[response_id]
                self.request_response(follow_up=True)

    def late_result(self, result: ToolResult) -> None:
        self._add_item(
            Entry(
                "system",
                f"Result of the earlier {result.name} call {result.call_id}, which finished "
                f"after its turn: {_json(result.envelope)}",
            )
        )
        self.request_response(follow_up=True)

    def cancel(self) -> None:
        """The client's ``response.cancel``: stop the answer in progress (or about to start)."""
        self._want_response = False
        if self._active is not None:
            self._cancel(self._active, by_client=True)
        elif self._requested:
            self._cancel_next = True

    def cancel_overdue(self, response_id: str) -> None:
        """The server has not cancelled an interrupted response by itself: do it."""
        r = self._active
        if r is not None and r.response_id == response_id and r.interrupted:
            self._cancel(r)

    def truncate(self, response_id: str, played_ms: int) -> None:
        r = self._recent.get(response_id)
        if r is None:
            return
        remaining = max(0, played_ms)
        for item in r.audio:
            heard = min(remaining, item.forwarded_ms)  # never more than the user could hear
            remaining -= heard
            if heard <= 0:
                break  # this item (and any after it) was not heard at all: nothing to cut
            if item.done and heard >= item.received_ms:
                continue  # played to its end
            item.heard_ms = heard
            self._send(wire.truncate(item.item_id, heard))
            entry = r.entries.get(item.item_id)
            if entry is not None and r.ended:  # else cut when the response ends
                entry.text = r.heard_text(item.item_id)
            break

    def update(
        self,
        *,
        mode: Mode | None = None,
        instructions: str | None = None,
        turn_detection: TurnDetection | None = None,
        tool_choice: ToolChoice | None = None,
    ) -> None:
        changes: dict[str, Any] = {"turn_detection": turn_detection, "tool_choice": tool_choice}
        given = {name: value for name, value in changes.items() if value is not None}
        if given:
            self.config = dataclasses.replace(self.config, **given)
        if mode is not None and mode != self.mode:
            self.mode = mode
            if mode == "text":  # audio the server holds would start a voice turn later
                self.clear()
        if instructions is not None:
            self.instructions = instructions
        if self.connected:
            self.outbox.append(self.session_update())
        # Offline: resume() sends it if it differs from what the new session was given.

    def holding_line(self, instructions: str) -> bool:
        """Ask for a line outside the conversation while a slow tool call runs; False when the
        model is replying, a response is on its way, or the connection is down."""
        if not self.connected or self._active is not None or self._requested:
            return False
        self._requests += 1
        self._requested = self._last_request = f"{_RESPONSE_CREATE_ID}{self._requests}"
        self._holding_requested = True
        modalities = ["audio"] if self.mode == "voice" else ["text"]
        self.outbox.append(wire.holding_line(self._requested, instructions, modalities))
        return True

    def request_response(self, *, follow_up: bool = False) -> None:
        """Ask the model to answer (now, or once the response in progress ends); a
        ``follow_up`` answers tool results only."""
        if not self.connected or self._active is not None or self._requested:
            self._want_follow_up = follow_up and (self._want_follow_up or not self._want_response)
            self._want_response = True
            return
        self.outbox.append(self._response_create(follow_up))

    def _wanted_response(self) -> str:
        follow_up, self._want_follow_up = self._want_follow_up, False
        self._want_response = False
        return self._response_create(follow_up)

    def request_wanted(self) -> None:
        """The response that waited for the one in progress to end is asked for now."""
        if self._want_response:
            follow_up, self._want_follow_up = self._want_follow_up, False
            self._want_response = False
            self.request_response(follow_up=follow_up)

    def _response_create(self, follow_up: bool) -> str:
        self._requests += 1
        self._requested = self._last_request = f"{_RESPONSE_CREATE_ID}{self._requests}"
        choice = self.config.tool_choice
        if follow_up and choice not in ("auto", "none"):  # never forced to call again
            return wire.response_create(self._requested, "auto")
        return wire.response_create(self._requested)

    def _cancel(self, r: ResponseState, *, by_client: bool = False) -> None:
        r.cancelled_by_client = r.cancelled_by_client or by_client
        if not r.cancel_sent:
            r.cancel_sent = True
            self._send(wire.response_cancel(r.response_id))

    def _add_item(self, entry: Entry) -> None:
        self.replay.add(entry)
        self._send(wire.item_create(entry.item()))

    # -- connection changes ----------------------------------------------------------------------

    def connection_lost(self) -> list[ev.UpstreamEvent]:
        """The socket is gone: end the response in flight; keep everything else for ``resume``."""
        self.connected = False
        self.outbox.clear()
        self.uplink.lost()
        out: list[ev.UpstreamEvent] = []
        r, self._active = self._active, None
        if r is not None and not r.ended:
            r.ended = True
            for item_id, entry in r.entries.items():
                entry.text = r.heard_text(item_id)
            out.append(
                ev.ResponseDone(
                    r.response_id, "cancelled" if r.cancelled_by_client else "interrupted"
                )
            )
            if not (r.cancel_sent or r.interrupted or r.aside):
                self._want_response = True  # cut by the network: the model answers again
        if self._requested:
            self._requested = ""
            holding = self._holding_requested  # a holding line is not asked for again
            self._want_response = self._want_response or not (self._cancel_next or holding)
        self._holding_requested = False
        self._cancel_next = False
        return out

    def resume(self) -> list[str]:
        """Frames that rebuild the state on a new connection, after its ``session.updated``."""
        self.connected = True
        self.expired = False
        frames: list[str] = []
        configured, current = self._config_sent, self.session_update()
        if current != configured:  # the mode or instructions changed during the handshake
            frames.append(current)
        frames.extend(wire.item_create(item) for item in self.replay.items())
        for chunk in self.uplink.replay():
            frames.append(wire.audio_append(base64.b64encode(chunk).decode("ascii")))
        if self._commit_pending:
            self._commit_pending = False
            respond, self._commit_pending_respond = self._commit_pending_respond, False
            if self.uplink.uncommitted >= self.uplink.min_commit:
                self.uplink.committed()
                frames.append(wire.audio_commit())
                if respond:  # a user turn: never a follow-up
                    self._want_response, self._want_follow_up = True, False
        if self._want_response:
            frames.append(self._wanted_response())
        return frames


def _json(value: Mapping[str, Any]) -> str:
    return orjson.dumps(value, default=dict).decode()
