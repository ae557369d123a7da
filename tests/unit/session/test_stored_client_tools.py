"""A snapshot's client tools come back as declarations; one that today's rules refuse is left
out (the resume goes on), not raised."""

from __future__ import annotations

from gateway.session.opening import stored_client_tools
from gateway.store import SessionSnapshot


def test_valid_declarations_come_back_and_a_refused_one_is_left_out() -> None:
    setup = SessionSnapshot(
        provider="openai",
        mode="text",
        input_rate=24000,
        output_rate=24000,
        enabled_tools=None,
        instructions="",
        client_tools=(
            {"name": "lookup_order", "description": "d", "parameters": {"type": "object"}},
            {"name": "Bad Name!", "description": "", "parameters": {"type": "object"}},
            {"name": "extra_field", "colour": "blue"},
        ),
    )
    (kept,) = stored_client_tools(setup, "sess_1")
    assert kept.name == "lookup_order"
