"""The operator's price table (gateway.usage.prices): parsing refuses what it cannot price,
and the estimate prices each kind of token, cached input at its own price."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gateway.errors import ConfigError
from gateway.usage import PriceTable, TokenCounts

TABLE = {
    "currency": "EUR",
    "models": {
        "openai/gpt-realtime": {
            "input_text": 4.0,
            "input_audio": 32.0,
            "input_cached": 0.4,
            "output_text": 16.0,
            "output_audio": 64.0,
        },
        "gemini/*": {"input_text": 1.0, "output_text": 2.0},
    },
}


def test_estimate_prices_every_kind_with_cached_input_apart() -> None:
    prices = PriceTable.parse(TABLE)
    tokens = TokenCounts(
        input_text=1_000, input_audio=2_000, input_cached=500, output_text=100, output_audio=3_000
    )
    expected = (500 * 4.0 + 2_000 * 32.0 + 500 * 0.4 + 100 * 16.0 + 3_000 * 64.0) / 1e6
    assert prices.estimate("openai", "gpt-realtime", tokens) == pytest.approx(expected)
    assert prices.currency == "EUR"


def test_a_provider_wide_row_and_reasoning_at_the_output_text_price() -> None:
    prices = PriceTable.parse(TABLE)
    tokens = TokenCounts(input_text=1_000_000, output_reasoning=1_000_000, input_cached=10)
    # No input_cached price: cached tokens are priced as their modality.
    assert prices.estimate("gemini", "any-model", tokens) == pytest.approx(1.0 + 2.0)


def test_no_row_no_estimate() -> None:
    assert PriceTable.parse(TABLE).estimate("chat", "gpt-4o-mini", TokenCounts(1, 1)) is None


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([], "expected an object with a 'models' object"),
        ({"models": {"no-slash": {}}}, "models.no-slash: expected 'provider/model'"),
        ({"models": {"openai/x": {"input_txt": 1}}}, "unknown fields ['input_txt']"),
        ({"models": {"openai/x": {"input_text": -1}}}, "models.openai/x.input_text"),
        ({"models": {"openai/x": {"input_text": True}}}, "models.openai/x.input_text"),
        ({"currency": "", "models": {}}, "'currency' must be a non-empty string"),
    ],
)
def test_a_malformed_table_is_refused_with_what_is_wrong(raw: Any, message: str) -> None:
    with pytest.raises(ConfigError, match="price table") as caught:
        PriceTable.parse(raw)
    assert message in str(caught.value)


def test_load_names_the_file_it_cannot_read(tmp_path: Path) -> None:
    path = tmp_path / "prices.json"
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="GATEWAY_PRICE_TABLE: cannot read"):
        PriceTable.load(path)
