"""``opening``: the gateway session ``/v1/realtime`` opens as the client connects, and how a
``session.update`` that comes before the client uses it reaches it: in place (modality,
instructions, turn detection, tool choice) or by a new session (voice, tools, instructions
cleared back to the gateway's default)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest
from compat_kit import view

from gateway.edges.realtime.errors import CompatError
from gateway.edges.realtime.opening import REOPEN, reconfiguration, session_start
from gateway.edges.realtime.session_config import FunctionTool
from gateway.protocol import ClientToolDeclaration, Mode, SessionStart, SessionUpdate
from gateway.session.client_tools import DeclarationProblem
from transports.base import TurnDetection


def _no_problem(tools: Sequence[ClientToolDeclaration]) -> DeclarationProblem | None:
    return None


def _start(provider: str | None = "openai", **changes: Any) -> SessionStart:
    return session_start(view(**changes), provider, _no_problem)


def _with(start: SessionStart, **changes: Any) -> SessionStart:
    return dataclasses.replace(start, **changes)


def test_a_fresh_session_opens_as_session_created_shows_it() -> None:
    start = _start()
    assert start.mode is Mode.VOICE
    assert (start.provider, start.model, start.voice) == ("openai", "gpt-realtime", "alloy")
    assert start.instructions is None  # the gateway's default instructions
    assert (start.audio.input_rate, start.audio.output_rate) == (24000, 24000)
    assert start.client_tools == ()
    assert dict(start.metadata) == {"client": "openai-realtime"}
    # the other upstreams pick their model by mode, from the gateway's settings
    assert _start("gemini").model is None
    assert _start(None).model is None


def test_nothing_changed_is_nothing_to_do() -> None:
    assert reconfiguration(_start(), _start()) is None


def test_modality_and_instructions_change_in_place() -> None:
    opened = _start()
    change = reconfiguration(opened, _start(modality="text", instructions="Be brief."))
    assert change == SessionUpdate(mode=Mode.TEXT, instructions="Be brief.")
    only_words = reconfiguration(opened, _start(instructions="Be brief."))
    assert only_words == SessionUpdate(instructions="Be brief.")


def test_turn_detection_and_tool_choice_change_in_place_back_to_their_defaults_too() -> None:
    manual = TurnDetection(manual=True)
    opened = _start()
    pushed = reconfiguration(opened, _with(opened, turn_detection=manual, tool_choice="none"))
    assert pushed == SessionUpdate(turn_detection=manual, tool_choice="none")
    set_up = _with(opened, turn_detection=manual, tool_choice="required")
    assert reconfiguration(set_up, opened) == SessionUpdate(
        turn_detection=TurnDetection(), tool_choice="auto"
    )


def test_voice_and_tools_need_a_new_session() -> None:
    opened = _start()
    assert reconfiguration(opened, _start(voice="verse")) is REOPEN
    tool = FunctionTool(name="lookup", description="Looks up", parameters={"type": "object"})
    assert reconfiguration(opened, _start(tools=(tool,))) is REOPEN
    # with another change in place: still one new session, which has it all
    assert reconfiguration(opened, _start(voice="verse", instructions="Hi")) is REOPEN


def test_instructions_cleared_go_back_to_the_default_which_only_a_start_gives() -> None:
    assert reconfiguration(_start(instructions="Be brief."), _start(instructions="")) is REOPEN


def test_tools_that_break_the_rules_are_refused_as_at_session_update() -> None:
    def refuse(tools: Sequence[ClientToolDeclaration]) -> DeclarationProblem | None:
        return DeclarationProblem(0, "name", "is the name of one of the gateway's tools")

    tool = FunctionTool(name="lookup", description="", parameters=None)
    with pytest.raises(CompatError) as refused:
        session_start(view(tools=(tool,)), "openai", refuse)
    assert refused.value.param == "session.tools[0].name"
