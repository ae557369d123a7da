"""The inline dialect's marker filter: markers never reach the client, however they are split."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from transports.chat.inline import InlineCall, InlineMarkerFilter, MarkerProblem, result_marker

CALL = (
    '[TOOL_CALL:{"id": "c1", "tool": "kb_search", "parameters": {"q": "a ] b }"}, '
    '"confidence": 0.92}]'
)
TEXT = f"Let me look that up. {CALL} One moment."
EXPECTED_CALL = InlineCall("c1", "kb_search", {"q": "a ] b }"}, 0.92)


def run(chunks: list[str]) -> tuple[str, list[InlineCall | MarkerProblem]]:
    marker_filter = InlineMarkerFilter()
    shown: list[str] = []
    found: list[InlineCall | MarkerProblem] = []
    for chunk in chunks:
        text, calls = marker_filter.feed(chunk)
        assert "[TOOL_CALL" not in text
        shown.append(text)
        found.extend(calls)
    text, calls = marker_filter.finish()
    return "".join(shown) + text, found + calls


def test_a_marker_in_one_chunk_is_cut_out() -> None:
    assert run([TEXT]) == ("Let me look that up.  One moment.", [EXPECTED_CALL])


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 11])
def test_a_marker_split_into_tiny_chunks_is_never_shown(size: int) -> None:
    chunks = [TEXT[i : i + size] for i in range(0, len(TEXT), size)]
    assert run(chunks) == ("Let me look that up.  One moment.", [EXPECTED_CALL])


@given(st.lists(st.integers(min_value=1, max_value=len(TEXT) - 1), unique=True, max_size=12))
def test_any_split_gives_the_same_result(cuts: list[int]) -> None:
    bounds = [0, *sorted(cuts), len(TEXT)]
    chunks = [TEXT[a:b] for a, b in itertools.pairwise(bounds)]
    assert run(chunks) == ("Let me look that up.  One moment.", [EXPECTED_CALL])


def test_text_that_only_looks_like_a_marker_start_is_shown_in_the_end() -> None:
    assert run(["See [TOOL", "S list]"]) == ("See [TOOLS list]", [])
    assert run(["ends with [TOOL_"]) == ("ends with [TOOL_", [])


def test_two_markers_and_text_between() -> None:
    second = '[TOOL_CALL:{"tool": "get_current_time", "parameters": {}}]'
    shown, found = run([f"a {CALL} b {second} c"])
    assert shown == "a  b  c"
    assert found == [EXPECTED_CALL, InlineCall("", "get_current_time", {}, None)]


@pytest.mark.parametrize(
    ("marker", "problem"),
    [
        ('[TOOL_CALL:{"tool": "x", "parameters": {"a": 1,}}]', "invalid"),
        ('[TOOL_CALL:{"parameters": {}}]', 'no "tool"'),
        ('[TOOL_CALL:{"tool": "x", "parameters": [1]}]', "must be an object"),
        ('[TOOL_CALL:{"tool": "x", "confidence": "high"}]', "must be a number"),
    ],
)
def test_a_bad_marker_is_reported_and_not_shown(marker: str, problem: str) -> None:
    shown, found = run([f"x {marker} y"])
    assert shown == "x  y"
    (bad,) = found
    assert isinstance(bad, MarkerProblem)
    assert problem in bad.problem


def test_a_stream_that_ends_inside_a_marker_reports_it_and_shows_nothing_of_it() -> None:
    shown, found = run(['Sure. [TOOL_CALL:{"tool": "kb_se'])
    assert shown == "Sure. "
    (bad,) = found
    assert isinstance(bad, MarkerProblem)
    assert "ended inside" in bad.problem


def test_results_go_back_in_the_dialect() -> None:
    assert result_marker("c1", True, "3 articles") == "[TOOL_RESULT:c1:success] 3 articles"
    assert result_marker("c1", False, "no") == "[TOOL_RESULT:c1:error] no"
