"""The Telnyx Call Control actions the gateway sends, as pure requests: ``(method, path, body)``
for the caller's HTTP client to send to ``{api_base}{path}`` (``https://api.telnyx.com``) with
``Authorization: Bearer <TELNYX_API_KEY>`` and the body as JSON. No I/O here.

Telnyx returns no call-control document: a call is driven by commands on its
``call_control_id``. An incoming call (webhook ``call.initiated``, direction ``incoming``) is
answered with streaming in the same command: ``answer_request``. An outgoing call is dialled with
``dial_request``, streaming from the moment it is answered; ``streaming_start_request`` starts a
stream on a call already up (e.g. a call dialled without one, once its id is known).

The stream's parameters are the same everywhere (``stream_parameters``): ``stream_track``
``inbound_track`` (the caller only), ``stream_bidirectional_mode`` ``rtp`` (our audio is played
as RTP payload, not MP3 files), ``stream_bidirectional_codec`` the line's codec (PCMU, or PCMA),
and ``stream_codec`` the same codec so that what Telnyx sends is what it plays (it transcodes
between PCMU and PCMA when the call uses the other).

Where the stream token goes. The answer action has no ``custom_parameters`` (only
``streaming_start`` has) and no ``stream_auth_token`` (dial and ``streaming_start`` have it, and
Telnyx hands it back in the ``connected`` frame and an upgrade header, before the frame that names
the call). What every one of these commands has is ``client_state`` ("add state to every
subsequent webhook", base64), and the media stream's ``start`` frame carries the call's
``client_state``: the token goes there, base64-encoded (``client_state``), and
``gateway.edges.telnyx.wire`` reads it back from ``start.client_state``. That Telnyx copies the
command's ``client_state`` into ``start`` is what the documented example shows (the same value
in both), not a sentence of the docs. The token is then also in the webhooks that follow (the
gateway's own, signed): a webhook's body must not be logged whole.

``command_id`` makes a command idempotent ("Telnyx will ignore any command with the same
``command_id`` for the same ``call_control_id``"): answer and hang-up derive it from the call id,
so a duplicated webhook (Telnyx may deliver one twice) answers a call once.

Sources:
- https://developers.telnyx.com/api-reference/call-commands/answer-call
- https://developers.telnyx.com/api-reference/call-commands/dial
- https://developers.telnyx.com/api-reference/call-commands/hangup-call
- https://developers.telnyx.com/api-reference/call-commands/streaming-start
- https://developers.telnyx.com/docs/voice/programmable-voice/media-streaming
- https://developers.telnyx.com/api-reference/websockets/stream-call-media-over-websocket
"""

from __future__ import annotations

import base64
import uuid
from typing import Any, Literal, NamedTuple
from urllib.parse import quote

import orjson

from gateway.edges.telnyx.wire import CODECS, Codec

__all__ = [
    "API_BASE",
    "AmdMode",
    "ApiRequest",
    "action_path",
    "answer_request",
    "client_state",
    "command_id",
    "dial_request",
    "hangup_request",
    "stream_parameters",
    "streaming_start_request",
]

API_BASE = "https://api.telnyx.com"

# Dial's answering_machine_detection: standard (detect…, greeting_end) or premium detection.
AmdMode = Literal["disabled", "detect", "detect_beep", "detect_words", "greeting_end", "premium"]
_AMD_MODES = ("disabled", "detect", "detect_beep", "detect_words", "greeting_end", "premium")
_COMMANDS = uuid.UUID("5f0c7d2e-8a51-4f7b-9c3e-6d1a2b4c8e90")  # namespace of our command ids


class ApiRequest(NamedTuple):
    """One REST call: unpacks as ``method, path, body``; ``json()`` is the body to send."""

    method: str
    path: str
    body: dict[str, Any]

    def json(self) -> bytes:
        return orjson.dumps(self.body)


def client_state(token: str) -> str:
    """The token as Telnyx's ``client_state`` (base64) and hands back in ``start``."""
    return base64.b64encode(token.encode()).decode("ascii")


def command_id(action: str, call_control_id: str) -> str:
    """A ``command_id`` that is the same for the same action on the same call."""
    return str(uuid.uuid5(_COMMANDS, f"{action}:{call_control_id}"))


def stream_parameters(stream_url: str, codec: Codec = "PCMU") -> dict[str, Any]:
    """The streaming fields of answer and dial (``streaming_start`` takes them too)."""
    if codec not in CODECS:
        raise ValueError(f"the Telnyx codec is PCMU or PCMA, not {codec!r}")
    if not stream_url.startswith(("wss://", "ws://")):
        raise ValueError("the stream URL must be a WebSocket URL (wss://)")
    return {
        "stream_url": stream_url,
        "stream_track": "inbound_track",
        "stream_bidirectional_mode": "rtp",
        "stream_bidirectional_codec": codec,
        "stream_codec": codec,
    }


def answer_request(
    call_control_id: str, stream_url: str, token: str, *, codec: Codec = "PCMU"
) -> ApiRequest:
    """Answer an incoming call and stream it to ``stream_url`` with ``token`` in the start."""
    return ApiRequest(
        "POST",
        action_path(call_control_id, "answer"),
        {
            **stream_parameters(stream_url, codec),
            "client_state": client_state(token),
            "command_id": command_id("answer", call_control_id),
        },
    )


def streaming_start_request(
    call_control_id: str, stream_url: str, token: str, *, codec: Codec = "PCMU"
) -> ApiRequest:
    """Stream a call already up to ``stream_url`` (the call's ``client_state`` becomes the
    token, as in ``answer_request``)."""
    return ApiRequest(
        "POST",
        action_path(call_control_id, "streaming_start"),
        {
            **stream_parameters(stream_url, codec),
            "client_state": client_state(token),
            "command_id": command_id("streaming_start", call_control_id),
        },
    )


def hangup_request(call_control_id: str) -> ApiRequest:
    """End the call (Telnyx answers 422, code 90018, when it has already ended)."""
    return ApiRequest(
        "POST",
        action_path(call_control_id, "hangup"),
        {"command_id": command_id("hangup", call_control_id)},
    )


def dial_request(
    *,
    connection_id: str,
    to: str,
    from_: str,
    webhook_url: str,
    stream_url: str | None = None,
    token: str | None = None,
    codec: Codec = "PCMU",
    answering_machine_detection: AmdMode = "disabled",
    timeout_secs: int | None = None,
) -> ApiRequest:
    """Dial ``to`` from ``from_`` (E.164) on the Call Control App ``connection_id``; its
    webhooks go to ``webhook_url``. With ``stream_url`` the call streams once answered, the
    call's ``client_state`` being ``token`` (the call id is not known yet: a token bound to it
    needs a dial without a stream, then ``streaming_start_request`` on ``call.answered``).
    ``answering_machine_detection`` other than ``disabled`` brings a
    ``call.machine.detection.ended`` (or ``…premium…``) webhook; ``timeout_secs`` (5 to 600)
    is how long it rings before a ``call.hangup`` with cause ``timeout``."""
    if not connection_id or not to or not from_:
        raise ValueError("dialling needs connection_id, to and from")
    if answering_machine_detection not in _AMD_MODES:
        raise ValueError(f"unknown answering machine detection {answering_machine_detection!r}")
    if timeout_secs is not None and not 5 <= timeout_secs <= 600:
        raise ValueError("timeout_secs is 5 to 600")
    if token is not None and stream_url is None:
        raise ValueError("a stream token without a stream URL goes nowhere")
    body: dict[str, Any] = {
        "connection_id": connection_id,
        "to": to,
        "from": from_,
        "webhook_url": webhook_url,
        "answering_machine_detection": answering_machine_detection,
    }
    if stream_url is not None:
        body.update(stream_parameters(stream_url, codec))
    if token is not None:
        body["client_state"] = client_state(token)
    if timeout_secs is not None:
        body["timeout_secs"] = timeout_secs
    return ApiRequest("POST", "/v2/calls", body)


def action_path(call_control_id: str, action: str) -> str:
    if not call_control_id or call_control_id in (".", ".."):
        raise ValueError("a call control id is needed")
    # The id is one path segment ("v3:…"): anything but letters, digits, "-._~" and ":" escaped.
    return f"/v2/calls/{quote(call_control_id, safe=':')}/actions/{action}"
