"""What an upstream says a response consumed, in one shape whatever the provider. Pure.

Each provider reports usage its own way, and the transports pass it on as they got it
(``transports.events.ResponseDone.usage``):

- OpenAI Realtime, ``response.done.response.usage``: ``input_tokens``, ``output_tokens``,
  ``input_token_details {text_tokens, audio_tokens, image_tokens, cached_tokens}``,
  ``output_token_details {text_tokens, audio_tokens}``;
- Gemini Live, ``usageMetadata`` (riding on ``turnComplete``): ``promptTokenCount``,
  ``responseTokenCount`` (Live's name; ``candidatesTokenCount`` elsewhere in the Gemini API),
  ``cachedContentTokenCount``, ``toolUsePromptTokenCount``, ``thoughtsTokenCount``, and per
  modality ``promptTokensDetails`` / ``responseTokensDetails`` (``[{modality, tokenCount}]``);
- chat completions, the last chunk's ``usage``: ``prompt_tokens``, ``completion_tokens``
  (text), summed over the rounds of one reply by the transport.

``token_counts`` reads any of them into ``TokenCounts``. What a provider does not split by
modality is counted as text, except Gemini's, which is split by its details when given. A
field that is missing, negative or not an integer counts 0: usage never fails a response.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

__all__ = ["TokenCounts", "token_counts"]


@dataclass(frozen=True, slots=True)
class TokenCounts:
    input_text: int = 0
    input_audio: int = 0
    # Of the input, how many were served from the provider's cache (billed lower).
    input_cached: int = 0
    output_text: int = 0
    output_audio: int = 0
    # Gemini's thinking tokens, billed as output but never heard.
    output_reasoning: int = 0

    @property
    def input_total(self) -> int:
        return self.input_text + self.input_audio

    @property
    def output_total(self) -> int:
        return self.output_text + self.output_audio + self.output_reasoning

    # Spelled out, not through ``dataclasses.fields``: every response of a tool-call round adds
    # once, on the way to starting its calls (tests/unit/usage check every field is covered).
    def __add__(self, other: TokenCounts) -> TokenCounts:
        return TokenCounts(
            self.input_text + other.input_text,
            self.input_audio + other.input_audio,
            self.input_cached + other.input_cached,
            self.output_text + other.output_text,
            self.output_audio + other.output_audio,
            self.output_reasoning + other.output_reasoning,
        )

    def as_json(self) -> dict[str, int]:
        return {
            "input_text": self.input_text,
            "input_audio": self.input_audio,
            "input_cached": self.input_cached,
            "output_text": self.output_text,
            "output_audio": self.output_audio,
            "output_reasoning": self.output_reasoning,
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> TokenCounts:
        return cls(**{f.name: _count(raw, f.name) for f in fields(TokenCounts)})


def token_counts(raw: Mapping[str, Any] | None) -> TokenCounts:
    """The usage of one response, whichever provider reported it (``None``: nothing)."""
    if not raw:
        return TokenCounts()
    if "promptTokenCount" in raw or "responseTokenCount" in raw or "totalTokenCount" in raw:
        return _gemini(raw)
    if "prompt_tokens" in raw or "completion_tokens" in raw:
        return _chat(raw)
    return _openai_realtime(raw)


def _count(raw: Mapping[str, Any] | None, key: str) -> int:
    value = None if raw is None else raw.get(key)
    return value if type(value) is int and value > 0 else 0


def _details(raw: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = raw.get(key)
    return value if isinstance(value, Mapping) else {}


def _openai_realtime(raw: Mapping[str, Any]) -> TokenCounts:
    given_in = _details(raw, "input_token_details")
    given_out = _details(raw, "output_token_details")
    input_audio, output_audio = _count(given_in, "audio_tokens"), _count(given_out, "audio_tokens")
    # Text is what the details say, or else what the total leaves over after audio.
    input_text = _count(given_in, "text_tokens") if given_in else 0
    if not given_in:
        input_text = max(0, _count(raw, "input_tokens") - input_audio)
    output_text = _count(given_out, "text_tokens") if given_out else 0
    if not given_out:
        output_text = max(0, _count(raw, "output_tokens") - output_audio)
    return TokenCounts(
        input_text=input_text,
        input_audio=input_audio,
        input_cached=_count(given_in, "cached_tokens"),
        output_text=output_text,
        output_audio=output_audio,
    )


def _by_modality(raw: Mapping[str, Any], key: str) -> tuple[int, int] | None:
    """(text, audio) from a Gemini ``…TokensDetails`` list, or None when absent."""
    details = raw.get(key)
    if not isinstance(details, list) or not details:
        return None
    text = audio = 0
    for entry in details:
        if not isinstance(entry, Mapping):
            continue
        tokens = _count(entry, "tokenCount")
        if entry.get("modality") == "AUDIO":
            audio += tokens
        else:  # TEXT, and IMAGE or VIDEO, which this gateway never sends, priced as text here
            text += tokens
    return text, audio


def _gemini(raw: Mapping[str, Any]) -> TokenCounts:
    prompt = _count(raw, "promptTokenCount")
    response = _count(raw, "responseTokenCount") or _count(raw, "candidatesTokenCount")
    prompt_split = _by_modality(raw, "promptTokensDetails")
    response_split = _by_modality(raw, "responseTokensDetails") or _by_modality(
        raw, "candidatesTokensDetails"
    )
    input_text, input_audio = prompt_split if prompt_split is not None else (prompt, 0)
    input_text += _count(raw, "toolUsePromptTokenCount")  # billed beside the prompt, as text
    output_text, output_audio = response_split if response_split is not None else (response, 0)
    return TokenCounts(
        input_text=input_text,
        input_audio=input_audio,
        input_cached=_count(raw, "cachedContentTokenCount"),
        output_text=output_text,
        output_audio=output_audio,
        output_reasoning=_count(raw, "thoughtsTokenCount"),
    )


def _chat(raw: Mapping[str, Any]) -> TokenCounts:
    cached = _count(_details(raw, "prompt_tokens_details"), "cached_tokens")
    return TokenCounts(
        input_text=_count(raw, "prompt_tokens"),
        input_cached=cached,
        output_text=_count(raw, "completion_tokens"),
    )
