"""The terminal chat client's pure parts: what it prints, and its /approve and /reject."""

from __future__ import annotations

from gateway.chat_client import ChatState, parse_command, render


def test_a_tool_turn_renders_the_call_the_result_and_the_answer() -> None:
    state = ChatState()
    shown = [
        render({"type": "response.started", "response_id": "r1"}, state),
        render(
            {
                "type": "tool.started",
                "call_id": "c1",
                "name": "get_current_time",
                "arguments": {"timezone": "Europe/Paris"},
            },
            state,
        ),
        render(
            {
                "type": "tool.finished",
                "call_id": "c1",
                "name": "get_current_time",
                "ok": True,
                "data": {"timezone": "Europe/Paris"},
                "duration_ms": 2,
                "intents": [],
            },
            state,
        ),
        render({"type": "response.done", "response_id": "r1", "status": "completed"}, state),
        render({"type": "response.started", "response_id": "r2"}, state),
        render({"type": "text.delta", "response_id": "r2", "delta": "It is "}, state),
        render({"type": "text.delta", "response_id": "r2", "delta": "noon."}, state),
        render(
            {"type": "response.done", "response_id": "r2", "status": "completed", "text": "x"},
            state,
        ),
    ]
    assert "".join(text for text, _ in shown) == (
        '  [tool] get_current_time {"timezone":"Europe/Paris"}\n'
        '  [tool ok] get_current_time (2 ms) -> {"timezone":"Europe/Paris"}\n'
        "assistant> It is noon.\n"
    )
    # Only the answer after the tools completes the exchange.
    assert [done for _, done in shown] == [False] * 7 + [True]


def test_a_response_without_deltas_prints_its_text_and_status() -> None:
    state = ChatState()
    render({"type": "response.started", "response_id": "r1"}, state)
    text, done = render(
        {"type": "response.done", "response_id": "r1", "status": "failed", "text": "partial"},
        state,
    )
    assert text == "assistant> partial\n  (response failed)\n"
    assert done


def test_confirmations_are_remembered_until_resolved() -> None:
    state = ChatState()
    text, _ = render(
        {
            "type": "confirmation.requested",
            "confirmation_id": "conf_1",
            "call_id": "c1",
            "tool": "calendar_create_event",
            "prompt": "Confirm calendar_create_event?",
            "parameters": {},
            "sensitivity": "medium",
            "expires_at": "2026-01-01T00:00:00Z",
        },
        state,
    )
    assert "Confirm calendar_create_event?" in text
    assert "/approve" in text
    assert state.confirmations == ["conf_1"]
    render({"type": "confirmation.resolved", "confirmation_id": "conf_1", "decision": "x"}, state)
    assert state.confirmations == []


def test_errors_and_the_end_are_shown() -> None:
    state = ChatState()
    text, done = render(
        {
            "type": "error",
            "code": "invalid_event",
            "message": "text: empty",
            "retryable": False,
            "fatal": False,
            "event_id": "e1",
        },
        state,
    )
    assert text == "  [error] invalid_event: text: empty (event e1)\n"
    assert done  # the message was refused: nothing more will answer it
    _, done = render(
        {
            "type": "error",
            "code": "upstream_error",
            "message": "boom",
            "retryable": False,
            "fatal": False,
        },
        state,
    )
    assert not done  # the failed response's response.done follows
    text, done = render({"type": "session.ended", "reason": "intent"}, state)
    assert text == "session ended (intent)\n"
    assert done


def test_approve_and_reject_default_to_the_latest_confirmation() -> None:
    state = ChatState(confirmations=["conf_1", "conf_2"])
    assert parse_command("/approve", state) == {
        "type": "confirmation.respond",
        "confirmation_id": "conf_2",
        "decision": "approve",
    }
    assert parse_command("/reject conf_1", state) == {
        "type": "confirmation.respond",
        "confirmation_id": "conf_1",
        "decision": "reject",
    }
    assert parse_command('/approve {"title": "Doctor"}', state) == {
        "type": "confirmation.respond",
        "confirmation_id": "conf_2",
        "decision": "approve",
        "parameters": {"title": "Doctor"},
    }
    assert parse_command('/approve conf_1 {"title": "Doctor"}', state) == {
        "type": "confirmation.respond",
        "confirmation_id": "conf_1",
        "decision": "approve",
        "parameters": {"title": "Doctor"},
    }


def test_bad_commands_get_a_message_and_other_lines_are_messages() -> None:
    assert parse_command("/approve", ChatState()) == "no confirmation is waiting"
    state = ChatState(confirmations=["conf_1"])
    problem = parse_command("/approve {nope", state)
    assert isinstance(problem, str)
    assert "not JSON" in problem
    assert parse_command("/approve [1]", state) == "modified arguments must be a JSON object"
    assert parse_command('/tool get_current_time {"timezone":"UTC"}', state) is None
    assert parse_command("approve", state) is None


def test_a_move_and_a_resume_are_shown_with_what_a_lost_node_did_not_answer() -> None:
    state = ChatState()
    moving = {"type": "session.moving", "session_id": "s", "resume_token": "t", "reason": "drain"}
    assert render(moving, state) == (
        "  [chat] the gateway is moving this session to another node…\n",
        False,
    )
    resumed = {"type": "session.started", "session_id": "s", "resumed": True, "mode": "text"}
    assert render(resumed, state) == ("resumed: session s\n", True)
    recovered = {
        **resumed,
        "recovery": {
            "reason": "node_lost",
            "lost_turn": {"text": "book it"},
            "failed_calls": ["call_1"],
        },
    }
    assert render(recovered, state) == (
        "resumed: session s\n"
        "  [chat] the node serving it stopped: not answered: book it\n"
        "  [chat] tool call call_1 stopped with that node\n",
        True,
    )


def test_a_background_call_and_a_slow_one_are_shown() -> None:
    state = ChatState()
    started = {
        "type": "tool.started",
        "call_id": "c1",
        "name": "slow_job",
        "arguments": {"ms": 5},
        "background": True,
    }
    assert render(started, state) == ('  [tool] slow_job {"ms":5} (in the background)\n', False)
    slow = {
        "type": "tool.slow",
        "call_id": "c2",
        "name": "kb_search",
        "elapsed_ms": 801,
        "soft_limit_ms": 800,
        "cue": "tone",
    }
    assert render(slow, state) == (
        "  [tool slow] kb_search: 801 ms; the caller hears a holding tone\n",
        False,
    )
    assert render({**slow, "cue": "none"}, state) == ("  [tool slow] kb_search: 801 ms\n", False)
