"""Telnyx's Call Control REST API, the async shell around ``call_control``'s pure requests.

A call on Telnyx is driven by commands on its ``call_control_id``: the gateway answers an
incoming call with its stream (``answer``), hangs a call up after a goodbye (``hang_up``) and
dials outbound calls. Each command is one POST to ``{api_base}{path}`` with
``Authorization: Bearer <TELNYX_API_KEY>``; what Telnyx answers is logged (never the body sent:
it carries the stream token), and a failure is logged and returned, not raised: a command that
cannot be sent leaves the call to Telnyx, which ends it when nobody answers.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson
import structlog

from gateway.edges.phone.webhook import Answer
from gateway.edges.telnyx.call_control import ApiRequest, action_path, hangup_request

__all__ = ["TelnyxControl"]

_log = structlog.get_logger("telnyx")
TIMEOUT_S = 10.0


class TelnyxControl:
    def __init__(self, api_key: str, api_base: str) -> None:
        self._api_key = api_key
        self._api_base = api_base.rstrip("/")

    def __repr__(self) -> str:
        return f"TelnyxControl(api_base={self._api_base!r}, api_key=***)"

    async def send(self, request: ApiRequest) -> tuple[int, dict[str, Any]] | None:
        """Send one command: Telnyx's status and JSON answer, None if it could not be reached."""
        return await self._post(request.path, request.json(), request.path.rsplit("/", 1)[-1])

    async def answer(self, call_control_id: str, answer: Answer) -> None:
        """Answer an incoming call with the answer command's body (its stream and token)."""
        await self._post(action_path(call_control_id, "answer"), answer.body.encode(), "answer")

    async def hang_up(self, call_control_id: str) -> None:
        await self.send(hangup_request(call_control_id))

    async def _post(self, path: str, body: bytes, action: str) -> tuple[int, dict[str, Any]] | None:
        headers = {
            "Authorization": f"Bearer {self._api_key}",
            "Content-Type": "application/json",
            "Accept": "application/json",
        }
        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=TIMEOUT_S)) as http,
                http.post(self._api_base + path, data=body, headers=headers) as response,
            ):
                raw = await response.read()
                status = response.status
        except (aiohttp.ClientError, TimeoutError) as exc:
            _log.warning("telnyx_command_failed", action=action, error=type(exc).__name__)
            return None
        try:
            parsed = orjson.loads(raw) if raw else {}
        except orjson.JSONDecodeError:
            parsed = {}
        answer = parsed if isinstance(parsed, dict) else {}
        level = "info" if status < 400 else "warning"
        getattr(_log, level)("telnyx_command", action=action, status=status)
        return status, answer
