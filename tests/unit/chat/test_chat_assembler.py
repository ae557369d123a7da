"""ToolCallAssembler on adversarial streams of tool_calls deltas (no sockets)."""

from __future__ import annotations

import json
from typing import Any

from openai.types.chat.chat_completion_chunk import ChoiceDeltaToolCall, ChoiceDeltaToolCallFunction

from transports.chat.assembler import AssembledCall, ToolCallAssembler


def piece(
    index: int | None = None,
    call_id: str | None = None,
    name: str | None = None,
    args: str | None = None,
) -> dict[str, Any]:
    delta: dict[str, Any] = {"type": "function"}
    if index is not None:
        delta["index"] = index
    if call_id is not None:
        delta["id"] = call_id
    if name is not None or args is not None:
        delta["function"] = {"name": name, "arguments": args}
    return delta


def counter() -> Any:
    made = iter(f"call_made_{n}" for n in range(1, 100))
    return lambda: next(made)


def test_a_call_streamed_in_tiny_argument_fragments() -> None:
    assembler = ToolCallAssembler()
    text = '{"city": "Paris", "unit": "celsius"}'
    assembler.feed([piece(0, "call_a", "get_weather", "")])
    for n in range(0, len(text), 2):
        assembler.feed([piece(0, args=text[n : n + 2])])
    (call,) = assembler.finish()
    assert call == AssembledCall(0, "call_a", "get_weather", text)
    assert json.loads(call.arguments) == {"city": "Paris", "unit": "celsius"}


def test_fragmented_ids_and_names_are_joined_and_repeats_are_not() -> None:
    assembler = ToolCallAssembler()
    assembler.feed([piece(0, "call_", "get_", "")])
    assembler.feed([piece(0, "x9", "weather", '{"city"')])
    assembler.feed([piece(0, "call_x9", "get_weather", ': "Oslo"}')])  # repeated whole
    (call,) = assembler.finish()
    assert (call.call_id, call.name, call.arguments) == (
        "call_x9",
        "get_weather",
        '{"city": "Oslo"}',
    )


def test_parallel_calls_interleaved_by_index_come_back_in_index_order() -> None:
    assembler = ToolCallAssembler()
    assembler.feed([piece(1, "call_b", "kb_search", '{"q"'), piece(0, "call_a", "get_time", "{")])
    assembler.feed([piece(0, args="}"), piece(1, args=': "x"}')])
    calls = assembler.finish()
    assert [(c.index, c.call_id, c.name, c.arguments) for c in calls] == [
        (0, "call_a", "get_time", "{}"),
        (1, "call_b", "kb_search", '{"q": "x"}'),
    ]


def test_empty_deltas_and_missing_pieces_are_harmless() -> None:
    assembler = ToolCallAssembler()
    assembler.feed(None)
    assembler.feed([])
    assembler.feed([piece(0)])  # an index alone
    assert not assembler.finish()
    assembler.feed([piece(0, "call_a", "echo", "")])
    assembler.feed([piece(0, args="")])
    assembler.feed([{"index": 0, "function": None}])
    assembler.feed([piece(0, args="{}")])
    assert assembler.finish() == [AssembledCall(0, "call_a", "echo", "{}")]


def test_a_missing_index_continues_the_last_call() -> None:
    assembler = ToolCallAssembler()
    assembler.feed([piece(0, "call_a", "echo", '{"a"')])
    assembler.feed([piece(None, args=": 1}")])
    assert assembler.finish()[0].arguments == '{"a": 1}'


def test_a_call_without_an_id_gets_one_made_once() -> None:
    assembler = ToolCallAssembler(new_id=counter())
    assembler.feed([piece(0, None, "echo", "{}"), piece(1, None, "echo", "{}")])
    calls = assembler.finish()
    assert [c.call_id for c in calls] == ["call_made_1", "call_made_2"]
    assert ToolCallAssembler().finish() == []


def test_made_ids_are_unique_by_default() -> None:
    assembler = ToolCallAssembler()
    assembler.feed([piece(0, None, "echo", "{}"), piece(1, None, "echo", "{}")])
    first, second = assembler.finish()
    assert first.call_id != second.call_id
    assert first.call_id.startswith("call_")


def test_a_stream_that_ends_mid_call_is_marked_truncated() -> None:
    assembler = ToolCallAssembler()
    assembler.feed([piece(0, "call_a", "get_weather", '{"city": "Par')])
    (call,) = assembler.finish(complete=False)
    assert call.truncated
    assert call.arguments == '{"city": "Par'


def test_invalid_json_is_passed_on_as_text_for_the_runner_to_refuse() -> None:
    assembler = ToolCallAssembler()
    assembler.feed([piece(0, "call_a", "echo", '{"x": ')])
    (call,) = assembler.finish()
    assert call.arguments == '{"x": '
    assert not call.truncated


def test_state_is_reset_per_completion() -> None:
    assembler = ToolCallAssembler()
    assembler.feed([piece(0, "call_a", "echo", '{"a": 1}')])
    assembler.finish()
    assembler.feed([piece(0, "call_b", "echo", '{"b": 2}')])
    assert assembler.finish() == [AssembledCall(0, "call_b", "echo", '{"b": 2}')]


def test_sdk_delta_objects_are_accepted() -> None:
    assembler = ToolCallAssembler()
    assembler.feed(
        [
            ChoiceDeltaToolCall(
                index=0,
                id="call_sdk",
                type="function",
                function=ChoiceDeltaToolCallFunction(name="echo", arguments='{"v"'),
            )
        ]
    )
    assembler.feed(
        [ChoiceDeltaToolCall(index=0, function=ChoiceDeltaToolCallFunction(arguments=": 1}"))]
    )
    assert assembler.finish() == [AssembledCall(0, "call_sdk", "echo", '{"v": 1}')]
