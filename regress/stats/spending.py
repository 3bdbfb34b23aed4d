"""Group-sequential boundaries from an alpha-spending function, and what a look's test means.

A sequential gate looks at its examples a few times as they arrive (information fractions
t_1 < ... < t_K = 1) and stops a unit as soon as one of its one-sided tests decides. Testing at
the full alpha at every look would fail far more often than alpha; Lan & DeMets (1983) spend
alpha over the looks instead: by fraction t at most α(t) of it, with O'Brien-Fleming's shape

    α(t) = 2 - 2 Φ(z_{1 - α/2} / √t),

which spends almost nothing early (0.00009 of 0.05 at a quarter) and keeps the last look close to
the fixed design's. The boundary c_k of look k is the z that makes the chance of first crossing
there, under the null, exactly α(t_k) - α(t_{k-1}); the joint law of the z statistics over
looks is the canonical one (independent increments, corr(Z_j, Z_k) = √(t_j / t_k)), integrated
with gsDesign's grid recursion (the `gsdesign` package).

The gate's own exact tests are kept; a look compares their p-value with the look's nominal
level 1 - Φ(c_k). Equivalently, a look turns the p-value into a *repeated p-value* (Jennison
& Turnbull 2000, ch. 9): the smallest total alpha whose boundary rejects at this look. The
gate's Holm family runs on repeated p-values unchanged, and a bound inverted at the nominal
level is a repeated confidence bound, valid whenever the gate stops.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize
from scipy.stats import norm

GRID = 18
"""gsDesign's default grid size (r): its published boundaries are reproduced to 1e-4."""
SPENDING = ("obf",)
"""The spending functions a design may name: Lan-DeMets O'Brien-Fleming."""
MAX_LOOKS = 20
"""The most looks a design may have. Group-sequential designs use a handful; each look costs
a grid recursion at every alpha a repeated p-value tries, so 100,000 looks never finished."""


@dataclass(frozen=True)
class SequentialDesign:
    """When a sequential gate looks, and how it spends alpha over the looks."""

    looks: tuple[float, ...] = (0.25, 0.5, 1.0)
    """Information fractions: the share of each unit's examples seen at each look. No look at
    75% by default: it would spend alpha the last look needs (its nominal level would fall
    from 0.048 to 0.043 at alpha 0.05), and a case still open at half is a close call."""
    spending: str = "obf"
    seed: int = 0
    """Seed of the random order the examples are run in."""

    def __post_init__(self) -> None:
        looks = self.looks
        if not looks or any(b <= a for a, b in zip(looks, looks[1:], strict=False)):
            raise ValueError("sequential looks must increase")
        if looks[0] <= 0 or not math.isclose(looks[-1], 1.0):
            raise ValueError("sequential looks must lie in (0, 1] and end at 1")
        if len(looks) > MAX_LOOKS:
            raise ValueError(f"at most {MAX_LOOKS} sequential looks, not {len(looks):,}")
        if self.spending not in SPENDING:
            raise ValueError(f"unknown spending {self.spending!r}: choose {', '.join(SPENDING)}")

    def to_dict(self) -> dict[str, Any]:
        """The design as a policy file spells it (and a sequential candidate's manifest)."""
        return {"looks": list(self.looks), "spending": self.spending, "seed": self.seed}

    def nominal_level(self, alpha: float, look: int) -> float:
        """The p-value under which look `look` (0-based) rejects, for a total `alpha`."""
        return float(norm.sf(boundaries(alpha, self.looks)[look]))

    def repeated_pvalue(self, pvalue: float, look: int) -> float:
        """The smallest total alpha at which `pvalue` rejects at look `look` (at most 1)."""
        if pvalue <= 0.0:
            return 0.0
        top = 1.0 - 1e-12
        if self.nominal_level(top, look) <= pvalue:
            return 1.0
        # A look's nominal level never exceeds the alpha it spends, so the answer is at least
        # `pvalue`: searching from there brackets it however small the p-value (a 50-point
        # drop gives 1e-300, far below any fixed lower end). The nominal level grows with
        # alpha, so the root is unique; on log(alpha), so a tiny one is found as precisely.
        if self.nominal_level(pvalue, look) >= pvalue:
            return pvalue
        root = optimize.brentq(
            lambda log_a: self.nominal_level(math.exp(log_a), look) - pvalue,
            math.log(pvalue),
            math.log(top),
            xtol=1e-10,
        )
        return min(1.0, max(pvalue, math.exp(root)))


def cut(n: int, fraction: float) -> int:
    """How many of n examples a look at `fraction` has seen."""
    return n if math.isclose(fraction, 1.0) else min(n, math.ceil(n * fraction - 1e-9))


def obf_spent(alpha: float, t: float) -> float:
    """Lan-DeMets O'Brien-Fleming: the share of a one-sided `alpha` spent by fraction `t`."""
    return float(2.0 * norm.sf(norm.isf(alpha / 2.0) / math.sqrt(t)))


Grid = Any
"""gsdesign's grid of the statistic's density at a look, restricted to a region."""


@functools.lru_cache(maxsize=4096)
def boundaries(alpha: float, looks: tuple[float, ...]) -> tuple[float, ...]:
    """One-sided z boundaries c_1..c_K spending `alpha` over `looks` (O'Brien-Fleming shape)."""
    spent = [obf_spent(alpha, t) for t in looks]
    found = [float(norm.isf(spent[0]))]
    grid = _region(0.0, looks[0], -np.inf, found[0])
    for k in range(1, len(looks)):
        step = spent[k] - spent[k - 1]
        previous, info = looks[k - 1], looks[k]

        def crossing(
            c: float,
            grid: Grid = grid,
            previous: float = previous,
            info: float = info,
            step: float = step,
        ) -> float:
            return float(_mass(_region(0.0, info, c, np.inf, (previous, grid))) - step)

        c = _solve(crossing)
        found.append(c)
        grid = _region(0.0, info, -np.inf, c, (previous, grid))
    return tuple(found)


def _region(
    theta: float, info: float, low: float, high: float, before: tuple[float, Grid] | None = None
) -> Grid:
    """gsdesign's grid of the statistic at information `info` (drift θ per full information)
    inside (low, high): from nothing at the first look, else carried on from `before`, the
    previous look's (information, grid of its continuation region)."""
    from gsdesign import h1, hupdate

    if before is None:
        return h1(GRID, theta, info, low, high)
    previous, grid = before
    return hupdate(GRID, theta, info, low, high, theta, previous, grid)


def _mass(grid: Grid) -> float:
    """The probability a grid holds."""
    return float(np.sum(grid[2]))


def _solve(crossing: Callable[[float], float]) -> float:
    """The boundary where the first-crossing probability equals its share of alpha; a share
    too small to reach within 40 SDs (alpha all but spent) is a boundary never crossed."""
    low, high = -40.0, 40.0
    if crossing(high) > 0:
        return high
    if crossing(low) < 0:
        return low
    return float(optimize.brentq(crossing, low, high, xtol=1e-10))


def stopping(
    design: SequentialDesign, alpha: float, theta: float
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """P(first crossing above, below) at each look of a unit tested both ways at `alpha`.

    The statistic at look k is Z_k = (drop estimate - margin) / SE_k; its drift is θ √t_k
    with θ = (true drop - margin) / SE at the full n. Above is a REGRESSION, below a PASS.
    """
    c = boundaries(alpha, design.looks)
    up, down = [], []
    before = None
    for k, info in enumerate(design.looks):
        up.append(_mass(_region(theta, info, c[k], np.inf, before)))
        down.append(_mass(_region(theta, info, -np.inf, -c[k], before)))
        before = (info, _region(theta, info, -c[k], c[k], before))
    return tuple(up), tuple(down)


def median_unbiased_drift(design: SequentialDesign, alpha: float, look: int, z: float) -> float:
    """The median-unbiased drift θ after a unit stopped at `look` (0-based) with statistic z.

    Stage-wise ordering (Jennison & Turnbull 2000, 8.4): an outcome is more extreme when it
    crossed the same boundary at an earlier look, or at this look further out. θ̂ is the drift
    at which such outcomes have probability one half. The naive estimate of a unit stopped
    early overstates its effect, since it stopped because the effect looked large.
    """
    c = boundaries(alpha, design.looks)

    def beyond(theta: float) -> float:
        # Upward: crossing the upper boundary earlier, or reaching this look at z or above.
        total, before = 0.0, None
        for k in range(look + 1):
            info = design.looks[k]
            total += _mass(_region(theta, info, z if k == look else c[k], np.inf, before))
            before = (info, _region(theta, info, -c[k], c[k], before))
        return total - 0.5

    # The drift whose statistic sits at z is z / sqrt(t), so the root lies within a few SDs
    # of it: a fixed bracket missed it for a 50-point drop (z of 35 and more at a first look).
    centre = z / math.sqrt(design.looks[look])
    return float(
        optimize.brentq(beyond, min(-60.0, centre - 60.0), max(60.0, centre + 60.0), xtol=1e-8)
    )
