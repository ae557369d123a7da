"""The alias file shown in docs/routing.md is one the gateway accepts, as shown."""

from __future__ import annotations

import re
from pathlib import Path

from gateway.providers import PROVIDERS
from gateway.routing import load_catalog, spread_order

DOC = Path(__file__).resolve().parents[3] / "docs" / "routing.md"


def test_the_example_in_the_docs_loads_as_described(tmp_path: Path) -> None:
    block = re.search(r"```toml\n(.*?)```", DOC.read_text(), re.DOTALL)
    assert block is not None
    path = tmp_path / "models.toml"
    path.write_text(block.group(1))
    catalog = load_catalog(path, PROVIDERS.names())
    assert catalog.default == "assistant"
    assert catalog.names() == ("assistant", "gpt-realtime", "spread", "staff")
    assistant = catalog.get("assistant")
    assert assistant is not None
    assert [t.provider for t in assistant.targets] == ["openai", "gemini", "chat"]
    staff = catalog.get("staff")
    assert staff is not None
    assert not staff.allowed_for(["caller"])
    assert staff.allowed_for(["staff"])
    spread = catalog.get("spread")
    assert spread is not None
    assert spread.targets[1].pool == 0
    firsts = [spread_order(spread.targets, f"sess_{n}")[0].model for n in range(4000)]
    share = firsts.count("gpt-realtime") / len(firsts)
    assert 0.72 <= share <= 0.78  # weights 3 : 1
    assert spread_order(spread.targets, "sess_1")[-1].provider == "gemini"  # only a fallback
