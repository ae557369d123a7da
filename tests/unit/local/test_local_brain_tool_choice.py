"""``tool_choice`` as the local model follows it (``brain.ToolOffer``), for the local transport
and every fake built on the brain. Pure."""

from __future__ import annotations

from transports.base import ForcedTool
from transports.local.brain import CallTools, LocalBrain, Say, ToolCall, ToolOffer

TOOLS = ("get_weather", "lookup_order")


def test_without_an_offer_or_with_auto_the_rules_stand_alone() -> None:
    for offer in (None, ToolOffer(TOOLS)):
        brain = LocalBrain()
        assert brain.reply_to_text('/tool get_weather {"city": "Paris"}', offer) == CallTools(
            (ToolCall("call_1", "get_weather", '{"city": "Paris"}'),)
        )
        assert brain.reply_to_text("hello", offer) == Say("You said: hello")


def test_none_answers_in_words_and_the_call_never_was() -> None:
    brain = LocalBrain()
    offer = ToolOffer(TOOLS, "none")
    assert brain.reply_to_text("/tool get_weather {}", offer) == Say(
        "You said: /tool get_weather {}"
    )
    assert brain.open_call_ids == ()  # nothing waits for a result
    assert brain.reply_to_utterance(640, offer) == Say("You said: audio:640ms")


def test_none_keeps_a_batch_that_still_waits_for_its_results() -> None:
    brain = LocalBrain()
    waiting = brain.reply_to_text("/tool lookup_order {}")
    assert isinstance(waiting, CallTools)
    brain.reply_to_text("/tool get_weather {}", ToolOffer(TOOLS, "none"))
    assert brain.open_call_ids == ("call_1",)


def test_required_calls_the_first_tool_offered_when_the_input_calls_none() -> None:
    brain = LocalBrain()
    offer = ToolOffer(TOOLS, "required")
    assert brain.reply_to_text("hello", offer) == CallTools(
        (ToolCall("call_1", "get_weather", "{}"),)
    )
    asked = brain.reply_to_text('/tool lookup_order {"order": "A1"}', offer)
    assert asked == CallTools((ToolCall("call_2", "lookup_order", '{"order": "A1"}'),))
    assert brain.reply_to_nothing(offer) == CallTools((ToolCall("call_3", "get_weather", "{}"),))
    assert LocalBrain().reply_to_text("hello", ToolOffer((), "required")) == Say("You said: hello")


def test_a_forced_tool_is_the_one_call_with_the_arguments_the_input_gave_it() -> None:
    brain = LocalBrain()
    offer = ToolOffer(TOOLS, ForcedTool("lookup_order"))
    assert brain.reply_to_utterance(500, offer) == CallTools(
        (ToolCall("call_1", "lookup_order", "{}"),)
    )
    both = brain.reply_to_text('/tools get_weather {} ;; lookup_order {"order": "B2"}', offer)
    assert both == CallTools((ToolCall("call_4", "lookup_order", '{"order": "B2"}'),))
    assert brain.open_call_ids == ("call_4",)


def test_results_are_answered_as_the_offer_says() -> None:
    brain = LocalBrain()
    brain.reply_to_text("/tool get_weather {}")
    results = [("call_1", "get_weather", {"ok": True})]
    again = brain.reply_to_tool_results(results, ToolOffer(TOOLS, "required"))
    assert again == CallTools((ToolCall("call_2", "get_weather", "{}"),))  # as an API forces it
    brain = LocalBrain()
    brain.reply_to_text("/tool get_weather {}")
    answer = brain.reply_to_tool_results(results, ToolOffer(TOOLS, "auto"))
    assert answer == Say('Tool results: get_weather={"ok":true}')


def test_only_the_tools_offered_can_be_called_when_the_offer_says_so() -> None:
    brain = LocalBrain()
    offer = ToolOffer(("lookup_order",), only_offered=True)
    assert brain.reply_to_text("/tool get_weather {}", offer) == Say(
        "You said: /tool get_weather {}"
    )
    mixed = brain.reply_to_text("/tools get_weather {} ;; lookup_order {}", offer)
    # Ids of calls never made are not given again: numbers only grow.
    assert mixed == CallTools((ToolCall("call_4", "lookup_order", "{}"),))
    assert LocalBrain().reply_to_text("/tool x {}", ToolOffer((), only_offered=True)) == Say(
        "You said: /tool x {}"
    )
