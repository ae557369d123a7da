"""``scripts/soak`` writes its plots beside its report (``build/soak/`` or ``--out``), never into
the tracked ``docs/soak/`` unless asked (``--docs-plots``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from soak.__main__ import parse
from soak.config import DOCS_PLOTS
from soak.processes import REPO


def test_by_default_the_plots_go_beside_the_report_in_build() -> None:
    config = parse([])
    assert config.plots == config.out == REPO / "build" / "soak"
    assert parse(["--out", "/tmp/soak-x"]).plots == Path("/tmp/soak-x")


def test_the_documentations_pictures_are_refreshed_only_when_asked() -> None:
    assert parse(["--docs-plots"]).plots == DOCS_PLOTS == REPO / "docs" / "soak"
    assert parse(["--plots", "none"]).plots is None
    assert parse(["--plots", "/tmp/p"]).plots == Path("/tmp/p")
    with pytest.raises(SystemExit):
        parse(["--plots", "/tmp/p", "--docs-plots"])
