"""X-Twilio-Signature against Twilio's documented example, and the <Connect><Stream> TwiML."""

from __future__ import annotations

import base64
import hashlib
import hmac
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.edges.twilio.signature import connect_twiml, twilio_signature, valid_signature

# Twilio's documented example (docs: "Webhooks security", validating requests).
TOKEN = "12345"
URL = "https://mycompany.com/myapp.php?foo=1&bar=2"
PARAMS = {
    "CallSid": "CA1234567890ABCDE",
    "Caller": "+12349013030",
    "Digits": "1234",
    "From": "+12349013030",
    "To": "+18005551212",
}
SIGNATURE = "0/KCTR6DLpKmkAf8muzZqo1nDgQ="


def test_twilios_documented_example() -> None:
    assert twilio_signature(TOKEN, URL, PARAMS) == SIGNATURE
    assert valid_signature(TOKEN, URL, PARAMS, SIGNATURE)


def test_parameter_order_does_not_matter() -> None:
    assert twilio_signature(TOKEN, URL, dict(reversed(PARAMS.items()))) == SIGNATURE


@pytest.mark.parametrize(
    ("token", "url", "params"),
    [
        ("54321", URL, PARAMS),
        (TOKEN, URL.replace("foo=1", "foo=2"), PARAMS),
        (TOKEN, URL.replace("https", "http"), PARAMS),
        (TOKEN, URL, PARAMS | {"Digits": "1235"}),
        (TOKEN, URL, PARAMS | {"Extra": ""}),
        (TOKEN, URL, {k: v for k, v in PARAMS.items() if k != "To"}),
    ],
)
def test_a_changed_token_url_or_parameter_fails(
    token: str, url: str, params: dict[str, str]
) -> None:
    assert not valid_signature(token, url, params, SIGNATURE)


@pytest.mark.parametrize("signature", [None, "", "0/KCTR6DLpKmkAf8muzZqo1nDgQ", "é" * 28])
def test_a_missing_or_malformed_header_fails(signature: str | None) -> None:
    assert not valid_signature(TOKEN, URL, PARAMS, signature)


def test_repeated_keys_sign_each_distinct_value_in_sorted_order() -> None:
    # What Twilio's SDK signs for a key sent twice: the values sorted, duplicates once.
    expected = base64.b64encode(
        hmac.new(b"tok", b"https://x.test/hookAa1Ab2Ab3", hashlib.sha1).digest()
    ).decode()
    params = {"Ab": ["3", "2", "3"], "Aa": "1"}
    assert twilio_signature("tok", "https://x.test/hook", params) == expected
    assert valid_signature("tok", "https://x.test/hook", params, expected)


def test_no_parameters_signs_the_url_alone() -> None:
    expected = base64.b64encode(hmac.new(b"t", URL.encode(), hashlib.sha1).digest()).decode()
    assert twilio_signature("t", URL, {}) == expected


@given(st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=5), st.text())
def test_any_signature_we_make_validates(params: dict[str, str], token: str) -> None:
    signature = twilio_signature(token, URL, params)
    assert valid_signature(token, URL, params, signature)
    assert not valid_signature(token + "x", URL, params, signature)


# --- TwiML ----------------------------------------------------------------------------------


def test_connect_twiml() -> None:
    twiml = connect_twiml("wss://gw.example.com/twilio/media", {"token": "abc"})
    assert twiml == (
        '<?xml version="1.0" encoding="UTF-8"?><Response><Connect>'
        '<Stream url="wss://gw.example.com/twilio/media">'
        '<Parameter name="token" value="abc"/></Stream></Connect></Response>'
    )


def test_twiml_escapes_every_attribute() -> None:
    nasty = "a\"b'c&d<e>f\ng"
    twiml = connect_twiml(f"wss://gw.example.com/m?x=1&y={nasty}", {"token": nasty, nasty: "v"})
    root = ET.fromstring(twiml.encode())
    assert root.tag == "Response"
    stream = root.find("./Connect/Stream")
    assert stream is not None
    assert stream.get("url") == f"wss://gw.example.com/m?x=1&y={nasty}"
    parameters = [(p.get("name"), p.get("value")) for p in stream.findall("Parameter")]
    assert parameters == [("token", nasty), (nasty, "v")]


def test_twiml_without_parameters() -> None:
    root = ET.fromstring(connect_twiml("wss://h/m", {}).encode())
    stream = root.find("./Connect/Stream")
    assert stream is not None
    assert list(stream) == []


@given(st.text(st.characters(exclude_categories=["Cs", "Cc"]), max_size=30))
def test_any_printable_value_round_trips_through_the_xml(value: str) -> None:
    root = ET.fromstring(connect_twiml("wss://h/m", {"token": value}).encode())
    parameter = root.find("./Connect/Stream/Parameter")
    assert parameter is not None
    assert parameter.get("value") == value
