"""The soak's settings, and the timeline they make: a ramp, a calm phase without faults (the
latency baseline), the fault phase, then the wind-down."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from soak.processes import REPO

__all__ = ["DOCS_PLOTS", "SoakConfig"]

# The documentation's pictures: written only when asked (``--docs-plots``), never by default,
# so that a run does not change tracked files.
DOCS_PLOTS = REPO / "docs" / "soak"


@dataclass(frozen=True)
class SoakConfig:
    minutes: float = 10.0
    sessions: int = 150
    fault_rate: float = 12.0  # session and upstream faults per minute, in the fault phase
    calm_fraction: float = 0.3  # the first part of the run has no faults
    restart_every_s: float = 180.0  # a rolling restart of one node this often (0: none)
    redis_restart: bool = True
    seed: int = 1
    out: Path = REPO / "build" / "soak"
    plots: Path | None = REPO / "build" / "soak"  # None: no plots
    sample_every_s: float = 5.0

    def __post_init__(self) -> None:
        if self.minutes <= 0 or self.sessions < 1:
            raise ValueError("--minutes must be > 0 and --sessions >= 1")
        if not 0 < self.calm_fraction < 1:
            raise ValueError("--calm-fraction must be between 0 and 1")
        if self.fault_rate < 0 or self.restart_every_s < 0:
            raise ValueError("rates must be >= 0")

    @property
    def duration_s(self) -> float:
        return self.minutes * 60

    @property
    def calm_end_s(self) -> float:
        return self.duration_s * self.calm_fraction

    @property
    def ramp_s(self) -> float:
        return min(20.0, 0.15 * self.duration_s)

    @property
    def calm_from_s(self) -> float:
        """Where the latency baseline starts: the sessions have all started, some turns done."""
        return min(self.ramp_s * 1.5, self.calm_end_s / 2)

    @property
    def growth_from_s(self) -> float:
        """Where the memory window starts: minute 2, or sooner in a short run."""
        return min(120.0, 0.4 * self.duration_s)

    @property
    def growth_min_span_s(self) -> float:
        return min(120.0, 0.25 * self.duration_s)
