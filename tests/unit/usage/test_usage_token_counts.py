"""Each provider's usage report read into one shape (gateway.usage.tokens), from the payloads
the providers document (OpenAI Realtime's response.done, Gemini Live's usageMetadata, chat
completions' last chunk; docs/operations.md section 3)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from gateway.usage import TokenCounts, token_counts

OPENAI_DONE_USAGE = {
    "total_tokens": 345,
    "input_tokens": 120,
    "output_tokens": 225,
    "input_token_details": {
        "text_tokens": 80,
        "audio_tokens": 40,
        "image_tokens": 0,
        "cached_tokens": 64,
        "cached_tokens_details": {"text_tokens": 64, "audio_tokens": 0},
    },
    "output_token_details": {"text_tokens": 25, "audio_tokens": 200},
}

GEMINI_USAGE_METADATA = {
    "promptTokenCount": 150,
    "responseTokenCount": 90,
    "totalTokenCount": 262,
    "cachedContentTokenCount": 30,
    "toolUsePromptTokenCount": 12,
    "thoughtsTokenCount": 10,
    "promptTokensDetails": [
        {"modality": "TEXT", "tokenCount": 50},
        {"modality": "AUDIO", "tokenCount": 100},
    ],
    "responseTokensDetails": [{"modality": "AUDIO", "tokenCount": 90}],
}


def test_openai_realtime_response_done_usage() -> None:
    assert token_counts(OPENAI_DONE_USAGE) == TokenCounts(
        input_text=80, input_audio=40, input_cached=64, output_text=25, output_audio=200
    )


def test_openai_without_details_counts_the_totals_as_text() -> None:
    assert token_counts({"input_tokens": 7, "output_tokens": 9, "total_tokens": 16}) == (
        TokenCounts(input_text=7, output_text=9)
    )


def test_gemini_usage_metadata_split_by_modality() -> None:
    assert token_counts(GEMINI_USAGE_METADATA) == TokenCounts(
        input_text=50 + 12,  # the tool-use prompt is billed beside the prompt
        input_audio=100,
        input_cached=30,
        output_text=0,
        output_audio=90,
        output_reasoning=10,
    )


def test_gemini_without_details_and_with_the_generate_content_name() -> None:
    raw = {"promptTokenCount": 11, "candidatesTokenCount": 4, "totalTokenCount": 15}
    assert token_counts(raw) == TokenCounts(input_text=11, output_text=4)


def test_chat_completions_usage() -> None:
    raw = {
        "prompt_tokens": 31,
        "completion_tokens": 9,
        "total_tokens": 40,
        "prompt_tokens_details": {"cached_tokens": 16},
    }
    assert token_counts(raw) == TokenCounts(input_text=31, input_cached=16, output_text=9)


@pytest.mark.parametrize(
    "raw",
    [
        None,
        {},
        {"input_tokens": "12", "output_tokens": -3},
        {"input_token_details": "nope", "output_token_details": [1]},
        {"promptTokenCount": True, "responseTokensDetails": ["x", {"modality": "AUDIO"}]},
        {"prompt_tokens": 1.5, "completion_tokens": None},
    ],
)
def test_malformed_reports_count_zero_and_never_raise(raw: Any) -> None:
    counts = token_counts(raw)
    assert counts.input_total == 0
    assert counts.output_total == 0


def test_counts_add_field_by_field_and_survive_json() -> None:
    a = TokenCounts(input_text=1, input_audio=2, input_cached=3, output_text=4, output_audio=5)
    b = TokenCounts(output_reasoning=6, input_text=10)
    total = a + b
    assert total == TokenCounts(11, 2, 3, 4, 5, 6)
    assert TokenCounts.from_json(total.as_json()) == total
    assert total.input_total == 13
    assert total.output_total == 15


def test_sums_and_json_cover_every_field() -> None:
    # Both are spelled out field by field: a field added later must be added there too.
    names = [f.name for f in dataclasses.fields(TokenCounts)]
    a = TokenCounts(*range(1, len(names) + 1))
    b = TokenCounts(*(10 * i for i in range(1, len(names) + 1)))
    assert [getattr(a + b, name) for name in names] == [11 * i for i in range(1, len(names) + 1)]
    assert a.as_json() == {name: getattr(a, name) for name in names}
    assert TokenCounts.from_json(a.as_json()) == a
