"""ErrorCode covers docs/protocol.md section 6; ProtocolError carries its fields and defaults."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from gateway.protocol import ErrorCode, ErrorEvent, ProtocolError, encode

SPEC_ERROR_CODES = {
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


# Extensions documented in docs/protocol.md (section 10).
EXTENSION_ERROR_CODES = {"tool_call_not_found", "store_unavailable", "budget_exhausted"}


def test_error_codes_are_exactly_the_documented_ones() -> None:
    assert {code.value for code in ErrorCode} == SPEC_ERROR_CODES | EXTENSION_ERROR_CODES
    docs = (Path(__file__).resolve().parents[3] / "docs" / "protocol.md").read_text()
    assert all(f"`{code}`" in docs for code in EXTENSION_ERROR_CODES)


def test_error_codes_compare_equal_to_their_wire_strings() -> None:
    assert ErrorCode("invalid_json") is ErrorCode.INVALID_JSON
    assert str(ErrorCode.NOT_STARTED) == "not_started"


def test_protocol_error_carries_its_fields() -> None:
    error = ProtocolError(ErrorCode.FORBIDDEN, "tool not allowed", event_id="e-7")
    assert error.code is ErrorCode.FORBIDDEN
    assert error.message == "tool not allowed"
    assert str(error) == "tool not allowed"
    assert error.event_id == "e-7"
    assert (error.retryable, error.fatal) == (False, False)


@pytest.mark.parametrize(
    ("code", "retryable", "fatal"),
    [
        (ErrorCode.RATE_LIMITED, True, False),
        (ErrorCode.UPSTREAM_UNAVAILABLE, True, False),
        (ErrorCode.SESSION_START_TIMEOUT, False, True),
        (ErrorCode.INVALID_JSON, False, False),
        (ErrorCode.INTERNAL, False, False),
    ],
)
def test_retryable_and_fatal_default_per_code(
    code: ErrorCode, retryable: bool, fatal: bool
) -> None:
    error = ProtocolError(code, "x")
    assert (error.retryable, error.fatal) == (retryable, fatal)


def test_explicit_retryable_and_fatal_override_the_defaults() -> None:
    error = ProtocolError(ErrorCode.RATE_LIMITED, "x", retryable=False, fatal=True)
    assert (error.retryable, error.fatal) == (False, True)


def test_a_plain_string_code_becomes_an_error_code() -> None:
    error = ProtocolError("internal", "boom")  # type: ignore[arg-type]
    assert error.code is ErrorCode.INTERNAL


def test_protocol_error_survives_pickling() -> None:
    error = ProtocolError(ErrorCode.RESUME_FAILED, "gone", event_id="e", fatal=True)
    copy = pickle.loads(pickle.dumps(error))
    assert repr(copy) == repr(error)


def test_repr_names_every_field() -> None:
    text = repr(ProtocolError(ErrorCode.INVALID_AUDIO, "odd", event_id="a"))
    assert text == (
        "ProtocolError(code='invalid_audio', message='odd', event_id='a', "
        "retryable=False, fatal=False)"
    )


def test_error_event_from_protocol_error_keeps_every_field() -> None:
    error = ProtocolError(ErrorCode.UPSTREAM_UNAVAILABLE, "try later", event_id="e-1", fatal=True)
    event = ErrorEvent.from_error(error)
    assert event == ErrorEvent(
        code=ErrorCode.UPSTREAM_UNAVAILABLE,
        message="try later",
        retryable=True,
        fatal=True,
        event_id="e-1",
    )
    assert encode(event) == (
        b'{"type":"error","code":"upstream_unavailable","message":"try later",'
        b'"retryable":true,"fatal":true,"event_id":"e-1"}'
    )
