"""The extendable designs of a sequential unit side by side, exactly, on one grid.

docs/gate.md ("Choosing the extendable design") shows the table made here; tests recompute
cells of it. One accuracy unit, a pool of n_max paired examples, max_drop 2 points, alpha 0.05:

- `obf-early`: the gate's group-sequential design (regress.stats.spending: looks at 20/50/100%
  of the pool, a tenth of alpha at the first, O'Brien-Fleming's shape after), each look's
  exact margin tests at their nominal level (regress.stats.operating.stopping_law).
- `obf`: the design before it, O'Brien-Fleming spending at 25/50/100%, for comparison.
- `e-process`: the mixture betting e-process (regress.stats.eprocess) looked at every 5% of
  the pool; valid at any looks, so finer looks cost nothing but time.

Per cell (n_max, true drop, discordance): P(REGRESSION), P(PASS), E[n] and the quartiles of
the examples used, from the paired counts' exact law carried look to look (no normal
approximation, no simulation). At the margin (drop = max_drop) both rates are the sizes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from regress.stats.eprocess import eprocess_law
from regress.stats.operating import MAX_DROP, StoppingLaw, stopping_law
from regress.stats.spending import SequentialDesign

POOLS = (500, 1000, 2000, 3000)
DESIGN_DISCORDANCES = (0.01, 0.02, 0.05, 0.15, 0.5)
DESIGN_DROPS = (0.0, MAX_DROP, 0.05)
"""Unchanged, at the margin (the sizes), and beyond it (2.5 times max_drop)."""
EPROCESS_LOOKS = tuple(k / 20 for k in range(1, 21))
SPENDING_DESIGN = SequentialDesign()
OBF_DESIGN = SequentialDesign(looks=(0.25, 0.5, 1.0), spending="obf")
"""The gate's design until issue 50's early look: its first look's nominal level (0.0001)
lies below the exact tests' least p-value (0.001), so it never decides."""

DESIGNS: dict[str, Callable[[int, float, float], StoppingLaw]] = {
    "obf-early": lambda n, drop, flips: stopping_law(n, drop, flips, SPENDING_DESIGN),
    "obf": lambda n, drop, flips: stopping_law(n, drop, flips, OBF_DESIGN),
    "e-process": lambda n, drop, flips: eprocess_law(n, drop, flips, EPROCESS_LOOKS),
}


@dataclass(frozen=True)
class DesignPoint:
    """One design's exact operating characteristics in one cell."""

    design: str
    n_max: int
    drop: float
    discordance: float
    regression: float
    passed: float
    expected_n: float
    quartiles: tuple[int, int, int]
    """Examples used by a quarter, half and three quarters of the runs."""


def used_quantile(law: StoppingLaw, q: float) -> int:
    """The fewest examples by which at least `q` of the runs have stopped (a run that never
    decides stops at the end of the pool)."""
    done = 0.0
    for size, stopped in zip(law.sizes[:-1], law.stopped[:-1], strict=True):
        done += stopped
        if done >= q:
            return size
    return law.sizes[-1]


def design_point(design: str, n_max: int, drop: float, discordance: float) -> DesignPoint:
    """`design`'s exact rates and examples used in one cell of the grid."""
    law = DESIGNS[design](n_max, drop, discordance)
    quartiles = tuple(used_quantile(law, q) for q in (0.25, 0.5, 0.75))
    return DesignPoint(
        design,
        n_max,
        drop,
        discordance,
        law.regression,
        law.passed,
        law.expected_n,
        (quartiles[0], quartiles[1], quartiles[2]),
    )


def design_cells() -> list[tuple[int, float, float]]:
    """The grid's (n_max, drop, discordance) cells: a drop flips at least its own share."""
    return [
        (n, drop, flips)
        for n in POOLS
        for flips in DESIGN_DISCORDANCES
        for drop in DESIGN_DROPS
        if drop <= flips
    ]


def largest_size(points: list[DesignPoint]) -> float:
    """The largest P(REGRESSION) or P(PASS) at the margin over `points`: at most ALPHA when
    the design holds its level."""
    return max(max(p.regression, p.passed) for p in points if abs(p.drop - MAX_DROP) < 1e-12)
