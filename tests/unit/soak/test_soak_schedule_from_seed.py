"""The soak's schedule is a function of its seed and settings: which kind of fault at which
second, aimed at which session slot; the kind of each slot's n-th session and the stream of its
turns. Where the moment decides (which session can meet a fault now), the choice is
deterministic given the state. Pure: no event loop, no fleet."""

from __future__ import annotations

from soak.driver import MIX
from soak.schedule import (
    FAULT_KINDS,
    Candidate,
    FaultHit,
    PlannedFault,
    choose_target,
    draw_session,
    plan_fleet_faults,
    plan_session_faults,
    schedule_report,
    stream,
)

# The run: 4 minutes, 100 sessions, 12 faults a minute after 30 % of calm.
START, END, RATE, SLOTS = 72.0, 240.0, 12.0, 100


def test_the_same_seed_plans_the_same_faults_and_another_seed_others() -> None:
    first = plan_session_faults(7, START, END, RATE, SLOTS)
    again = plan_session_faults(7, START, END, RATE, SLOTS)
    other = plan_session_faults(8, START, END, RATE, SLOTS)
    assert first == again
    assert [(f.at, f.kind, f.slot) for f in first] != [(f.at, f.kind, f.slot) for f in other]
    assert 15 <= len(first) <= 60  # about 12 a minute over 168 s
    assert all(START < f.at < END for f in first)
    assert [f.at for f in first] == sorted(f.at for f in first)
    assert {f.kind for f in first} <= set(FAULT_KINDS)
    assert len({f.kind for f in first}) >= 8
    assert all(0 <= f.slot < SLOTS for f in first)
    assert plan_session_faults(7, START, END, 0.0, SLOTS) == ()


def test_a_slots_sessions_are_the_same_kinds_and_streams_whatever_the_other_slots_drew() -> None:
    def sessions(seed: int, slot: int, count: int = 30) -> list[tuple[str, int, int]]:
        rng = stream(seed, f"slot:{slot}")
        return [
            (d.kind, d.turns_seed, d.nodes_seed)
            for d in (draw_session(rng, MIX) for _ in range(count))
        ]

    slot_3 = sessions(7, 3)
    for slot in range(20):  # other slots drawing in between change nothing: streams are apart
        sessions(7, slot, 5)
    assert sessions(7, 3) == slot_3
    assert sessions(7, 4) != slot_3
    assert sessions(8, 3) != slot_3
    assert {kind for kind, _, _ in slot_3} <= {kind for kind, _, _ in MIX}
    # A stream is the same in every process: a string seed goes through SHA-512, not hash().
    assert stream(7, "session-faults").random() == stream(7, "session-faults").random()


def test_a_fault_goes_to_its_slot_else_the_next_slot_up_that_can_meet_it() -> None:
    planned = PlannedFault(100.0, "malformed", slot=7)
    candidates = [Candidate(2, False), Candidate(7, False), Candidate(9, True)]
    assert choose_target(planned, 10, candidates) == Candidate(7, False)
    assert choose_target(planned, 10, [Candidate(2, True), Candidate(9, False)]) == Candidate(
        9, False
    )
    # Wrapping past the last slot; the order the sessions are listed in does not matter.
    assert choose_target(planned, 10, [Candidate(5, False), Candidate(2, False)]) == Candidate(
        2, False
    )
    assert choose_target(planned, 10, []) is None


def test_an_upstream_fault_prefers_a_session_in_a_turn() -> None:
    planned = PlannedFault(100.0, "gemini_drop", slot=1)
    idle_first = [Candidate(1, False), Candidate(4, True), Candidate(6, True)]
    assert choose_target(planned, 10, idle_first) == Candidate(4, True)
    assert choose_target(planned, 10, [Candidate(1, False)]) == Candidate(1, False)


def test_the_report_pairs_the_plan_with_what_became_of_it_and_its_digest_follows_the_seed() -> None:
    fleet = plan_fleet_faults(START, END, 180.0, redis=True)
    planned = plan_session_faults(7, START, END, RATE, SLOTS)
    hits = [
        FaultHit(planned[0], planned[0].at + 0.01, session=41, slot=12, ordinal=2),
        FaultHit(planned[1], planned[1].at, note="no live session could meet it (gemini)"),
    ]
    done = [
        {"at_s": 1.0, "kind": "malformed", "ok": True},  # a session fault: not the fleet's
        {"at_s": 162.3, "kind": "sigterm_restart", "ok": True},
    ]
    report = schedule_report(7, fleet, planned, hits, done)
    assert report["seed"] == 7
    assert [row["kind"] for row in report["fleet"]] == ["sigterm_restart", "redis_restart"]
    assert (report["fleet"][0]["began_s"], report["fleet"][0]["ok"]) == (162.3, True)
    assert (report["fleet"][1]["began_s"], report["fleet"][1]["ok"]) == (None, None)
    first, second, third = report["session_faults"][:3]
    assert (first["hit"], first["hit_slot"], first["hit_ordinal"]) == ("s41", 12, 2)
    assert (first["at_s"], first["kind"], first["slot"]) == (
        planned[0].at,
        planned[0].kind,
        planned[0].slot,
    )
    assert second["hit"] is None
    assert "no live session" in second["note"]
    assert third["aimed_at_s"] is None  # the run ended before it
    # The digest is the plan's alone: what became of it does not change it.
    assert schedule_report(7, fleet, planned, [], [])["digest"] == report["digest"]
    other = schedule_report(8, fleet, plan_session_faults(8, START, END, RATE, SLOTS), [], [])
    assert other["digest"] != report["digest"]
