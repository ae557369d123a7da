"""Calls the gateway places through Telnyx: the dialer (Call Control's dial) and the webhook of
each placed call.

``TelnyxDialer.place`` dials with the Call Control App's ``connection_id`` and answering-machine
detection (``detect``: Telnyx tells a machine from a person once answered; ``detect_beep`` for a
call that leaves a message), its ring timeout, and the call's own webhook URL
(``/telnyx/calls/{id}/events``). The call is dialled without a stream: a stream token is bound to
the carrier's call id, which the dial's answer names, so the stream starts once the call is
answered (``streaming_start``, the token in ``client_state``) and, with detection, once Telnyx
has said who answered: a machine is hung up, or given the greeting as a message.

``TelnyxCallRoutes`` serves that webhook (Ed25519-signed as every Telnyx webhook): answers,
detection verdicts and hang-ups, the hang-up's cause becoming the call's result (``user_busy``:
busy; ``timeout``: no answer; a call that was answered: completed; else failed).

Facts: https://developers.telnyx.com/api-reference/call-commands/dial,
https://developers.telnyx.com/api-reference/call-commands/streaming-start,
https://developers.telnyx.com/api-reference/callbacks/call-hangup (hangup causes).
"""

from __future__ import annotations

from collections.abc import Callable

import structlog
from aiohttp import web

from gateway.calls.center import CallCenter, PlacementFailed
from gateway.calls.records import CallRecord, CallStatus
from gateway.config import Settings
from gateway.edges.phone.routes import public_url, webhook_request
from gateway.edges.phone.wire import PhoneFormatError
from gateway.edges.telnyx.call_control import dial_request, streaming_start_request
from gateway.edges.telnyx.control import TelnyxControl
from gateway.edges.telnyx.webhook import (
    CallAnswered,
    CallHangup,
    MachineDetectionEnded,
    TelnyxAnswerWebhook,
    parse_event,
)
from gateway.edges.telnyx.wire import Codec

__all__ = ["TelnyxCallRoutes", "TelnyxDialer", "hangup_status"]

_log = structlog.get_logger("telnyx")


def hangup_status(cause: str, answered: bool) -> CallStatus:
    """How a placed call ended, from Telnyx's ``hangup_cause``."""
    if cause == "user_busy":
        return "busy"
    if cause in ("timeout", "no_answer"):
        return "no-answer"
    if cause == "originator_cancel":
        return "canceled"
    if answered:
        return "completed"
    return "no-answer" if cause == "normal_clearing" else "failed"


class TelnyxDialer:
    carrier = "telnyx"

    def __init__(self, control: TelnyxControl, connection_id: str) -> None:
        self._control = control
        self._connection_id = connection_id

    async def place(self, record: CallRecord, public_base: str) -> str:
        request = dial_request(
            connection_id=self._connection_id,
            to=record.to,
            from_=record.from_,
            webhook_url=f"{public_base.rstrip('/')}/telnyx/calls/{record.call_id}/events",
            answering_machine_detection="detect_beep" if record.machine == "message" else "detect",
            timeout_secs=record.timeout_s,
        )
        answer = await self._control.send(request)
        if answer is None:
            raise PlacementFailed("Telnyx could not be reached")
        status, body = answer
        data = body.get("data")
        call_control_id = data.get("call_control_id") if isinstance(data, dict) else None
        if status >= 300 or not isinstance(call_control_id, str) or not call_control_id:
            errors = body.get("errors")
            first = errors[0] if isinstance(errors, list) and errors else {}
            detail = first.get("detail") or first.get("title") if isinstance(first, dict) else None
            raise PlacementFailed(f"Telnyx refused the call: {str(detail or status)[:200]}")
        return call_control_id

    async def hang_up(self, carrier_call_id: str) -> None:
        await self._control.hang_up(carrier_call_id)


class TelnyxCallRoutes:
    """``POST /telnyx/calls/{call_id}/events``: a placed call's webhook."""

    def __init__(
        self,
        settings: Settings,
        center: CallCenter,
        webhook: TelnyxAnswerWebhook,
        control: TelnyxControl,
        mint_token: Callable[[str], str],
        codec: Codec,
    ) -> None:
        self._settings = settings
        self._center = center
        self._webhook = webhook
        self._control = control
        self._mint = mint_token
        self._codec: Codec = codec

    def add_to(self, app: web.Application) -> None:
        app.router.add_post("/telnyx/calls/{call_id}/events", self.events)

    async def events(self, request: web.Request) -> web.Response:
        hook = await webhook_request(self._settings, request)
        refusal = self._webhook.refusal(hook)
        if refusal is not None:
            _log.warning("telnyx_call_webhook_refused", reason=refusal)
            return web.Response(status=403, text="invalid Telnyx signature")
        try:
            event = parse_event(hook.body)
        except PhoneFormatError as exc:
            return web.Response(status=400, text=str(exc))
        record = await self._center.get(request.match_info["call_id"])
        if record is None or record.carrier != "telnyx":
            return web.Response(status=404, text="no such call")
        if event.call_control_id not in (None, record.carrier_call_id):
            return web.Response(status=403, text="this webhook is about another call")
        stream_url = public_url(self._settings, request, "/phone/media", websocket=True)
        match event:
            case CallAnswered():
                pass  # detection (always on for placed calls) says who answered next
            case MachineDetectionEnded(result=result):
                # Only a verdict of a machine stops the talk: "not sure" may well be a person.
                machine = result.startswith(("machine", "fax"))
                await self._detected(record, not machine, stream_url)
            case CallHangup(cause=cause):
                await self._center.ended(
                    record.call_id, hangup_status(cause, record.answered_at is not None)
                )
            case _:
                pass
        return web.json_response({})

    async def _detected(self, record: CallRecord, human: bool, stream_url: str) -> None:
        call_control_id = record.carrier_call_id
        assert call_control_id is not None  # a webhook is only ever about a placed call
        answered = await self._center.answered(record.call_id, "human" if human else "machine")
        if answered is None or answered.terminal:
            return
        if not human and record.machine == "hangup":
            await self._control.hang_up(call_control_id)
            return
        token = self._mint(call_control_id)
        await self._control.send(
            streaming_start_request(call_control_id, stream_url, token, codec=self._codec)
        )
