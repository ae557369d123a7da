"""One face for every carrier's simulator (``fakes/carriers``), so that one suite of phone-call
tests runs on each carrier (``test_every_carrier_carries_a_call``).

A ``Line`` (one per test, from ``LINES``) knows its carrier's settings, how the carrier asks the
gateway to connect a call (an answer webhook signed rightly or wrongly; for Telnyx, a ringing
call on its simulated Call Control API, answered by the gateway's command) and how to run the
call's stream; a ``Caller`` is the call in progress seen from the carrier's side: what the
caller says and presses, what they heard, the ``clear`` messages the gateway sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol
from urllib.parse import urlencode

import orjson
from harness import Gateway, pcm_silence, pcm_tone

from fakes.carriers import exotel, plivo, telnyx, telnyx_api, twilio, twilio_api, vonage
from fakes.carriers.telnyx_calls import CallScript

__all__ = ["LINES", "SECRET", "TELNYX_API_KEY", "Caller", "Line", "until", "utterance"]

SECRET = "carrier-signing-secret-for-tests-0123456789"
TELNYX_API_KEY = "KEY0123456789abcdef"


class Caller(Protocol):
    rate: int  # the line's PCM rate (what the caller speaks and hears)

    async def say(self, pcm: bytes) -> None: ...

    async def press(self, digit: str) -> None: ...

    async def send_raw(self, message: str | bytes) -> None: ...  # anything, malformed or not

    async def hang_up(self) -> None: ...

    async def drop(self) -> None: ...  # the stream stops: no goodbye, no close handshake

    def heard_pcm(self) -> bytes: ...

    def heard_line(self) -> bytes: ...  # what was heard, in the line's own encoding

    def clears(self) -> int: ...

    async def wait_clear(self, within_s: float) -> None: ...

    async def wait_closed(self, within_s: float) -> int | None: ...


class Line(Protocol):
    name: str
    line_rate: int
    passes_through: bool  # G.711 on the line: OpenAI's audio reaches the caller untouched

    def settings(self, secret: str) -> dict[str, Any]: ...

    async def answer(self, gateway: Gateway, *, signed: bool = True) -> tuple[int, str]:
        """A new call asks the gateway to connect it: the status and the document answered."""
        ...

    def call(
        self, document: str, call_id: str | None = None
    ) -> contextlib.AbstractAsyncContextManager[Caller]:
        """The stream the document describes, as the answered call (or as ``call_id``)."""
        ...


def utterance(rate: int, speech_ms: int = 400) -> bytes:
    """A loud tone the fake's VAD hears as speech, then the silence that ends the turn."""
    return pcm_tone(speech_ms, rate=rate) + pcm_silence(700, rate=rate)


async def until(condition: Callable[[], bool], within_s: float, what: str) -> None:
    deadline = time.monotonic() + within_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {within_s} s for {what}")
        await asyncio.sleep(0.02)  # polling what a simulator recorded: no event to wait on


async def _post(
    gateway: Gateway, method: str, url: str, headers: Any, body: bytes
) -> tuple[int, str]:
    async with gateway.http.request(method, url, headers=headers, data=body) as response:
        return response.status, await response.text()


class _Simulated:
    """A caller on one of the simulators: the methods they share, under one set of names."""

    def __init__(self, call: Any, rate: int, clear: str) -> None:
        self._call, self.rate, self._clear = call, rate, clear

    async def press(self, digit: str) -> None:
        await self._call.press(digit)

    async def send_raw(self, message: str | bytes) -> None:
        await self._call.send_raw(message)

    async def hang_up(self) -> None:
        await self._call.hang_up()

    async def drop(self) -> None:
        vanish = getattr(self._call, "vanish", None)  # Vonage's and Exotel's name for it
        await (vanish() if vanish is not None else self._call.drop())

    def heard_pcm(self) -> bytes:
        return bytes(self._call.heard_pcm())

    def heard_line(self) -> bytes:
        heard = self._call.heard
        return bytes(heard() if callable(heard) else self.heard_pcm())

    def clears(self) -> int:
        return len(self._call.received_events(self._clear))

    async def wait_clear(self, within_s: float) -> None:
        await asyncio.wait_for(until(lambda: self.clears() > 0, within_s, "clear"), within_s)

    async def wait_closed(self, within_s: float) -> int | None:
        code = await self._call.wait_closed(within_s)
        return code if code is not None else getattr(self._call, "close_code", None)


class _Realtime(_Simulated):
    async def say(self, pcm: bytes) -> None:
        await self._call.speak(pcm, realtime=False)


class _Paced(_Simulated):
    async def say(self, pcm: bytes) -> None:
        await self._call.speak(pcm, rate=self.rate)


class _Answered:
    """A line whose carrier asks an answer webhook (a document comes back) and whose stream
    the test opens from that document."""

    name = ""
    answer_path = ""
    line_rate = 8000
    passes_through = False

    def __init__(self) -> None:
        self.call_id = ""

    async def answer(self, gateway: Gateway, *, signed: bool = True) -> tuple[int, str]:
        self.call_id = "CA" + uuid.uuid4().hex
        method, url, headers, body = self.request(
            f"{gateway.url}{self.answer_path}", self.call_id, signed
        )
        return await _post(gateway, method, url, headers, body)

    def request(self, url: str, call_id: str, signed: bool) -> tuple[str, str, Any, bytes]:
        raise NotImplementedError


class PlivoLine(_Answered):
    name, answer_path, passes_through = "plivo", "/plivo/answer", True

    def settings(self, secret: str) -> dict[str, Any]:
        return {"plivo_auth_token": secret}

    def request(self, url: str, call_id: str, signed: bool) -> tuple[str, str, Any, bytes]:
        r = plivo.answer_request(
            url, SECRET, call_id=call_id, fault=None if signed else "wrong-token"
        )
        return r.method, r.url, r.headers, r.body

    @contextlib.asynccontextmanager
    async def call(self, document: str, call_id: str | None = None) -> AsyncIterator[Caller]:
        async with plivo.PlivoCall.from_answer(document, call_id=call_id or self.call_id) as call:
            yield _Paced(call, 8000, "clearAudio")


class VonageLine(_Answered):
    name, answer_path, line_rate = "vonage", "/vonage/answer", 16000

    def settings(self, secret: str) -> dict[str, Any]:
        return {"vonage_signature_secret": secret}

    def request(self, url: str, call_id: str, signed: bool) -> tuple[str, str, Any, bytes]:
        if signed:
            r = vonage.answer_request(url, secret=SECRET, call_uuid=call_id, issued_at=time.time())
        else:
            r = vonage.wrongly_signed_answer_request(url, call_uuid=call_id, issued_at=time.time())
        return r.method, r.url, r.headers, r.body

    @contextlib.asynccontextmanager
    async def call(self, document: str, call_id: str | None = None) -> AsyncIterator[Caller]:
        endpoint = orjson.loads(document)[0]["endpoint"][0]
        headers = dict(endpoint["headers"])
        headers["call_uuid"] = call_id or headers["call_uuid"]
        async with vonage.VonageCall.open(
            endpoint["uri"],
            call_uuid=headers.pop("call_uuid"),
            token=headers.pop("token"),
            rate=16000,
        ) as call:
            yield _Realtime(call, call.rate, "clear")


class ExotelLine(_Answered):
    name, answer_path = "exotel", "/exotel/answer"

    def settings(self, secret: str) -> dict[str, Any]:
        return {"exotel_answer_secret": secret}

    def request(self, url: str, call_id: str, signed: bool) -> tuple[str, str, Any, bytes]:
        if signed:
            r = exotel.answer_request(url, secret=SECRET, call_sid=call_id)
        else:
            r = exotel.wrongly_signed_answer_request(url, call_sid=call_id)
        return r.method, r.url, r.headers, r.body

    @contextlib.asynccontextmanager
    async def call(self, document: str, call_id: str | None = None) -> AsyncIterator[Caller]:
        url = orjson.loads(document)["url"]
        async with exotel.ExotelCall.open(url, call_sid=call_id or self.call_id) as call:
            yield _Realtime(call, 8000, "clear")


class TwilioLine(_Answered):
    """Twilio's TwiML points at ``/twilio/media``; ``via_phone_media`` runs the same stream on
    ``/phone/media`` instead, where the carrier is told from its messages."""

    name, answer_path, passes_through = "twilio", "/twilio/voice", True

    def __init__(self, *, via_phone_media: bool = False) -> None:
        super().__init__()
        self._via_phone_media = via_phone_media

    def settings(self, secret: str) -> dict[str, Any]:
        return {"twilio_auth_token": secret}

    def request(self, url: str, call_id: str, signed: bool) -> tuple[str, str, Any, bytes]:
        form = {"CallSid": call_id, "From": "+15550001111", "To": "+15552223333"}
        key = SECRET if signed else SECRET + "x"
        return (
            "POST",
            url,
            twilio_api.webhook_headers(url, form, auth_token=key),
            urlencode(form).encode(),
        )

    @contextlib.asynccontextmanager
    async def call(self, document: str, call_id: str | None = None) -> AsyncIterator[Caller]:
        stream = ET.fromstring(document).find("./Connect/Stream")
        assert stream is not None, document
        url = str(stream.get("url"))
        if self._via_phone_media:
            url = url.replace("/twilio/media", "/phone/media")
        token = next(
            str(p.get("value")) for p in stream.iter("Parameter") if p.get("name") == "token"
        )
        async with twilio.TwilioStream.open(
            url, call_sid=call_id or self.call_id, token=token
        ) as call:
            yield _Paced(call, 8000, "clear")


class TelnyxLine:
    """Telnyx sends no document: a call rings on its (simulated) Call Control API, the API
    posts ``call.initiated`` to the gateway, the gateway answers with a command naming the
    stream, and the API opens the stream. The "document" here is what that command said."""

    name, line_rate, passes_through = "telnyx", 8000, True

    def __init__(self, api: telnyx_api.FakeTelnyxApi) -> None:
        self.api = api
        self.call_id = ""
        self._taken: set[str] = set()

    def settings(self, secret: str) -> dict[str, Any]:
        return {
            "telnyx_public_key": self.api.public_key if secret else "",
            "telnyx_api_key": TELNYX_API_KEY,
            "telnyx_api_base": self.api.base_url,
        }

    async def answer(self, gateway: Gateway, *, signed: bool = True) -> tuple[int, str]:
        count = 1 + sum(1 for d in self.api.deliveries if d.event_type == "call.initiated")
        ringing = await self.api.ring(
            webhook_url=f"{gateway.url}/telnyx/events",
            script=CallScript(wrong_signature=not signed),
        )
        self.call_id = ringing.call_control_id
        delivery = await self.api.wait_for_delivery("call.initiated", count=count)
        if delivery.status != 200:
            return delivery.status or 0, ""
        await until(lambda: bool(ringing.stream_params), 5, "the answer command")
        document = {**ringing.stream_params, "client_state": ringing.client_state}
        return 200, orjson.dumps(document).decode()

    @contextlib.asynccontextmanager
    async def call(self, document: str, call_id: str | None = None) -> AsyncIterator[Caller]:
        target = call_id or self.call_id
        if target == self.call_id and target not in self._taken:
            self._taken.add(target)  # the stream the API opened once the call was answered
            stream = await self.api.wait_for_stream(target)
            try:
                yield _Paced(stream, 8000, "clear")
            finally:
                await stream.hang_up()
            return
        fields = orjson.loads(document)
        async with telnyx.TelnyxCall.open(
            fields["stream_url"], call_control_id=target, client_state=fields["client_state"]
        ) as stream:
            yield _Paced(stream, 8000, "clear")


@contextlib.asynccontextmanager
async def _static(line: Line) -> AsyncIterator[Line]:
    yield line


@contextlib.asynccontextmanager
async def _telnyx() -> AsyncIterator[Line]:
    async with telnyx_api.FakeTelnyxApi(api_key=TELNYX_API_KEY) as api:
        yield TelnyxLine(api)


LINES: dict[str, Callable[[], contextlib.AbstractAsyncContextManager[Line]]] = {
    "twilio": lambda: _static(TwilioLine()),
    "twilio-on-phone-media": lambda: _static(TwilioLine(via_phone_media=True)),
    "telnyx": _telnyx,
    "plivo": lambda: _static(PlivoLine()),
    "vonage": lambda: _static(VonageLine()),
    "exotel": lambda: _static(ExotelLine()),
}
