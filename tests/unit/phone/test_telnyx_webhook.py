"""Telnyx's Call Control webhook (Ed25519 signature, events) and the REST commands the gateway
sends (answer with streaming, streaming start, hang-up, dial), checked field by field."""

from __future__ import annotations

import base64
import uuid
from typing import Any

import orjson
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from fakes.carriers.telnyx_webhooks import CallIds, WebhookSigner, event_body, webhook_request
from gateway.edges.phone.webhook import WebhookRequest
from gateway.edges.phone.wire import PhoneFormatError
from gateway.edges.telnyx.call_control import (
    answer_request,
    client_state,
    dial_request,
    hangup_request,
    streaming_start_request,
)
from gateway.edges.telnyx.webhook import (
    CallAnswered,
    CallHangup,
    CallInitiated,
    MachineDetectionEnded,
    TelnyxAnswerWebhook,
    UnknownCallEvent,
    load_public_key,
    parse_event,
    signature_refusal,
)

URL = "https://gw.example/telnyx/events"
NOW = 1_760_000_000.0
CALL_ID = "v3:MdI91X4lWFEs7IgbBEOT9M4AigoY08M0WWZFISt1Yw2axZ_IiE4pqg"
STREAM_URL = "wss://gw.example/phone/media"
SIGNER = WebhookSigner()
HOOK = TelnyxAnswerWebhook(SIGNER.public_key)


def request(**options: Any) -> WebhookRequest:
    return WebhookRequest(**webhook_request(SIGNER, URL, now=NOW, **options).fields())


def body_of(event_type: str, **payload: Any) -> bytes:
    return event_body(event_type, {"call_control_id": CALL_ID, **payload})


# -- the signature ------------------------------------------------------------------------------


def test_a_webhook_signed_with_the_account_key_is_accepted() -> None:
    assert HOOK.refusal(request()) is None
    assert HOOK.name == "telnyx"


def test_the_signature_is_ed25519_over_timestamp_bar_body() -> None:
    # Signed here by hand, not by the fake's signer: what Telnyx's docs describe.
    private = Ed25519PrivateKey.generate()
    public = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    body = b'{"data":{"event_type":"call.answered"}}'
    signature = base64.b64encode(private.sign(b"1760000000|" + body)).decode()
    key = load_public_key(base64.b64encode(public).decode())
    assert signature_refusal(key, body, "1760000000", signature, NOW) is None
    assert signature_refusal(key, body + b" ", "1760000000", signature, NOW) is not None
    assert signature_refusal(key, body, "1760000001", signature, NOW + 1) is not None


@pytest.mark.parametrize(
    ("fault", "reason"),
    [
        ("wrong-key", "does not match"),
        ("tampered", "does not match"),
        ("unsigned", "no telnyx-signature-ed25519 header"),
        ("no-timestamp", "no telnyx-timestamp header"),
        ("stale", "301 s from now"),
        ("future", "301 s from now"),
    ],
)
def test_a_wrong_missing_or_stale_signature_is_refused(fault: Any, reason: str) -> None:
    signed = request(fault=fault)
    refusal = HOOK.refusal(signed)
    assert refusal is not None
    assert reason in refusal
    signature = signed.headers.get("telnyx-signature-ed25519")
    assert signature is None or signature not in refusal


def test_the_replay_window_is_300_seconds_either_way() -> None:
    signed = webhook_request(SIGNER, URL, now=NOW)
    stamp = int(NOW)
    for now, accepted in ((stamp + 300, True), (stamp - 300, True), (stamp + 301, False)):
        moved = WebhookRequest(**(signed.fields() | {"now": float(now)}))
        assert (HOOK.refusal(moved) is None) is accepted


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({"telnyx-signature-ed25519": "%%%"}, "not base64"),
        ({"telnyx-signature-ed25519": base64.b64encode(b"x" * 63).decode()}, "not 64 bytes"),
        ({"telnyx-timestamp": "17e8"}, "not Unix seconds"),
        ({"telnyx-timestamp": "-1760000000"}, "not Unix seconds"),
        ({"telnyx-timestamp": "9" * 40}, "not Unix seconds"),
    ],
)
def test_malformed_headers_are_refused(headers: dict[str, str], reason: str) -> None:
    signed = webhook_request(SIGNER, URL, now=NOW)
    broken = WebhookRequest(**(signed.fields() | {"headers": signed.headers | headers}))
    refusal = HOOK.refusal(broken)
    assert refusal is not None
    assert reason in refusal


def test_a_get_is_refused() -> None:
    signed = webhook_request(SIGNER, URL, now=NOW)
    assert HOOK.refusal(WebhookRequest(**(signed.fields() | {"method": "GET"}))) is not None


@pytest.mark.parametrize(
    ("key", "problem"),
    [("not base64!", "not base64"), (base64.b64encode(b"k" * 31).decode(), "32 bytes, not 31")],
)
def test_a_bad_public_key_is_refused_at_construction(key: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        TelnyxAnswerWebhook(key)
    with pytest.raises(ValueError, match="PCMU or PCMA"):
        TelnyxAnswerWebhook(SIGNER.public_key, codec="OPUS")  # type: ignore[arg-type]


# -- the events ---------------------------------------------------------------------------------


def test_call_initiated() -> None:
    ids = CallIds(call_control_id=CALL_ID)
    payload = ids.payload(direction="incoming", from_="+35319605860", to="+13129457420")
    assert parse_event(event_body("call.initiated", payload)) == CallInitiated(
        CALL_ID, direction="incoming", from_="+35319605860", to="+13129457420"
    )


def test_answered_hangup_and_machine_detection() -> None:
    assert parse_event(body_of("call.answered", state="answered")) == CallAnswered(CALL_ID)
    hangup = body_of("call.hangup", hangup_cause="user_busy", hangup_source="callee")
    assert parse_event(hangup) == CallHangup(CALL_ID, cause="user_busy", source="callee")
    assert parse_event(body_of("call.hangup")) == CallHangup(CALL_ID, cause="unspecified")
    machine = parse_event(body_of("call.machine.detection.ended", result="machine"))
    assert machine == MachineDetectionEnded(CALL_ID, result="machine")
    assert isinstance(machine, MachineDetectionEnded)
    assert not machine.is_human
    premium = parse_event(body_of("call.machine.premium.detection.ended", result="human_residence"))
    assert premium == MachineDetectionEnded(CALL_ID, result="human_residence", premium=True)
    assert isinstance(premium, MachineDetectionEnded)
    assert premium.is_human


def test_other_events_are_unknown_with_their_call() -> None:
    assert parse_event(body_of("streaming.started")) == UnknownCallEvent(
        "streaming.started", CALL_ID
    )
    bare = orjson.dumps({"data": {"event_type": "call.bridged"}})
    assert parse_event(bare) == UnknownCallEvent("call.bridged", None)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"not json", "not JSON"),
        (b"[1]", "not a JSON object"),
        (b'{"event_type":"call.initiated"}', "data must be an object"),
        (b'{"data":{"payload":{}}}', r"data\.event_type"),
        (b'{"data":{"event_type":"call.answered"}}', r"data\.payload must be"),
        (orjson.dumps({"data": {"event_type": "call.hangup", "payload": {}}}), "call_control_id"),
        (body_of("call.initiated", from_="+1", to="+2"), r"data\.payload\.direction"),
        (body_of("call.machine.detection.ended"), r"data\.payload\.result"),
    ],
)
def test_malformed_events_are_refused_by_field(body: bytes, problem: str) -> None:
    with pytest.raises(PhoneFormatError, match=problem):
        parse_event(body)


def test_call_id_is_the_events_call_control_id() -> None:
    signed = request()
    event = HOOK.event(signed)
    assert isinstance(event, CallInitiated)
    assert HOOK.call_id(signed) == event.call_control_id
    assert event.call_control_id.startswith("v3:")
    bare = WebhookRequest("POST", URL, {}, orjson.dumps({"data": {"event_type": "x"}}), NOW)
    with pytest.raises(PhoneFormatError, match="call_control_id"):
        HOOK.call_id(bare)


# -- the answer and the other commands ----------------------------------------------------------


def test_the_answer_is_the_answer_command_body() -> None:
    answer = HOOK.answer(STREAM_URL, "the-token", CALL_ID)
    assert (answer.content_type, answer.status) == ("application/json", 200)
    body = orjson.loads(answer.body)
    assert body == {
        "stream_url": STREAM_URL,
        "stream_track": "inbound_track",
        "stream_bidirectional_mode": "rtp",
        "stream_bidirectional_codec": "PCMU",
        "stream_codec": "PCMU",
        "client_state": base64.b64encode(b"the-token").decode(),
        "command_id": body["command_id"],
    }
    assert base64.b64decode(body["client_state"]) == b"the-token"
    assert uuid.UUID(body["command_id"]).version == 5
    # A duplicated webhook answers with the same command_id: Telnyx runs it once.
    again = orjson.loads(HOOK.answer(STREAM_URL, "another-token", CALL_ID).body)
    assert again["command_id"] == body["command_id"]
    other = orjson.loads(HOOK.answer(STREAM_URL, "the-token", CALL_ID + "x").body)
    assert other["command_id"] != body["command_id"]


def test_the_codec_is_a_setting() -> None:
    hook = TelnyxAnswerWebhook(SIGNER.public_key, codec="PCMA")
    body = orjson.loads(hook.answer(STREAM_URL, "t", CALL_ID).body)
    assert (body["stream_bidirectional_codec"], body["stream_codec"]) == ("PCMA", "PCMA")


def test_answer_request_is_a_post_to_the_calls_answer_action() -> None:
    method, path, body = answer_request(CALL_ID, STREAM_URL, "t")
    assert (method, path) == ("POST", f"/v2/calls/{CALL_ID}/actions/answer")
    assert body["client_state"] == client_state("t") == "dA=="
    escaped = answer_request("v3:a/b?c", STREAM_URL, "t").path
    assert escaped == "/v2/calls/v3:a%2Fb%3Fc/actions/answer"


def test_streaming_start_and_hangup() -> None:
    start = streaming_start_request(CALL_ID, STREAM_URL, "tok", codec="PCMA")
    assert (start.method, start.path) == ("POST", f"/v2/calls/{CALL_ID}/actions/streaming_start")
    assert start.body["stream_bidirectional_codec"] == "PCMA"
    assert base64.b64decode(start.body["client_state"]) == b"tok"
    hangup = hangup_request(CALL_ID)
    assert (hangup.method, hangup.path) == ("POST", f"/v2/calls/{CALL_ID}/actions/hangup")
    assert list(hangup.body) == ["command_id"]
    assert orjson.loads(hangup.json()) == hangup.body


def test_dial_request_with_a_stream_and_machine_detection() -> None:
    dial = dial_request(
        connection_id="1684641123236054244",
        to="+13125550199",
        from_="+13125550100",
        webhook_url=URL,
        stream_url=STREAM_URL,
        token="tok",
        answering_machine_detection="detect",
        timeout_secs=30,
    )
    assert (dial.method, dial.path) == ("POST", "/v2/calls")
    assert dial.body == {
        "connection_id": "1684641123236054244",
        "to": "+13125550199",
        "from": "+13125550100",
        "webhook_url": URL,
        "answering_machine_detection": "detect",
        "stream_url": STREAM_URL,
        "stream_track": "inbound_track",
        "stream_bidirectional_mode": "rtp",
        "stream_bidirectional_codec": "PCMU",
        "stream_codec": "PCMU",
        "client_state": "dG9r",
        "timeout_secs": 30,
    }


def test_dial_request_without_a_stream_has_no_stream_fields() -> None:
    body = dial_request(connection_id="c", to="+1", from_="+2", webhook_url=URL).body
    assert set(body) == {
        "answering_machine_detection",
        "connection_id",
        "from",
        "to",
        "webhook_url",
    }
    assert body["answering_machine_detection"] == "disabled"


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"connection_id": ""}, "connection_id"),
        ({"token": "t"}, "without a stream URL"),
        ({"timeout_secs": 4}, "5 to 600"),
        ({"answering_machine_detection": "maybe"}, "answering machine"),
        ({"stream_url": "https://gw.example/phone/media"}, "WebSocket URL"),
        ({"stream_url": STREAM_URL, "codec": "G722"}, "PCMU or PCMA"),
    ],
)
def test_dial_request_refuses_what_telnyx_would(options: dict[str, Any], problem: str) -> None:
    arguments: dict[str, Any] = {"connection_id": "c", "to": "+1", "from_": "+2"}
    with pytest.raises(ValueError, match=problem):
        dial_request(**(arguments | {"webhook_url": URL} | options))


def test_an_action_needs_a_call_id() -> None:
    for call_id in ("", ".", ".."):
        with pytest.raises(ValueError, match="call control id"):
            hangup_request(call_id)
