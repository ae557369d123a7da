"""What the client heard, and what a barge-in truncates (gateway.session.playback): pure."""

from __future__ import annotations

from gateway.session.playback import BargeIn, PlaybackCursor, SpokenResponse


def spoken(cursor: PlaybackCursor, response_id: str, ms: float, at: float) -> SpokenResponse:
    response = cursor.start(response_id)
    response.audio_ms = ms
    response.first_audio_at = at
    return response


def test_heard_is_the_clients_report_else_the_wall_clock_never_more_than_sent() -> None:
    response = SpokenResponse("r1", audio_ms=1000.0, first_audio_at=10.0)
    assert response.heard_ms(10.4) == 400
    assert response.heard_ms(99.0) == 1000  # cannot have heard more than was sent
    response.played_ms = 250
    assert response.heard_ms(99.0) == 250
    assert SpokenResponse("r2").heard_ms(5.0) == 0
    assert SpokenResponse("r3", audio_ms=100.0, played_ms=-5).heard_ms(0.0) == 0


def test_a_barge_in_interrupts_the_response_in_flight_and_truncates_it() -> None:
    cursor = PlaybackCursor()
    response = spoken(cursor, "r1", 2000.0, at=0.0)
    assert cursor.barge_in(0.6, can_truncate=True) == BargeIn(True, ("r1", 600))
    assert response.interrupted
    # A second speech start on the same response changes nothing more.
    assert cursor.barge_in(0.9, can_truncate=True) == BargeIn(False)


def test_a_response_still_playing_after_its_end_is_cut_once() -> None:
    cursor = PlaybackCursor()
    spoken(cursor, "r1", 3000.0, at=0.0)
    assert cursor.done("r1", "completed")[1] == "completed"
    assert cursor.last_spoken is not None
    cursor.played("r1", 1200)
    assert cursor.barge_in(2.0, can_truncate=True) == BargeIn(False, ("r1", 1200))
    assert cursor.barge_in(2.5, can_truncate=True) == BargeIn(False)  # cut once


def test_a_response_played_to_its_end_is_not_cut() -> None:
    cursor = PlaybackCursor()
    spoken(cursor, "r1", 500.0, at=0.0)
    cursor.done("r1", "completed")
    assert cursor.barge_in(5.0, can_truncate=True) == BargeIn(False)


def test_without_truncation_nothing_is_truncated_but_the_response_stops() -> None:
    cursor = PlaybackCursor()
    response = spoken(cursor, "r1", 2000.0, at=0.0)
    assert cursor.barge_in(0.5, can_truncate=False) == BargeIn(True)
    assert response.interrupted


def test_done_reports_an_interrupted_completion_and_ignores_other_ids() -> None:
    cursor = PlaybackCursor()
    spoken(cursor, "r1", 800.0, at=0.0)
    assert cursor.done("r0", "completed") == (None, "completed")  # an older, held response
    cursor.barge_in(0.1, can_truncate=True)
    response, status = cursor.done("r1", "completed")
    assert response is not None
    assert status == "interrupted"
    assert cursor.last_spoken is None  # an interrupted response is not "still playing"
    assert cursor.current is None


def test_playback_reports_only_touch_known_responses() -> None:
    cursor = PlaybackCursor()
    response = spoken(cursor, "r1", 800.0, at=0.0)
    cursor.played("made-up", 700)
    assert response.played_ms is None
    cursor.played("r1", 300)
    assert response.played_ms == 300
