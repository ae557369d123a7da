"""The example care API: its rules (pure) and its command line (a real process, a real socket)."""

from __future__ import annotations

import subprocess
import sys
import time
from datetime import date

import aiohttp
import jwt
from cli_kit import REPO, served

from fakes.care_api import AppointmentBook

SECRET = "care-api-cli-secret-0123456789abcdef"
TODAY = date(2030, 1, 7)


def test_each_patient_sees_and_moves_only_their_own_appointments() -> None:
    book = AppointmentBook(TODAY)
    status, alice = book.search("alice")
    assert status == 200
    assert [a["id"] for a in alice["appointments"]] == ["A1001", "A1002", "A1003"]
    assert book.get("bob", "A1001") == (
        404,
        {"error": "not_found", "message": "no appointment A1001"},
    )
    assert book.reschedule("bob", "A1001", {"start": "2030-01-09T09:00:00+00:00"})[0] == 404
    status, moved = book.reschedule("alice", "A1001", {"start": "2030-01-09T09:00:00+01:00"})
    assert (status, moved["start"]) == (200, "2030-01-09T08:00:00+00:00")


def test_the_refusals_a_real_api_gives() -> None:
    book = AppointmentBook(TODAY)
    cases = {
        "2030-01-09T09:10:00+00:00": (422, "start must be on the hour or the half hour"),
        "2030-01-07T10:00:00+00:00": (422, "start must be a day after today"),
        "2030-01-09T19:00:00+00:00": (422, "visits take place between 08:00 and 18:00 UTC"),
        "2030-01-09T09:00:00": (422, "start needs a UTC offset, e.g. +01:00"),
        "soon": (422, "start must be an ISO 8601 date and time"),
        "2030-01-10T14:00:00+00:00": (409, "the new time overlaps appointment A1002"),
    }
    for start, (status, message) in cases.items():
        got_status, body = book.reschedule("alice", "A1001", {"start": start})
        assert (got_status, body["message"][: len(message)]) == (status, message), start
    book.cancel("A1001")
    assert book.reschedule("alice", "A1001", {"start": "2030-01-09T09:00:00+00:00"}) == (
        409,
        {"error": "conflict", "message": "appointment A1001 is cancelled"},
    )
    assert book.search("alice", "2030-02-01", "2030-01-01")[0] == 422
    assert book.search("alice", status="gone")[0] == 422
    assert book.search("alice", "next week")[1]["field"] == "from_date"


async def test_the_command_line_checks_the_token_and_serves_until_sigterm() -> None:
    args = ("--port", "0", "--jwt-secret", SECRET)
    listening = rb"listening (http://127\.0\.0\.1:\d+)\n"
    async with served("fakes.care_api", *args, listening=listening) as cli:
        url = cli.match.group(1).decode() + "/v1/appointments"
        bearer = jwt.encode({"sub": "carol", "exp": int(time.time()) + 60}, SECRET, "HS256")
        async with aiohttp.ClientSession() as http:
            async with http.get(url) as refused:
                assert refused.status == 401
            headers = {"Authorization": f"Bearer {bearer}"}
            async with http.get(url, headers=headers, params={"page": "2"}) as strict:
                assert strict.status == 422  # an unknown parameter
            async with http.get(url, headers=headers) as listed:
                assert listed.status == 200
                assert (await listed.json())["count"] == 3
        assert await cli.terminate() == 0


def test_the_command_line_needs_something_to_check_tokens_with() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "fakes.care_api", "--port", "0"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "--jwt-secret" in done.stderr
