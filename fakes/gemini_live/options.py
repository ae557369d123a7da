"""The knobs of the fake Gemini Live server (one frozen record, shared by every connection)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["FakeGeminiOptions"]


@dataclass(frozen=True, slots=True)
class FakeGeminiOptions:
    # Set: the upgrade needs this key (x-goog-api-key, ?key=, Authorization: Token …, or
    # ?access_token=); any other key, or none at all → HTTP 401 with a JSON body.
    api_key: str | None = None
    pace: float = 0.0  # audio output pacing: 0 = as fast as possible, 1.0 = real time
    setup_complete: bool = True  # False: accept setup but never answer it (hang fault)
    # Set: this many seconds after the upgrade the socket closes with 1001, and ``goAway`` comes
    # ``go_away_lead_s`` before (at once if the lifetime is shorter; not at all if that moment
    # falls before ``setupComplete``, which must stay the first server message).
    connection_lifetime_s: float | None = None
    go_away_lead_s: float = 1.0  # how long before the close goAway is sent (timeLeft = "<n>s")
    duplicate_tool_calls: bool = False  # every toolCall message is sent twice (same ids)
    binary_frames: bool = True  # server JSON in binary frames (production); False: text
    echo: bool = False  # benchmark mode: each audio input answered with one modelTurn, same data
    log_frames: bool = True  # keep the per-connection frame log (``wait_for`` needs it)
    # Speech or activityStart interrupts a generation (START_OF_ACTIVITY_INTERRUPTS) unless the
    # setup says NO_INTERRUPTION; False: never (``clientContent`` always interrupts).
    interrupt_on_speech: bool = True
    # A toolResponse for an unknown or cancelled id: False = ignore it (and note it in
    # ``FakeGeminiConnection.ignored``); True = close 1008 "Requested entity was not found".
    strict_tool_ids: bool = False
    # activityStart/activityEnd while automatic activity detection is on (undocumented in the
    # real service): True = close 1007; False = ignore them (noted).
    reject_manual_activity: bool = True

    def __post_init__(self) -> None:
        if self.pace < 0:
            raise ValueError("pace must be >= 0")
        if self.connection_lifetime_s is not None and self.connection_lifetime_s <= 0:
            raise ValueError("connection_lifetime_s must be > 0")
        if self.go_away_lead_s < 0:
            raise ValueError("go_away_lead_s must be >= 0")
