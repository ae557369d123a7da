"""Shared by the tests of the alias file (``gateway.routing.aliases``): the build's providers as
the app passes them, documents of one alias, and the message a refused document gets."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.routing.aliases import (
    CatalogError,
    parse_catalog,
)

# The build's providers as the app passes them (a tuple, in registration order).
PROVIDER_NAMES = ("openai", "gemini", "chat", "local")
LISTED = "chat, gemini, local, openai"
NAME_RULE = "a model name is 1-128 letters, digits and . _ : / - (starting with a letter or digit)"


def one_alias(entry: object, name: str = "x") -> dict[str, Any]:
    return {"models": {name: entry}}


def with_targets(*targets: object) -> dict[str, Any]:
    return one_alias({"targets": list(targets)})


def refusal(document: object, providers: tuple[str, ...] = PROVIDER_NAMES) -> str:
    with pytest.raises(CatalogError) as caught:
        parse_catalog(document, providers)
    return str(caught.value)
