"""What the gateway adds to a Gemini Live conversation on its own waits for the turn in progress.

A ``clientContent`` cuts the server's turn, whatever holds it: a reply, a reply still owed, or
BLOCKING calls, which it cancels (``toolCallCancellation``); their results are then dropped
however ready they are. The soak lost a result that way: a background call's result, adopted
by the node a session had moved to, went as a text turn while the next call was pending.

No event loop, no sockets: ``GeminiCodec`` is driven through its methods and ``receive``; in the
first test it is joined to the pure protocol state of the Gemini fake (``FakeGeminiSession``),
each frame it sends handed to the fake and each message of the fake handed back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import orjson

from fakes.gemini_live.session import FakeGeminiSession
from fakes.gemini_live.wire import Action, Begin, Send
from transports import events as ev
from transports.base import ConversationItem, ToolDeclaration, ToolResult, UpstreamConfig
from transports.gemini_live.codec import GeminiCodec


def declaration(name: str, *, background: bool = False) -> ToolDeclaration:
    gemini: dict[str, Any] = {"name": name, "description": name}
    if background:
        gemini["behavior"] = "NON_BLOCKING"
    return ToolDeclaration(name, name, {"gemini": gemini}, background=background)


TOOLS = [declaration("soak_count"), declaration("soak_background", background=True)]
SETUP = {
    "model": "models/gemini-live-2.5-flash-preview",
    "generationConfig": {"responseModalities": ["TEXT"]},
    "tools": [{"functionDeclarations": [t.provider_schemas["gemini"] for t in TOOLS]}],
}
TURN_COMPLETE = {"serverContent": {"turnComplete": True}}
INTERRUPTED = {"serverContent": {"interrupted": True}}


def result(call_id: str, name: str, label: str) -> ToolResult:
    return ToolResult(call_id, name, {"ok": True, "data": {"label": label}})


def tool_call(call_id: str, name: str = "soak_count") -> dict[str, Any]:
    return {"toolCall": {"functionCalls": [{"id": call_id, "name": name, "args": {}}]}}


def said(text: str) -> dict[str, Any]:
    return {"serverContent": {"modelTurn": {"parts": [{"text": text}]}}}


def online(history: Sequence[ConversationItem] = ()) -> GeminiCodec:
    codec = GeminiCodec(UpstreamConfig(mode="text", instructions="", tools=TOOLS, history=history))
    codec.outbox.extend(codec.resume(resumed=False))
    codec.outbox.clear()
    return codec


def sent(codec: GeminiCodec) -> list[dict[str, Any]]:
    frames = [orjson.loads(frame) for frame in codec.outbox]
    codec.outbox.clear()
    return frames


def client_texts(frames: list[dict[str, Any]]) -> list[tuple[str, bool]]:
    """Each clientContent's text, and whether it asks for a reply (``turnComplete``)."""
    return [
        (f["clientContent"]["turns"][0]["parts"][0]["text"], f["clientContent"]["turnComplete"])
        for f in frames
        if "clientContent" in f
    ]


class Joined:
    """The codec and the fake's protocol state, frame for frame, until both are quiet."""

    def __init__(self, codec: GeminiCodec) -> None:
        self.codec = codec
        self.fake = FakeGeminiSession()
        self.to_fake: list[dict[str, Any]] = []
        self.from_fake: list[dict[str, Any]] = []
        assert self._messages(self.fake.handle({"setup": SETUP})) == [{"setupComplete": {}}]

    def _messages(self, actions: list[Action]) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = []
        for action in actions:
            if isinstance(action, Send):
                messages.append(action.message)
            elif isinstance(action, Begin):
                while (step := self.fake.next_step(action.generation)) is not None:
                    messages += self._messages(list(step.actions))
        return messages

    def run(self) -> list[ev.UpstreamEvent]:
        events: list[ev.UpstreamEvent] = []
        while self.codec.outbox:
            frame = orjson.loads(self.codec.outbox.popleft())
            self.to_fake.append(frame)
            for message in self._messages(self.fake.handle(frame)):
                self.from_fake.append(message)
                events += self.codec.receive(message)
        return events

    def replies(self) -> str:
        return "".join(
            part["text"]
            for m in self.from_fake
            for part in m.get("serverContent", {}).get("modelTurn", {}).get("parts", [])
        )


def test_a_background_result_adopted_while_the_next_call_is_pending_waits_for_its_turn() -> None:
    """The soak's walk: on the node the session moved to (a new Gemini session, so its ids get
    a suffix), the next call is pending when the adopted background call's result comes; the
    call's own result is ready a moment later."""
    joined = Joined(online(history=[ConversationItem("user", "earlier, on node a")]))
    joined.codec.outbox.extend(joined.codec.resume(resumed=False))  # the history, as context
    joined.codec.user_text('/tool soak_count {"label": "next"}')
    (requested,) = [e for e in joined.run() if isinstance(e, ev.ToolCallsRequested)]
    (call,) = requested.calls
    assert call.call_id.startswith("function-call-1~")  # the id renamed on the new session

    # Adopted from the ledger: node a's call, which this connection never issued.
    joined.codec.scheduled_result(
        result("function-call-1", "soak_background", "background"), "when_idle"
    )
    assert not [e for e in joined.run() if isinstance(e, ev.ToolCallsCancelled)]
    joined.codec.tool_results([result(call.call_id, "soak_count", "next")])
    joined.run()

    assert [m for m in joined.from_fake if "toolCallCancellation" in m] == []
    assert joined.codec.notes == []  # no tool_result_dropped
    responses = [f for f in joined.to_fake if "toolResponse" in f]
    assert [r["toolResponse"]["functionResponses"][0]["id"] for r in responses] == [
        "function-call-1"  # the server's own id for the pending call
    ]
    replies = joined.replies()
    assert replies.index("Tool results: soak_count=") < replies.index("Result of the earlier")
    assert '"label":"next"' in replies
    assert '"label":"background"' in replies


def test_a_late_result_while_a_blocking_call_is_pending_goes_once_its_turn_completed() -> None:
    codec = online()
    codec.user_text("count")
    sent(codec)
    codec.receive(tool_call("fc-1"))
    codec.late_result(result("elsewhere", "soak_background", "late"))
    assert sent(codec) == []  # it would cut the turn and cancel fc-1
    codec.tool_results([result("fc-1", "soak_count", "now")])
    assert [list(f) for f in sent(codec)] == [["toolResponse"]]
    codec.receive(said("Counted."))  # the reply to the result: still the same turn
    assert sent(codec) == []
    codec.receive(TURN_COMPLETE)
    ((text, asks),) = client_texts(sent(codec))
    assert text.startswith("Result of the earlier soak_background call elsewhere")
    assert asks


def test_a_late_result_waits_for_the_reply_owed_to_what_was_just_sent() -> None:
    codec = online()
    codec.user_text("hello")  # the reply to it has not started yet
    sent(codec)
    codec.late_result(result("c1", "soak_background", "late"))
    assert sent(codec) == []
    codec.receive(said("Hi."))
    codec.receive(TURN_COMPLETE)
    assert [asks for _, asks in client_texts(sent(codec))] == [True]

    codec.receive(tool_call("fc-2"))
    codec.tool_results([result("fc-2", "soak_count", "x")])
    sent(codec)
    codec.late_result(result("c2", "soak_background", "late"))  # answered, no reply yet
    assert sent(codec) == []


def test_context_waits_for_the_turn_in_progress_and_goes_before_the_users_next_text() -> None:
    codec = online()
    codec.receive(tool_call("fc-1"))
    codec.context("a silent result")
    codec.late_result(result("c1", "soak_background", "late"))
    assert sent(codec) == []
    codec.user_text("stop, something else")  # the user cuts the turn: that is a barge-in
    assert client_texts(sent(codec)) == [
        ("a silent result", False),  # meant for the start of the user's turn
        ("stop, something else", True),
    ]
    assert codec.receive(INTERRUPTED) == []  # ours: not the user speaking
    codec.receive({"toolCallCancellation": {"ids": ["fc-1"]}})
    codec.receive(TURN_COMPLETE)  # the cut turn: the reply to the text is still owed
    assert sent(codec) == []
    codec.receive(said("Sure."))
    codec.receive(TURN_COMPLETE)
    ((text, _),) = client_texts(sent(codec))
    assert text.startswith("Result of the earlier soak_background call c1")


def test_own_turns_go_at_once_while_idle_and_wait_offline_for_the_next_connection() -> None:
    codec = online()
    codec.late_result(result("c1", "soak_background", "late"))
    assert [asks for _, asks in client_texts(sent(codec))] == [True]
    codec.receive(said("Noted."))
    codec.receive(TURN_COMPLETE)

    codec.receive(tool_call("fc-1"))
    codec.context("kept")
    codec.connection_lost()
    frames = [orjson.loads(f) for f in codec.resume(resumed=True)]
    assert ("kept", False) in client_texts(frames)
