"""Spending designs that spend more at the first look, measured exactly (issue 50;
docs/gate.md#choosing-the-extendable-design).

    .venv/bin/python experiments/sequential_early_look.py
    .venv/bin/python experiments/sequential_early_look.py --q8

The O'Brien-Fleming design's first look has a nominal level of 0.0001, below the 0.001 every
exact margin p-value carries, so a candidate flipping 1% of its answers waits for the second
look. Each candidate here is a Lan-DeMets spending function at given looks; its boundaries come
from the canonical joint law (regress.stats.step_boundaries), and each look's exact margin
tests run at their nominal level through the paired counts' exact law
(regress.stats.stopping_law): one accuracy unit, max_drop 2 points, alpha 0.05.

Per candidate: the nominal levels; the median examples an unchanged candidate flipping 1% or 2%
uses at pools of 1,000-3,000; P(PASS) of an unchanged candidate flipping 15% at a pool of 2,000
(the fixed exact test of the pool: 0.741); P(REGRESSION) of a 5-point drop flipping 15% there;
and the largest P(REGRESSION) or P(PASS) at the margin over pool 2,000 x 2/15/50% flips (the
whole grid's sizes, for the chosen design: experiments/extendable_design.py). With `--q8`,
instead: the chance that an unchanged candidate flipping 1.2% (as SmolLM2's Q8_0 flipped
ARC-Easy answers) is decided at the first look of a 2,000 pool, and its median examples. Exact
arithmetic: the figures are the same on every machine. docs/results/extendable-design.md
holds the output.
"""

from __future__ import annotations

import itertools
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass

from scipy.stats import norm

from regress.stats import (
    MAX_DROP,
    obf_spent,
    spent,
    step_boundaries,
    stopping_law,
    used_quantile,
)

ALPHA = 0.05
Spending = Callable[[float], float]


def hsd(gamma: float) -> Spending:
    """Hwang-Shih-DeCani: alpha (1 - e^(-gamma t)) / (1 - e^(-gamma)); negative gamma spends
    late, gamma -4 is close to O'Brien-Fleming."""
    return lambda t: ALPHA * (1 - math.exp(-gamma * t)) / (1 - math.exp(-gamma))


def power(rho: float) -> Spending:
    """Kim-DeMets power family: alpha t^rho."""
    return lambda t: ALPHA * t**rho


def early(share: float) -> Spending:
    """`share` of alpha at the first look, O'Brien-Fleming's shape after (share 0.1 is the
    gate's "obf-early")."""
    return lambda t: share * ALPHA + (1 - share) * obf_spent(ALPHA, t)


@dataclass(frozen=True)
class Candidate:
    """A design at alpha 0.05: its looks and each look's nominal level."""

    name: str
    looks: tuple[float, ...]
    levels: tuple[float, ...]

    def nominal_level(self, alpha: float, look: int) -> float:
        """What stopping_law asks of a design; only alpha 0.05 was computed."""
        assert math.isclose(alpha, ALPHA)
        return self.levels[look]


def candidate(name: str, looks: tuple[float, ...], spending: Spending) -> Candidate:
    """The design spending `spending` over `looks`."""
    cumulative = [0.0, *(spending(t) for t in looks)]
    steps = tuple(after - before for before, after in itertools.pairwise(cumulative))
    c = step_boundaries(steps, looks)
    return Candidate(name, looks, tuple(float(norm.sf(x)) for x in c))


TWENTY = (0.2, 0.5, 1.0)
QUARTER = (0.25, 0.5, 1.0)
CANDIDATES = (
    candidate("obf 25/50/100 (before)", QUARTER, lambda t: obf_spent(ALPHA, t)),
    candidate("obf-early 20/50/100 (chosen)", TWENTY, lambda t: spent("obf-early", ALPHA, t)),
    candidate("early share 0.08, 20/50/100", TWENTY, early(0.08)),
    candidate("early share 0.1, 25/50/100", QUARTER, early(0.1)),
    candidate("early share 0.1, 10/20/50/100", (0.1, *TWENTY), early(0.1)),
    candidate("HSD gamma -1.5, 20/50/100", TWENTY, hsd(-1.5)),
    candidate("HSD gamma -3, 25/50/100", QUARTER, hsd(-3.0)),
    candidate("Kim-DeMets rho 2, 20/50/100", TWENTY, power(2.0)),
)
HEADER = (
    "| design | nominal levels | 1% flips: median n, pool 1,000 / 2,000 / 3,000 | "
    "2% flips: median n | 15% flips, pool 2,000: P(PASS) | 5 pts, 15%: P(REGRESSION) | "
    "largest size |\n| :-- | :-- | :-- | :-- | ---: | ---: | ---: |"
)


def row(design: Candidate) -> str:
    """One markdown row of the candidate's exact figures."""
    medians = {
        flips: " / ".join(
            f"{used_quantile(stopping_law(n, 0.0, flips, design), 0.5):,}"  # type: ignore[arg-type]
            for n in (1000, 2000, 3000)
        )
        for flips in (0.01, 0.02)
    }
    passed = stopping_law(2000, 0.0, 0.15, design).passed  # type: ignore[arg-type]
    caught = stopping_law(2000, 0.05, 0.15, design).regression  # type: ignore[arg-type]
    sizes = [
        stopping_law(2000, MAX_DROP, flips, design)  # type: ignore[arg-type]
        for flips in (0.02, 0.15, 0.5)
    ]
    size = max(max(law.regression, law.passed) for law in sizes)
    levels = " / ".join(f"{x:.4f}" for x in design.levels)
    return (
        f"| {design.name} | {levels} | {medians[0.01]} | {medians[0.02]} | {passed:.4f} | "
        f"{caught:.4f} | {size:.4f} |"
    )


Q8_FLIPS = 0.012
"""The share of ARC-Easy answers SmolLM2's Q8_0 flipped (docs/results/sequential-gate.md)."""


def q8_row(design: Candidate) -> str:
    """One markdown row: a Q8_0-like candidate of a 2,000 pool, its first look and median."""
    law = stopping_law(2000, 0.0, Q8_FLIPS, design)  # type: ignore[arg-type]
    return f"| {design.name} | {law.stopped[0]:.3f} | {used_quantile(law, 0.5):,} |"


def main() -> None:
    if "--q8" in sys.argv[1:]:
        print("| design | P(decided at the first look) | median n |\n| :-- | ---: | ---: |")
        for design in CANDIDATES:
            print(q8_row(design), flush=True)
        return
    print(HEADER)
    for design in CANDIDATES:
        print(row(design), flush=True)


if __name__ == "__main__":
    main()
