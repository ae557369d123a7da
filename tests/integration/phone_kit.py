"""One face for every carrier's simulator (``fakes/carriers``), so that one suite of phone-call
tests runs on each carrier (``test_every_carrier_carries_a_call``).

A ``Line`` knows its carrier's settings, how the carrier calls the answer webhook (signed
rightly or wrongly), and how to run the call the answer document describes; a ``Caller`` is the
call in progress, seen from the carrier's side: what the caller says and presses, what they
heard, the ``clear`` messages the gateway sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
from harness import Gateway, pcm_silence, pcm_tone

from fakes.carriers import exotel, plivo, vonage

SECRET = "carrier-signing-secret-for-tests-0123456789"


class Caller(Protocol):
    rate: int  # the line's PCM rate (what the caller speaks and hears)

    async def say(self, pcm: bytes) -> None: ...

    async def press(self, digit: str) -> None: ...

    async def hang_up(self) -> None: ...

    def heard_pcm(self) -> bytes: ...

    def clears(self) -> int: ...

    async def wait_clear(self, within_s: float) -> None: ...

    async def wait_closed(self, within_s: float) -> int | None: ...


@dataclass(frozen=True)
class Webhook:
    method: str
    url: str
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class Line:
    name: str
    answer_path: str
    settings: Callable[[str], dict[str, Any]]  # the carrier's credential settings
    webhook: Callable[[str, str, bool], Webhook]  # (url, call id, rightly signed)
    call: Callable[[str, str], contextlib.AbstractAsyncContextManager[Caller]]  # (answer, id)
    line_rate: int
    passes_through: bool  # G.711 on the line: OpenAI's audio reaches the caller untouched

    async def answer(
        self, gateway: Gateway, call_id: str, *, signed: bool = True
    ) -> tuple[int, str]:
        hook = self.webhook(f"{gateway.url}{self.answer_path}", call_id, signed)
        async with gateway.http.request(
            hook.method, hook.url, headers=hook.headers, data=hook.body
        ) as response:
            return response.status, await response.text()


def utterance(rate: int, speech_ms: int = 400) -> bytes:
    """A loud tone the fake's VAD hears as speech, then the silence that ends the turn."""
    return pcm_tone(speech_ms, rate=rate) + pcm_silence(700, rate=rate)


async def until(condition: Callable[[], bool], within_s: float, what: str) -> None:
    deadline = time.monotonic() + within_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {within_s} s for {what}")
        await asyncio.sleep(0.02)  # polling what a simulator recorded: no event to wait on


# -- Plivo -----------------------------------------------------------------------------------------


class _PlivoCaller:
    rate = 8000

    def __init__(self, call: plivo.PlivoCall) -> None:
        self._call = call

    async def say(self, pcm: bytes) -> None:
        await self._call.speak(pcm, rate=8000)

    async def press(self, digit: str) -> None:
        await self._call.press(digit)

    async def hang_up(self) -> None:
        await self._call.hang_up()

    def heard_pcm(self) -> bytes:
        return self._call.heard_pcm()

    def heard_line(self) -> bytes:
        return self._call.heard()

    def clears(self) -> int:
        return len(self._call.received_events("clearAudio"))

    async def wait_clear(self, within_s: float) -> None:
        await self._call.wait_for("clearAudio", within_s)

    async def wait_closed(self, within_s: float) -> int | None:
        return await self._call.wait_closed(within_s)


def _plivo_webhook(url: str, call_id: str, signed: bool) -> Webhook:
    request = plivo.answer_request(
        url, SECRET, call_id=call_id, fault=None if signed else "wrong-token"
    )
    return Webhook(request.method, request.url, request.headers, request.body)


@contextlib.asynccontextmanager
async def _plivo_call(answer: str, call_id: str) -> AsyncIterator[Caller]:
    async with plivo.PlivoCall.from_answer(answer, call_id=call_id) as call:
        yield _PlivoCaller(call)


PLIVO = Line(
    "plivo",
    "/plivo/answer",
    lambda secret: {"plivo_auth_token": secret},
    _plivo_webhook,
    _plivo_call,
    8000,
    True,
)


# -- Vonage ----------------------------------------------------------------------------------------


class _VonageCaller:
    def __init__(self, call: vonage.VonageCall) -> None:
        self._call = call
        self.rate = call.rate

    async def say(self, pcm: bytes) -> None:
        await self._call.speak(pcm, realtime=False)

    async def press(self, digit: str) -> None:
        await self._call.press(digit)

    async def hang_up(self) -> None:
        await self._call.hang_up()

    def heard_pcm(self) -> bytes:
        return self._call.heard_pcm()

    def clears(self) -> int:
        return len(self._call.received_events("clear"))

    async def wait_clear(self, within_s: float) -> None:
        await self._call.wait_for("clear", within_s)

    async def wait_closed(self, within_s: float) -> int | None:
        await self._call.wait_closed(within_s)
        return self._call.close_code


def _vonage_webhook(url: str, call_id: str, signed: bool) -> Webhook:
    make = vonage.answer_request if signed else vonage.wrongly_signed_answer_request
    options: dict[str, Any] = {"call_uuid": call_id, "issued_at": time.time()}
    if signed:
        options["secret"] = SECRET
    request = make(url, **options)
    return Webhook(request.method, request.url, request.headers, request.body)


@contextlib.asynccontextmanager
async def _vonage_call(answer: str, call_id: str) -> AsyncIterator[Caller]:
    async with vonage.VonageCall.open_from_ncco(answer) as call:
        yield _VonageCaller(call)


VONAGE = Line(
    "vonage",
    "/vonage/answer",
    lambda secret: {"vonage_signature_secret": secret},
    _vonage_webhook,
    _vonage_call,
    16000,
    False,
)


# -- Exotel ----------------------------------------------------------------------------------------


class _ExotelCaller:
    def __init__(self, call: exotel.ExotelCall, rate: int) -> None:
        self._call = call
        self.rate = rate

    async def say(self, pcm: bytes) -> None:
        await self._call.speak(pcm, realtime=False)

    async def press(self, digit: str) -> None:
        await self._call.press(digit)

    async def hang_up(self) -> None:
        await self._call.hang_up()

    def heard_pcm(self) -> bytes:
        return self._call.heard_pcm()

    def clears(self) -> int:
        return len(self._call.received_events("clear"))

    async def wait_clear(self, within_s: float) -> None:
        await self._call.wait_for("clear", within_s)

    async def wait_closed(self, within_s: float) -> int | None:
        await self._call.wait_closed(within_s)
        return self._call.close_code


def _exotel_webhook(url: str, call_id: str, signed: bool) -> Webhook:
    if signed:
        request = exotel.answer_request(url, secret=SECRET, call_sid=call_id)
    else:
        request = exotel.wrongly_signed_answer_request(url, call_sid=call_id)
    return Webhook(request.method, request.url, request.headers, request.body)


@contextlib.asynccontextmanager
async def _exotel_call(answer: str, call_id: str) -> AsyncIterator[Caller]:
    url = orjson.loads(answer)["url"]
    async with exotel.ExotelCall.open(url, call_sid=call_id) as call:
        yield _ExotelCaller(call, 8000)


EXOTEL = Line(
    "exotel",
    "/exotel/answer",
    lambda secret: {"exotel_answer_secret": secret},
    _exotel_webhook,
    _exotel_call,
    8000,
    False,
)

LINES = (PLIVO, VONAGE, EXOTEL)

__all__ = ["EXOTEL", "LINES", "PLIVO", "SECRET", "VONAGE", "Caller", "Line", "until", "utterance"]
