"""An estimated cost from usage, with prices the operator provides (none are built in).

``GATEWAY_PRICE_TABLE`` names a JSON file::

    {
      "currency": "USD",
      "models": {
        "openai/gpt-realtime": {"input_text": 4.0, "input_audio": 32.0, "input_cached": 0.4,
                                "output_text": 16.0, "output_audio": 64.0},
        "gemini/*": {"input_text": 0.5, "input_audio": 3.0, "output_text": 2.0,
                     "output_audio": 12.0, "output_reasoning": 2.0}
      }
    }

Prices are per million tokens, keyed ``provider/model`` (``provider/*`` for every model of a
provider). Cached input tokens are priced at ``input_cached`` instead of their modality's
price when given, else at that price. A session whose model has no row has no estimate. The file
is read once at start; a malformed one stops the start with a message naming what is wrong.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from gateway.errors import ConfigError
from gateway.usage.tokens import TokenCounts

__all__ = ["PRICED_FIELDS", "PriceTable"]

PRICED_FIELDS = (
    "input_text",
    "input_audio",
    "input_cached",
    "output_text",
    "output_audio",
    "output_reasoning",
)
_PER_TOKENS = 1_000_000


@dataclass(frozen=True, slots=True)
class PriceTable:
    currency: str
    rows: Mapping[str, Mapping[str, float]]

    @classmethod
    def load(cls, path: Path) -> PriceTable:
        try:
            raw = orjson.loads(path.read_bytes())
        except (OSError, orjson.JSONDecodeError) as exc:
            raise ConfigError(f"GATEWAY_PRICE_TABLE: cannot read {path}: {exc}") from None
        return cls.parse(raw, str(path))

    @classmethod
    def parse(cls, raw: Any, where: str = "price table") -> PriceTable:
        if not isinstance(raw, dict) or not isinstance(raw.get("models"), dict):
            raise ConfigError(f"{where}: expected an object with a 'models' object")
        currency = raw.get("currency", "USD")
        if not isinstance(currency, str) or not currency:
            raise ConfigError(f"{where}: 'currency' must be a non-empty string")
        rows: dict[str, dict[str, float]] = {}
        for key, row in raw["models"].items():
            if "/" not in key or not isinstance(row, dict):
                raise ConfigError(f"{where}: models.{key}: expected 'provider/model': {{prices}}")
            unknown = sorted(set(row) - set(PRICED_FIELDS))
            if unknown:
                raise ConfigError(
                    f"{where}: models.{key}: unknown fields {unknown}; known: {list(PRICED_FIELDS)}"
                )
            for name, price in row.items():
                if isinstance(price, bool) or not isinstance(price, int | float) or price < 0:
                    raise ConfigError(f"{where}: models.{key}.{name}: a price is a number ≥ 0")
            rows[key] = {name: float(price) for name, price in row.items()}
        return cls(currency=currency, rows=rows)

    def row_for(self, provider: str, model: str) -> Mapping[str, float] | None:
        exact = self.rows.get(f"{provider}/{model}")
        return exact if exact is not None else self.rows.get(f"{provider}/*")

    def estimate(self, provider: str, model: str, tokens: TokenCounts) -> float | None:
        """The cost of ``tokens`` on this model, in ``currency``; None without a price row."""
        row = self.row_for(provider, model)
        if row is None:
            return None
        cached = min(tokens.input_cached, tokens.input_total)
        cached_price = row.get("input_cached")
        # Cached tokens come out of the text input first, then the audio input.
        cached_text = min(cached, tokens.input_text)
        cached_audio = cached - cached_text
        cost = (
            (tokens.input_text - (cached_text if cached_price is not None else 0))
            * row.get("input_text", 0.0)
            + (tokens.input_audio - (cached_audio if cached_price is not None else 0))
            * row.get("input_audio", 0.0)
            + (cached if cached_price is not None else 0) * (cached_price or 0.0)
            + tokens.output_text * row.get("output_text", 0.0)
            + tokens.output_audio * row.get("output_audio", 0.0)
            + tokens.output_reasoning * row.get("output_reasoning", row.get("output_text", 0.0))
        )
        return round(cost / _PER_TOKENS, 6)
