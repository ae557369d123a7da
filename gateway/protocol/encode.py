"""Encode events into text-frame payloads (UTF-8 JSON bytes) with orjson.

``encode`` is the gateway's path to the client and stays lean: one hand-written ``to_dict`` per
event and one ``orjson.dumps``. ``encode_client_event`` is the other direction, for Python
clients, tests and benchmarks that speak the protocol to the gateway.
"""

from __future__ import annotations

import orjson

from .client_events import JsonClientEvent
from .errors import ErrorCode, ProtocolError
from .json_types import JsonObject
from .server_events import ServerEvent

__all__ = ["encode", "encode_client_event"]


def encode(event: ServerEvent) -> bytes:
    """The JSON text frame of a gateway → client event.

    Raises ProtocolError(internal) if the event holds a value JSON cannot carry (a tool result
    with a non-string key, say), so callers never see orjson's own exception types.
    """
    return _dumps(event.to_dict(), event.TYPE)


def encode_client_event(event: JsonClientEvent) -> bytes:
    """The JSON text frame of a client → gateway event (binary audio is sent as raw bytes)."""
    return _dumps(event.to_dict(), event.TYPE)


def _dumps(body: JsonObject, event_type: str) -> bytes:
    try:
        return orjson.dumps(body)
    except orjson.JSONEncodeError as exc:
        raise ProtocolError(ErrorCode.INTERNAL, f"cannot encode {event_type}: {exc}") from None
