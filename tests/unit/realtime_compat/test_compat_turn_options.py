"""The client's ``turn_detection`` and ``tool_choice`` as the gateway session takes them
(``turn_options``), what ``session.update`` may set of them (``session_config``), and what an
update changed (``turn_changes``). Pure."""

from __future__ import annotations

from typing import Any

import pytest
from compat_kit import view

from gateway.edges.realtime.errors import CompatError
from gateway.edges.realtime.session_config import FunctionTool, SessionView, decode_session_patch
from gateway.edges.realtime.turn_options import (
    turn_changes,
    upstream_tool_choice,
    upstream_turns,
)
from transports.base import ForcedTool, TurnDetection

LOOKUP = {"type": "function", "name": "lookup_order", "parameters": {"type": "object"}}


def updated(current: SessionView, **session: Any) -> SessionView:
    return current.apply(decode_session_patch({"type": "realtime", **session}))


def detection(value: Any) -> dict[str, Any]:
    return {"audio": {"input": {"turn_detection": value}}}


def test_the_defaults_of_session_created_are_the_gateways_own() -> None:
    default = view()
    assert (upstream_turns(default), upstream_tool_choice(default)) == (None, None)


def test_null_is_push_to_talk_and_a_detector_goes_with_its_settings() -> None:
    manual = updated(view(), **detection(None))
    assert upstream_turns(manual) == TurnDetection(manual=True)
    semantic = updated(view(), **detection({"type": "semantic_vad", "eagerness": "high"}))
    assert upstream_turns(semantic) == TurnDetection(
        settings={
            "type": "semantic_vad",
            "eagerness": "high",
            "create_response": True,
            "interrupt_response": True,
        }
    )
    tuned = updated(view(), **detection({"type": "server_vad", "silence_duration_ms": 900}))
    settings = upstream_turns(tuned)
    assert settings is not None
    assert settings.settings is not None
    assert settings.settings["silence_duration_ms"] == 900


def test_tool_choice_is_taken_as_given_a_named_function_as_a_forced_tool() -> None:
    assert upstream_tool_choice(updated(view(), tool_choice="none")) == "none"
    assert upstream_tool_choice(updated(view(), tool_choice="required")) == "required"
    named = updated(
        view(), tools=[LOOKUP], tool_choice={"type": "function", "name": "lookup_order"}
    )
    assert upstream_tool_choice(named) == ForcedTool("lookup_order")


def test_an_update_names_what_it_changed_and_a_default_by_name() -> None:
    manual = updated(view(), **detection(None), tool_choice="none")
    assert turn_changes(view(), manual) == (TurnDetection(manual=True), "none")
    assert turn_changes(manual, manual) == (None, None)
    back = updated(manual, **detection({"type": "server_vad"}), tool_choice="auto")
    assert turn_changes(manual, back) == (TurnDetection(), "auto")


@pytest.mark.parametrize(
    "session",
    [
        {"tool_choice": {"type": "function", "name": "get_current_time"}},
        {"tools": [], "tool_choice": {"type": "function", "name": "lookup_order"}},
    ],
)
def test_a_named_function_must_be_one_of_the_sessions_tools(session: dict[str, Any]) -> None:
    current = view(tools=(FunctionTool(name="lookup_order"),))
    with pytest.raises(CompatError) as refused:
        updated(current, **session)
    assert (refused.value.code, refused.value.param) == (
        "invalid_value",
        "session.tool_choice.name",
    )
    forced = updated(current, tool_choice={"type": "function", "name": "lookup_order"})
    with pytest.raises(CompatError):  # its tools cannot go while it names one
        updated(forced, tools=[])


@pytest.mark.parametrize("flag", ["create_response", "interrupt_response"])
def test_a_detector_that_would_not_answer_or_not_be_cut_is_unsupported(flag: str) -> None:
    with pytest.raises(CompatError) as refused:
        decode_session_patch({"type": "realtime", **detection({"type": "server_vad", flag: False})})
    assert refused.value.code == "unsupported"
    assert refused.value.param == f"session.audio.input.turn_detection.{flag}"
    kept = decode_session_patch(
        {"type": "realtime", **detection({"type": "server_vad", flag: True})}
    )
    assert kept.turn_detection == {"type": "server_vad", flag: True}
