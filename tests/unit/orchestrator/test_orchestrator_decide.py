"""``decide_call``: every rule, in order, against the project's real tools (pure, no event loop).

Time comes from a ``ManualClock``; confirmation ids from a counter. Tools that the project does
not ship (a high tool and a retrieval tool that need confirmation) are built in a temporary
folder from copies of the real ones.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from gateway.clock import ManualClock
from gateway.orchestrator import (
    CallPolicy,
    ConfirmationBook,
    Execute,
    LookupResult,
    Refuse,
    TurnState,
    decide_call,
    has_explicit_intent,
)
from gateway.registry import Registry, load_registry
from gateway.toolrun import DEFAULT_BUDGETS, Mode, ToolCall, arguments_hash
from registry_build import build_registry
from registry_build.build import serialize_artifact
from tools._core import ToolErrorType

REPO = Path(__file__).resolve().parents[3]
TTL = timedelta(seconds=120)

EVENT = {"title": "Nurse visit", "start": "2026-01-02T10:00:00+01:00"}
CARE_NOTE = {"patient_id": "pat_1042", "note": "Ate well, slept badly.", "severity": "low"}
DOSE = {"medication": "amlodipine", "dose": "10 mg"}

Arguments = str | Mapping[str, Any] | None


# --------------------------------------------------------------------------------------------
# helpers


@dataclass
class Session:
    """The state ``decide_call`` reads and mutates, as one session holds it."""

    policy: CallPolicy
    turn: TurnState = field(default_factory=TurnState)
    book: ConfirmationBook = field(default_factory=lambda: ConfirmationBook(TTL))
    clock: ManualClock = field(default_factory=ManualClock)
    issued: int = 0
    calls: int = 0

    def new_id(self) -> str:
        self.issued += 1
        return f"conf-{self.issued}"

    def decide(self, tool_id: str, arguments: Arguments = None) -> Execute | Refuse:
        self.calls += 1
        call = ToolCall(f"call-{self.calls}", tool_id, arguments)
        return decide_call(
            call, self.policy, self.turn, self.book, now=self.clock.now(), new_id=self.new_id
        )

    def user_says(self, text: str) -> None:
        """A new user turn with these words; the model's first tool batch of it."""
        self.turn.start(text)
        self.turn.begin_round()


def session(
    registry: Registry,
    *,
    mode: Mode = "text",
    roles: tuple[str, ...] = ("user",),
    enabled: tuple[str, ...] | None = None,
    said: str = "hello",
) -> Session:
    policy = CallPolicy(
        registry=registry,
        mode=mode,
        roles=frozenset(roles),
        enabled=None if enabled is None else frozenset(enabled),
        budget=DEFAULT_BUDGETS[mode],
    )
    s = Session(policy)
    s.user_says(said)
    return s


def with_id(args: Mapping[str, Any], confirmation_id: str) -> dict[str, Any]:
    return {**args, "confirmation_id": confirmation_id}


def refused(decision: Execute | Refuse, error_type: ToolErrorType, *fragments: str) -> Refuse:
    assert isinstance(decision, Refuse), decision
    assert decision.error_type is error_type, decision
    for fragment in fragments:
        assert fragment in decision.message, (fragment, decision.message)
    return decision


def executed(decision: Execute | Refuse) -> Execute:
    assert isinstance(decision, Execute), decision
    return decision


def confirmation_opened(decision: Execute | Refuse) -> str:
    """The first call to a tool that needs confirmation: the id the model is given."""
    refusal = refused(decision, ToolErrorType.CONFIRMATION_REQUIRED)
    assert refusal.reason == "confirmation"
    assert refusal.opened is not None
    return refusal.opened.confirmation_id


def copy_tool(src: str, dest_root: Path, new_id: str, **changes: Any) -> None:
    dest = dest_root / new_id
    shutil.copytree(REPO / "tools" / src, dest, ignore=shutil.ignore_patterns("__pycache__"))
    schema_path = dest / "schema.json"
    schema = json.loads(schema_path.read_text())
    schema.update(toolId=new_id, **changes)
    schema_path.write_text(json.dumps(schema, indent=2))


@pytest.fixture(scope="module")
def variant_registry(tmp_path_factory: pytest.TempPathFactory) -> Registry:
    """Copies of real tools with ``requiresConfirmation`` turned on."""
    root = tmp_path_factory.mktemp("variant_tools")
    copy_tool("log_medication", root, "log_medication_confirmed", requiresConfirmation=True)
    copy_tool("kb_search", root, "kb_search_confirmed", requiresConfirmation=True)
    result = build_registry([root])
    assert result.artifact is not None, [str(e) for e in result.errors]
    out = root / "variant_registry.json"
    out.write_bytes(serialize_artifact(result.artifact))
    return load_registry(out)


# --------------------------------------------------------------------------------------------
# 1. registry lookup


def test_unknown_tool_is_not_found(project_registry: Registry) -> None:
    refusal = refused(
        session(project_registry).decide("delete_everything", {}),
        ToolErrorType.NOT_FOUND,
        "no tool named 'delete_everything'",
    )
    assert refusal.reason == "unknown"
    assert refusal.args is None


def test_not_found_is_decided_before_the_arguments_are_read(project_registry: Registry) -> None:
    refused(
        session(project_registry).decide("delete_everything", "{not json"), ToolErrorType.NOT_FOUND
    )


# --------------------------------------------------------------------------------------------
# 2. roles and the session filter


@pytest.mark.parametrize("roles", [("user",), (), ("patient", "viewer")])
def test_critical_tool_is_forbidden_without_a_permitted_role(
    project_registry: Registry, roles: tuple[str, ...]
) -> None:
    s = session(project_registry, roles=roles, said="please record a care log note")
    refusal = refused(
        s.decide("create_care_log", CARE_NOTE),
        ToolErrorType.FORBIDDEN,
        "'create_care_log' is not available to this user",
    )
    assert refusal.reason == "forbidden"
    assert len(s.book) == 0


@pytest.mark.parametrize("roles", [("caregiver",), ("admin",), ("user", "caregiver")])
def test_a_permitted_role_passes_the_role_check(
    project_registry: Registry, roles: tuple[str, ...]
) -> None:
    s = session(project_registry, roles=roles, said="please record a care log note")
    confirmation_opened(s.decide("create_care_log", CARE_NOTE))


def test_session_filter_forbids_a_tool_outside_it(project_registry: Registry) -> None:
    s = session(project_registry, enabled=("kb_search",))
    refused(
        s.decide("get_current_time", {}),
        ToolErrorType.FORBIDDEN,
        "'get_current_time' is not available",
    )
    executed(s.decide("kb_search", {"query": "opening hours"}))


def test_an_empty_session_filter_forbids_everything(project_registry: Registry) -> None:
    refused(
        session(project_registry, enabled=()).decide("get_current_time"), ToolErrorType.FORBIDDEN
    )


def test_the_filter_cannot_grant_what_the_roles_forbid(project_registry: Registry) -> None:
    s = session(project_registry, enabled=("create_care_log",), said="record a care log note")
    refused(s.decide("create_care_log", CARE_NOTE), ToolErrorType.FORBIDDEN)


def test_forbidden_is_decided_before_the_mode(project_registry: Registry) -> None:
    s = session(project_registry, mode="text", enabled=("kb_search",))
    refused(s.decide("end_voice_session", {}), ToolErrorType.FORBIDDEN)


# --------------------------------------------------------------------------------------------
# 3. mode


def test_voice_only_tool_is_mode_restricted_in_text(project_registry: Registry) -> None:
    refusal = refused(
        session(project_registry, mode="text").decide("end_voice_session", {}),
        ToolErrorType.MODE_RESTRICTED,
        "'end_voice_session' cannot be used in text mode",
    )
    assert refusal.reason == "mode"


def test_voice_only_tool_runs_in_voice(project_registry: Registry) -> None:
    decision = executed(
        session(project_registry, mode="voice").decide("end_voice_session", {"reason": "bye"})
    )
    assert decision.args == {"reason": "bye"}
    assert decision.confirmation is None


def test_mode_is_decided_before_the_arguments(project_registry: Registry) -> None:
    s = session(project_registry, mode="text")
    refused(s.decide("end_voice_session", "[1, 2"), ToolErrorType.MODE_RESTRICTED)


# --------------------------------------------------------------------------------------------
# 4. arguments


def test_invalid_json_string_is_a_validation_error(project_registry: Registry) -> None:
    refusal = refused(
        session(project_registry).decide("kb_search", '{"query": "hours"'),
        ToolErrorType.VALIDATION,
        "arguments are not valid JSON",
        "send a JSON object",
    )
    assert refusal.reason == "validation"
    assert refusal.args is None


@pytest.mark.parametrize(
    ("raw", "kind"),
    [("[1, 2]", "list"), ('"opening hours"', "str"), ("42", "int"), ("null", "NoneType")],
)
def test_json_that_is_not_an_object_is_a_validation_error(
    project_registry: Registry, raw: str, kind: str
) -> None:
    refused(
        session(project_registry).decide("kb_search", raw),
        ToolErrorType.VALIDATION,
        f"arguments must be a JSON object, not {kind}",
    )


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ({}, "query"),
        ({"query": ""}, "arguments.query"),
        ({"query": 3}, "arguments.query must be string"),
        ({"query": "x", "limit": 99}, "arguments.limit"),
        ({"query": "x", "bogus": 1}, "bogus"),
    ],
)
def test_schema_violation_is_a_validation_error_naming_the_field(
    project_registry: Registry, args: dict[str, Any], fragment: str
) -> None:
    refusal = refused(
        session(project_registry).decide("kb_search", args), ToolErrorType.VALIDATION, fragment
    )
    assert refusal.reason == "validation"
    assert refusal.args is not None
    assert refusal.args.items() >= args.items()


def test_a_schema_violation_does_not_spend_the_retrieval_budget(project_registry: Registry) -> None:
    s = session(project_registry, mode="voice")
    for _ in range(5):
        refused(s.decide("kb_search", {}), ToolErrorType.VALIDATION)
    assert s.turn.retrieval_calls == 0
    executed(s.decide("kb_search", {"query": "hours"}))


def test_non_string_confirmation_id_is_a_validation_error(project_registry: Registry) -> None:
    refused(
        session(project_registry).decide("calendar_create_event", {**EVENT, "confirmation_id": 7}),
        ToolErrorType.VALIDATION,
        "confirmation_id must be a string",
    )


@pytest.mark.parametrize("arguments", [None, "", "{}", {}])
def test_empty_arguments_are_an_empty_object(
    project_registry: Registry, arguments: Arguments
) -> None:
    assert executed(session(project_registry).decide("get_current_time", arguments)).args == {
        "timezone": "UTC"
    }


def test_string_and_object_arguments_decide_the_same(project_registry: Registry) -> None:
    s = session(project_registry)
    from_string = executed(s.decide("kb_search", '{"query": "hours", "limit": 2}'))
    from_object = executed(s.decide("kb_search", {"query": "hours", "limit": 2}))
    assert from_string.args == from_object.args == {"query": "hours", "limit": 2}


def test_confirmation_id_is_ignored_for_a_tool_without_confirmation(
    project_registry: Registry,
) -> None:
    """It is taken out before validation, so ``additionalProperties: false`` never sees it."""
    decision = executed(session(project_registry).decide("kb_search", with_id({"query": "x"}, "c")))
    assert "confirmation_id" not in decision.args
    assert decision.confirmation is None


# --------------------------------------------------------------------------------------------
# 5. rounds


@pytest.mark.parametrize(
    ("tool_id", "args"),
    [
        ("kb_search", {"query": "hours"}),
        ("get_current_time", {}),
        ("calendar_create_event", EVENT),
        ("log_medication", DOSE),
    ],
)
def test_past_the_rounds_limit_every_call_is_refused(
    project_registry: Registry, tool_id: str, args: dict[str, Any]
) -> None:
    s = session(project_registry, said="I took my pills")
    s.turn.rounds = s.policy.budget.rounds_per_turn + 1
    refusal = refused(
        s.decide(tool_id, args),
        ToolErrorType.BUDGET_EXCEEDED,
        "no more tool use this turn (limit 5 rounds)",
        "answer the user with what you have",
    )
    assert refusal.reason == "rounds"
    assert refusal.opened is None
    assert len(s.book) == 0
    assert s.turn.retrieval_calls == 0


@pytest.mark.parametrize("mode", ["voice", "text"])
def test_the_last_allowed_round_still_runs_tools(project_registry: Registry, mode: Mode) -> None:
    s = session(project_registry, mode=mode)
    for _ in range(DEFAULT_BUDGETS[mode].rounds_per_turn - 1):
        s.turn.begin_round()
    assert s.turn.rounds == DEFAULT_BUDGETS[mode].rounds_per_turn
    executed(s.decide("get_current_time", {}))
    s.turn.begin_round()
    refused(s.decide("get_current_time", {}), ToolErrorType.BUDGET_EXCEEDED)


def test_a_new_turn_resets_the_rounds(project_registry: Registry) -> None:
    s = session(project_registry)
    s.turn.rounds = 6
    refused(s.decide("get_current_time", {}), ToolErrorType.BUDGET_EXCEEDED)
    s.user_says("and now?")
    assert s.turn.rounds == 1
    executed(s.decide("get_current_time", {}))


def test_validation_is_decided_before_the_rounds(project_registry: Registry) -> None:
    s = session(project_registry)
    s.turn.rounds = 6
    refused(s.decide("kb_search", "{oops"), ToolErrorType.VALIDATION)


def test_rounds_are_decided_before_a_spoken_yes(project_registry: Registry) -> None:
    s = session(project_registry)
    confirmation_id = confirmation_opened(s.decide("calendar_create_event", EVENT))
    s.turn.rounds = 6
    refused(
        s.decide("calendar_create_event", with_id(EVENT, confirmation_id)),
        ToolErrorType.BUDGET_EXCEEDED,
    )
    assert s.book.lookup(confirmation_id, s.clock.now()).result is LookupResult.PENDING


# --------------------------------------------------------------------------------------------
# 9. retrieval budget (per mode, per turn)


@pytest.mark.parametrize(("mode", "limit"), [("voice", 2), ("text", 5)])
def test_retrieval_calls_past_the_mode_budget_are_refused(
    project_registry: Registry, mode: Mode, limit: int
) -> None:
    s = session(project_registry, mode=mode)
    assert s.policy.budget.retrieval_calls_per_turn == limit
    for i in range(limit):
        executed(s.decide("kb_search", {"query": f"question {i}"}))
    refusal = refused(
        s.decide("kb_search", {"query": "one more"}),
        ToolErrorType.BUDGET_EXCEEDED,
        f"at most {limit} retrieval calls per turn in {mode} mode",
    )
    assert refusal.reason == "budget"
    assert refusal.args == {"query": "one more", "limit": 3}
    # kb_get shares the budget; refusals do not count.
    refused(s.decide("kb_get", {"id": "opening-hours"}), ToolErrorType.BUDGET_EXCEEDED)
    assert s.turn.retrieval_calls == limit


def test_retrieval_budget_is_shared_by_all_retrieval_tools(project_registry: Registry) -> None:
    s = session(project_registry, mode="voice")
    executed(s.decide("kb_search", {"query": "hours"}))
    executed(s.decide("kb_get", {"id": "opening-hours"}))
    refused(s.decide("kb_search", {"query": "fees"}), ToolErrorType.BUDGET_EXCEEDED)


def test_non_retrieval_tools_are_not_counted(project_registry: Registry) -> None:
    s = session(project_registry, mode="voice")
    for _ in range(2):
        executed(s.decide("kb_search", {"query": "hours"}))
    for _ in range(4):
        executed(s.decide("get_current_time", {}))
    assert s.turn.retrieval_calls == 2


def test_turn_start_resets_the_retrieval_budget(project_registry: Registry) -> None:
    s = session(project_registry, mode="voice")
    executed(s.decide("kb_search", {"query": "a"}))
    executed(s.decide("kb_search", {"query": "b"}))
    refused(s.decide("kb_search", {"query": "c"}), ToolErrorType.BUDGET_EXCEEDED)
    s.user_says("another question")
    assert s.turn.retrieval_calls == 0
    assert s.turn.number == 2
    executed(s.decide("kb_search", {"query": "c"}))
    assert s.turn.retrieval_calls == 1


def test_heard_does_not_reset_the_budget(project_registry: Registry) -> None:
    s = session(project_registry, mode="voice")
    executed(s.decide("kb_search", {"query": "a"}))
    executed(s.decide("kb_search", {"query": "b"}))
    s.turn.heard("the rest of what the user said")
    refused(s.decide("kb_search", {"query": "c"}), ToolErrorType.BUDGET_EXCEEDED)


def test_a_confirmed_retrieval_call_is_counted(variant_registry: Registry) -> None:
    s = session(variant_registry, mode="voice")
    confirmation_id = confirmation_opened(s.decide("kb_search_confirmed", {"query": "hours"}))
    executed(s.decide("kb_search_confirmed", with_id({"query": "hours"}, confirmation_id)))
    assert s.turn.retrieval_calls == 1


def test_a_retrieval_call_needing_confirmation_past_the_budget_is_refused(
    variant_registry: Registry,
) -> None:
    s = session(variant_registry, mode="voice")
    s.turn.retrieval_calls = s.policy.budget.retrieval_calls_per_turn
    refused(s.decide("kb_search_confirmed", {"query": "hours"}), ToolErrorType.BUDGET_EXCEEDED)
    assert len(s.book) == 0


# --------------------------------------------------------------------------------------------
# 7. explicit intent


@pytest.mark.parametrize(
    "said",
    [
        "What's the weather like?",
        "That was a mistake",
        "Mistakes happen, I was taking a break",
        "I retake the test tomorrow",
        "",
    ],
)
def test_high_tool_without_an_intent_keyword_is_refused(
    project_registry: Registry, said: str
) -> None:
    s = session(project_registry, said=said)
    refusal = refused(
        s.decide("log_medication", DOSE),
        ToolErrorType.INTENT_NOT_EXPLICIT,
        "the user did not explicitly ask for this; 'log_medication' needs them to say so",
        "'took', 'taken', 'take'",
    )
    assert refusal.reason == "intent"
    assert refusal.args == DOSE


@pytest.mark.parametrize(
    "said",
    [
        "I took my pills",
        "I TOOK MY PILLS!",
        "Just had my amlodipine.",
        "I've taken it",
        "Please log it",
        "Log it please, I swallowed it",
    ],
)
def test_high_tool_with_an_intent_keyword_runs(project_registry: Registry, said: str) -> None:
    decision = executed(session(project_registry, said=said).decide("log_medication", DOSE))
    assert decision.args == DOSE


def test_intent_is_read_from_the_latest_transcript(project_registry: Registry) -> None:
    s = session(project_registry, mode="voice", said="hm")
    refused(s.decide("log_medication", DOSE), ToolErrorType.INTENT_NOT_EXPLICIT)
    s.turn.heard("I swallowed my tablet")
    executed(s.decide("log_medication", DOSE))


def test_intent_is_checked_before_the_confirmation_opens(project_registry: Registry) -> None:
    s = session(project_registry, roles=("caregiver",), said="how is she today?")
    refused(s.decide("create_care_log", CARE_NOTE), ToolErrorType.INTENT_NOT_EXPLICIT)
    assert len(s.book) == 0
    assert s.issued == 0


def test_low_tools_need_no_intent(project_registry: Registry) -> None:
    executed(session(project_registry, said="").decide("get_current_time", {}))


@pytest.mark.parametrize(
    ("keywords", "utterance", "expected"),
    [
        (("had my",), "I had my pills", True),
        (("had my",), "Had   my pills", True),
        (("had my",), "I HAD MY PILLS", True),
        (("had my",), "Chad my friend", False),
        (("had my",), "I had mystery meat", False),
        (("had my",), "I had pills", False),
        (("had my",), "my had", False),
        (("take",), "mistake", False),
        (("take",), "taken", False),
        (("take",), "retake", False),
        (("take",), "Take!", True),
        (("take",), "(take)", True),
        (("take",), "take-off", True),
        (("took",), "I took.", True),
        (("took",), "o'took", False),
        (("log",), "catalog", False),
        (("log",), "logged", False),
        (("log",), "LOG it", True),
        (("Took",), "i took it", True),
        (("write down",), "please write it down", False),
        (("write down",), "please write-down this", True),
        (("i've taken",), "I've taken it", True),
        (("i've taken",), "Ive taken it", False),
        (("pris",), "J'ai PRIS mes médicaments", True),
        (("médicaments",), "MÉDICAMENTS pris", True),
        (("took",), "", False),
        ((), "I took it", False),
        (("",), "anything at all", False),
        (("...",), "... what ...", False),
        (("nope", "took"), "I took it", True),
    ],
)
def test_has_explicit_intent_matches_whole_words(
    keywords: tuple[str, ...], utterance: str, expected: bool
) -> None:
    assert has_explicit_intent(keywords, utterance) is expected


# --------------------------------------------------------------------------------------------
# 6 and 8. the confirmation matrix


def test_first_call_opens_a_confirmation(project_registry: Registry) -> None:
    s = session(project_registry)
    refusal = refused(
        s.decide("calendar_create_event", EVENT),
        ToolErrorType.CONFIRMATION_REQUIRED,
        "confirmation required before 'calendar_create_event' runs",
        "call the tool again with the same arguments and this confirmation_id",
    )
    assert refusal.reason == "confirmation"
    assert set(refusal.extra) == {"confirmationId", "prompt", "expiresAt"}
    pending = refusal.opened
    assert pending is not None
    assert refusal.extra["confirmationId"] == pending.confirmation_id == "conf-1"
    assert refusal.extra["prompt"] == pending.prompt
    assert refusal.extra["expiresAt"] == (s.clock.now() + TTL).isoformat()
    assert pending.expires_at == s.clock.now() + TTL
    assert pending.call_id == "call-1"
    assert pending.tool_id == "calendar_create_event"
    assert pending.args == refusal.args == {**EVENT, "duration_minutes": 30}
    assert pending.args_hash == arguments_hash("calendar_create_event", pending.args)
    assert pending.sensitivity == "medium"
    assert not pending.critical
    assert "calendar_create_event" in pending.prompt
    assert "title: Nurse visit" in pending.prompt
    assert "start: 2026-01-02T10:00:00+01:00" in pending.prompt
    assert "on your device" not in pending.prompt
    assert s.book.lookup("conf-1", s.clock.now()).result is LookupResult.PENDING


def test_prompt_names_the_action_in_whole_words(project_registry: Registry) -> None:
    refusal = refused(
        session(project_registry).decide("calendar_create_event", EVENT),
        ToolErrorType.CONFIRMATION_REQUIRED,
    )
    assert refusal.opened is not None
    assert "optional time zone and attendees" in refusal.opened.prompt


def test_spoken_yes_with_the_same_arguments_executes_once(project_registry: Registry) -> None:
    s = session(project_registry)
    opened = refused(s.decide("calendar_create_event", EVENT), ToolErrorType.CONFIRMATION_REQUIRED)
    assert opened.opened is not None
    confirmation_id = opened.opened.confirmation_id
    s.user_says("yes")
    decision = executed(s.decide("calendar_create_event", with_id(EVENT, confirmation_id)))
    assert decision.confirmation == opened.opened
    assert decision.args == {**EVENT, "duration_minutes": 30}
    assert "confirmation_id" not in decision.args
    assert len(s.book) == 0
    assert s.book.lookup(confirmation_id, s.clock.now()).result is LookupResult.NOT_FOUND
    # Exactly once: the same re-call again runs nothing.
    again = refused(
        s.decide("calendar_create_event", with_id(EVENT, confirmation_id)),
        ToolErrorType.VALIDATION,
        f"confirmation_not_found: '{confirmation_id}'",
        "call the tool without confirmation_id to ask again",
    )
    assert again.reason == "confirmation_not_found"


def test_spoken_yes_compares_canonical_arguments(project_registry: Registry) -> None:
    """Key order, a JSON string and an explicit default do not make other arguments."""
    s = session(project_registry)
    confirmation_id = confirmation_opened(s.decide("calendar_create_event", EVENT))
    raw = json.dumps(
        {
            "confirmation_id": confirmation_id,
            "duration_minutes": 30,
            "start": EVENT["start"],
            "title": EVENT["title"],
        }
    )
    assert executed(s.decide("calendar_create_event", raw)).confirmation is not None


@pytest.mark.parametrize(
    "other",
    [
        {**EVENT, "title": "Doctor visit"},
        {**EVENT, "duration_minutes": 60},
        {"title": "Nurse visit", "start": "2026-01-02T11:00:00+01:00"},
    ],
)
def test_spoken_yes_with_other_arguments_is_refused_and_stays_pending(
    project_registry: Registry, other: dict[str, Any]
) -> None:
    s = session(project_registry)
    confirmation_id = confirmation_opened(s.decide("calendar_create_event", EVENT))
    refusal = refused(
        s.decide("calendar_create_event", with_id(other, confirmation_id)),
        ToolErrorType.VALIDATION,
        f"confirmation '{confirmation_id}' was for other arguments or another tool",
    )
    assert refusal.reason == "confirmation_mismatch"
    assert s.book.lookup(confirmation_id, s.clock.now()).result is LookupResult.PENDING
    # The confirmed arguments still go through afterwards.
    executed(s.decide("calendar_create_event", with_id(EVENT, confirmation_id)))


def test_spoken_yes_for_another_tool_is_a_mismatch(project_registry: Registry) -> None:
    s = session(project_registry, roles=("caregiver",), said="record it in the care log")
    confirmation_id = confirmation_opened(s.decide("calendar_create_event", EVENT))
    refused(
        s.decide("create_care_log", with_id(CARE_NOTE, confirmation_id)),
        ToolErrorType.VALIDATION,
        "other arguments or another tool",
    )
    assert s.book.lookup(confirmation_id, s.clock.now()).result is LookupResult.PENDING


def test_spoken_yes_after_expiry_is_refused(project_registry: Registry) -> None:
    s = session(project_registry)
    confirmation_id = confirmation_opened(s.decide("calendar_create_event", EVENT))
    s.clock.advance(TTL.total_seconds() + 1)
    for _ in range(2):  # remembered as expired, not forgotten
        refusal = refused(
            s.decide("calendar_create_event", with_id(EVENT, confirmation_id)),
            ToolErrorType.VALIDATION,
            f"confirmation_expired: '{confirmation_id}' expired",
        )
        assert refusal.reason == "confirmation_expired"
    assert len(s.book) == 0


def test_confirmation_expires_exactly_at_its_ttl(project_registry: Registry) -> None:
    s = session(project_registry)
    first = confirmation_opened(s.decide("calendar_create_event", EVENT))
    second = confirmation_opened(s.decide("calendar_create_event", EVENT))
    s.clock.advance(TTL.total_seconds() - 0.001)
    executed(s.decide("calendar_create_event", with_id(EVENT, first)))
    s.clock.advance(0.001)
    refused(
        s.decide("calendar_create_event", with_id(EVENT, second)),
        ToolErrorType.VALIDATION,
        "confirmation_expired",
    )


def test_unknown_confirmation_id_is_not_found(project_registry: Registry) -> None:
    s = session(project_registry)
    refused(
        s.decide("calendar_create_event", with_id(EVENT, "made-up")),
        ToolErrorType.VALIDATION,
        "confirmation_not_found: 'made-up'",
    )
    assert len(s.book) == 0


def test_each_call_without_an_id_opens_its_own_confirmation(project_registry: Registry) -> None:
    s = session(project_registry)
    first = confirmation_opened(s.decide("calendar_create_event", EVENT))
    second = confirmation_opened(s.decide("calendar_create_event", EVENT))
    assert first != second
    assert len(s.book) == 2


def test_an_empty_confirmation_id_is_a_first_call(project_registry: Registry) -> None:
    s = session(project_registry)
    confirmation_opened(s.decide("calendar_create_event", with_id(EVENT, "")))


def test_a_validation_error_on_a_recall_leaves_the_confirmation_pending(
    project_registry: Registry,
) -> None:
    s = session(project_registry)
    confirmation_id = confirmation_opened(s.decide("calendar_create_event", EVENT))
    refused(
        s.decide("calendar_create_event", with_id({"title": ""}, confirmation_id)),
        ToolErrorType.VALIDATION,
        "arguments",
    )
    assert s.book.lookup(confirmation_id, s.clock.now()).result is LookupResult.PENDING


def test_critical_tool_first_call_opens_a_client_confirmation(project_registry: Registry) -> None:
    s = session(project_registry, roles=("caregiver",), said="Please record this in the care log")
    refusal = refused(
        s.decide("create_care_log", CARE_NOTE),
        ToolErrorType.CONFIRMATION_REQUIRED,
        "ask the user to approve it on their device",
    )
    assert refusal.opened is not None
    assert refusal.opened.critical
    assert refusal.opened.prompt.endswith("Approve it on your device.")
    assert set(refusal.extra) == {"confirmationId", "prompt", "expiresAt"}


def test_critical_tool_spoken_yes_is_refused_and_stays_pending(project_registry: Registry) -> None:
    s = session(project_registry, roles=("caregiver",), said="Please record this in the care log")
    confirmation_id = confirmation_opened(s.decide("create_care_log", CARE_NOTE))
    s.user_says("yes")
    refusal = refused(
        s.decide("create_care_log", with_id(CARE_NOTE, confirmation_id)),
        ToolErrorType.CONFIRMATION_REQUIRED,
        "'create_care_log' is critical: a spoken yes is not enough",
        "approve it on their device",
    )
    assert refusal.reason == "critical_needs_client"
    assert refusal.opened is None  # nothing new opened: the client already has it
    assert refusal.extra["confirmationId"] == confirmation_id
    assert set(refusal.extra) == {"confirmationId", "prompt", "expiresAt"}
    found = s.book.lookup(confirmation_id, s.clock.now())
    assert found.result is LookupResult.PENDING
    # The client's own approval can still take it, once.
    assert s.book.take(confirmation_id, s.clock.now()).result is LookupResult.PENDING
    assert s.book.take(confirmation_id, s.clock.now()).result is LookupResult.NOT_FOUND


def test_critical_tool_needs_confirmation_even_for_an_admin(project_registry: Registry) -> None:
    s = session(project_registry, roles=("admin",), said="write down: ate well")
    confirmation_opened(s.decide("create_care_log", CARE_NOTE))


def test_spoken_yes_skips_the_intent_check(variant_registry: Registry) -> None:
    s = session(variant_registry, said="I took my amlodipine")
    refusal = refused(
        s.decide("log_medication_confirmed", DOSE),
        ToolErrorType.CONFIRMATION_REQUIRED,
        "call the tool again with the same arguments and this confirmation_id",
    )
    assert refusal.opened is not None
    assert refusal.opened.sensitivity == "high"
    s.user_says("yes")
    # Without the id, "yes" is no explicit intent ...
    refused(s.decide("log_medication_confirmed", DOSE), ToolErrorType.INTENT_NOT_EXPLICIT)
    # ... with it, it is the user's approval.
    decision = executed(
        s.decide("log_medication_confirmed", with_id(DOSE, refusal.opened.confirmation_id))
    )
    assert decision.confirmation == refusal.opened
    assert decision.args == DOSE


def test_high_tool_needing_confirmation_checks_intent_on_the_first_call(
    variant_registry: Registry,
) -> None:
    s = session(variant_registry, said="what is this pill for?")
    refused(s.decide("log_medication_confirmed", DOSE), ToolErrorType.INTENT_NOT_EXPLICIT)
    assert len(s.book) == 0
