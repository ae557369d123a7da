"""A request to place a call is checked whole (a bad field is named, nothing is placed), and a
call's record only moves forward: queued → ringing → in-progress → one terminal status."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gateway.calls.records import CallInputError, CallRecord, parse_call_request

GOOD = {"to": "+14155550100", "from": "+14155550199"}


def refused(body: object, field: str, **options: str) -> None:
    with pytest.raises(CallInputError, match=f"^{field}"):
        parse_call_request(body, **options)


def test_a_full_request_is_read() -> None:
    request = parse_call_request(
        GOOD
        | {
            "carrier": "telnyx",
            "model": "support",
            "instructions": "Remind them of tomorrow's appointment.",
            "greeting": "Say hello.",
            "tools": ["get_weather", "get_weather", "calendar_create_event"],
            "machine": "message",
            "timeout_s": 20,
            "metadata": {"case": "42"},
        }
    )
    assert (request.to, request.from_, request.carrier) == (
        "+14155550100",
        "+14155550199",
        "telnyx",
    )
    assert request.tools == ("get_weather", "calendar_create_event")
    assert (request.machine, request.timeout_s, request.metadata) == ("message", 20, {"case": "42"})


def test_the_sender_may_come_from_the_settings() -> None:
    assert (
        parse_call_request({"to": "+4930123456"}, default_from="+4930999999").from_ == "+4930999999"
    )
    refused({"to": "+4930123456"}, "from")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ([], "the body"),
        ({"from": "+14155550199"}, "to"),
        (GOOD | {"to": "4155550100"}, "to"),
        (GOOD | {"to": "+0155550100"}, "to"),
        (GOOD | {"to": "+1 415 555 0100"}, "to"),
        (GOOD | {"from": "alice"}, "from"),
        (GOOD | {"carrier": "sip"}, "carrier"),
        (GOOD | {"model": "a", "provider": "openai"}, "model"),
        (GOOD | {"machine": "voicemail"}, "machine"),
        (GOOD | {"timeout_s": 2}, "timeout_s"),
        (GOOD | {"timeout_s": True}, "timeout_s"),
        (GOOD | {"tools": "get_weather"}, "tools"),
        (GOOD | {"instructions": ""}, "instructions"),
        (GOOD | {"greeting": "x" * 1001}, "greeting"),
        (GOOD | {"metadata": {"a": 1}}, "metadata"),
        (GOOD | {"colour": "blue"}, "colour"),
    ],
)
def test_a_bad_field_is_named(body: object, field: str) -> None:
    refused(body, field)


def record() -> CallRecord:
    return CallRecord(
        call_id=CallRecord.new_id(),
        carrier="twilio",
        to="+1",
        from_="+2",
        owner="u",
        created_at=100.0,
    )


def test_a_call_moves_forward_only() -> None:
    ringing = record().placed("CA1")
    assert (ringing.status, ringing.carrier_call_id) == ("ringing", "CA1")
    answered = ringing.answered(110.0, "human")
    assert answered.answered(120.0, "machine") == answered  # a repeated callback changes nothing
    done = answered.ended("completed", 150.0)
    assert (done.status, done.duration_s) == ("completed", 40.0)
    assert done.ended("failed", 160.0) == done  # terminal is terminal
    assert done.answered(170.0) == done
    assert done.placed("CA2") == done


def test_a_call_never_answered_lasted_nothing() -> None:
    busy = record().placed("CA1").ended("busy", 130.0)
    assert (busy.status, busy.duration_s, busy.answered_by) == ("busy", 0.0, None)
    with pytest.raises(ValueError, match="terminal"):
        record().ended("ringing", 1.0)


def test_a_record_survives_its_store_and_shows_no_instructions() -> None:
    original = record().placed("CA9")
    full = replace(original, instructions="secret plan", tools=("a",), roles=("calls",))
    assert CallRecord.from_record(full.to_record()) == full
    shown = full.as_json()
    assert "secret plan" not in str(shown)
    assert shown["carrier_call_id"] == "CA9"
    assert CallRecord.new_id() != CallRecord.new_id()
