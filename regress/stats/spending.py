"""Group-sequential boundaries from an alpha-spending function, and what a look's test means.

A sequential gate looks at its examples a few times as they arrive (information fractions
t_1 < ... < t_K = 1) and stops a unit as soon as one of its one-sided tests decides. Testing at
the full alpha at every look would fail far more often than alpha; Lan & DeMets (1983) spend
alpha over the looks instead: by fraction t at most α(t) of it. O'Brien-Fleming's shape

    α_OBF(t) = 2 - 2 Φ(z_{1 - α/2} / √t)

spends almost nothing early (0.00009 of 0.05 at a quarter) and keeps the last look close to
the fixed design's. But the gate's exact tests add Berger & Boos's 0.001 to every p-value, so
a first look at 0.0001 never decides a margin test, and a candidate that flips 1% of its
answers (a Q8_0) waited for the second look. The default, "obf-early", spends a tenth of alpha
at the first look whenever it falls, and O'Brien-Fleming's shape for the rest (issue 50):

    α(t) = α / 10 + (9 / 10) α_OBF(t),

enough for 2 answers lost and 2 gained of 400 to show the drop within a 2-point margin; the
last look's level falls from 0.0482 to 0.0449.

The boundary c_k of look k is the z that makes the chance of first crossing there, under the
null, exactly α(t_k) - α(t_{k-1}); the joint law of the z statistics over looks is the
canonical one (independent increments, corr(Z_j, Z_k) = √(t_j / t_k)), integrated with
gsDesign's grid recursion (the `gsdesign` package).

The gate's own exact tests are kept; a look compares their p-value with the look's nominal
level 1 - Φ(c_k). Equivalently, a look turns the p-value into a *repeated p-value* (Jennison
& Turnbull 2000, ch. 9): the smallest total alpha whose boundary rejects at this look. The
gate's Holm family runs on repeated p-values unchanged, and a bound inverted at the nominal
level is a repeated confidence bound, valid whenever the gate stops.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize
from scipy.stats import norm

GRID = 18
"""gsDesign's default grid size (r): its published boundaries are reproduced to 1e-4."""
SPENDING = {
    "obf-early": "a tenth of alpha at the first look, then Lan-DeMets O'Brien-Fleming",
    "obf": "Lan-DeMets O'Brien-Fleming",
}
"""The spending functions a design may name (the first is the default), and what a report
calls them."""
EARLY_SHARE = 0.1
"""The share of alpha "obf-early" spends at the first look: a nominal level of 0.005 at alpha
0.05, which 2 answers lost and 2 gained of 400 reach (the exact p that the drop is within 2
points is 0.0045); a tenth of 0.001, O'Brien-Fleming's, no outcome reaches
(docs/gate.md#choosing-the-extendable-design)."""
FAR = 8.0
"""Beyond this z a look's boundary is the unconditional tail's: gsDesign's grid spans about
14.6 standard deviations and misplaces mass from 8 on (a boundary for 1e-150 came out below
the tail's own, spending more than its share). The tail's boundary never spends more; it
only matters for the repeated p-value of a tiny p."""
NEVER = 40.0
"""A boundary this far out is never crossed: a look with (all but) no alpha left to spend."""
NEAR = 2.0
"""The median-unbiased drift is searched first within this many SDs of the naive one: the
stopping bias it removes is far smaller, so the search rarely needs its wide bracket."""
MAX_LOOKS = 20
"""The most looks a design may have. Group-sequential designs use a handful; each look costs
a grid recursion at every alpha a repeated p-value tries, so 100,000 looks never finished."""


@dataclass(frozen=True)
class SequentialDesign:
    """When a sequential gate looks, and how it spends alpha over the looks."""

    looks: tuple[float, ...] = (0.2, 0.5, 1.0)
    """Information fractions: the share of each unit's examples seen at each look. The first
    at a fifth, so that a Q8_0-like candidate of a 2,000-example pool PASSes with a median
    under a quarter of it; no look at 75%: it would spend alpha the last look needs, and a
    case still open at half is a close call."""
    spending: str = "obf-early"
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
        return float(norm.sf(boundaries(alpha, self.looks, self.spending)[look]))

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


def spent(spending: str, alpha: float, t: float) -> float:
    """How much of a one-sided `alpha` the named spending function has spent by fraction `t`
    (0 < t <= 1): "obf-early" spends EARLY_SHARE of it at the first look, whenever that is."""
    return sum(spent_steps(spending, alpha, (t,)))


Grid = Any
"""gsdesign's grid of the statistic's density at a look, restricted to a region."""


@functools.lru_cache(maxsize=4096)
def boundaries(alpha: float, looks: tuple[float, ...], spending: str = "obf") -> tuple[float, ...]:
    """One-sided z boundaries c_1..c_K spending `alpha` over `looks` (`spending` names the
    function, O'Brien-Fleming's by default: the published tables' boundaries)."""
    return step_boundaries(spent_steps(spending, alpha, looks), looks)


def spent_steps(spending: str, alpha: float, looks: tuple[float, ...]) -> tuple[float, ...]:
    """The alpha each look spends: the spending function's increments, each computed as one
    (a difference of cumulative "obf-early" spending loses an increment below 1e-16 of the
    tenth spent first, and the repeated p-value of a tiny p needs it)."""
    obf = [0.0, *(obf_spent(alpha, t) for t in looks)]
    steps = [after - before for before, after in itertools.pairwise(obf)]
    if spending == "obf":
        return tuple(steps)
    if spending == "obf-early":
        return (EARLY_SHARE * alpha + (1.0 - EARLY_SHARE) * steps[0],) + tuple(
            (1.0 - EARLY_SHARE) * step for step in steps[1:]
        )
    raise ValueError(f"unknown spending {spending!r}: choose {', '.join(SPENDING)}")


def step_boundaries(steps: tuple[float, ...], looks: tuple[float, ...]) -> tuple[float, ...]:
    """The boundaries whose first crossing under the null at look k has probability
    `steps[k]` (the increments of any spending function at `looks`)."""
    found = [float(norm.isf(steps[0]))]
    grid = _region(0.0, looks[0], -np.inf, found[0])
    for k in range(1, len(looks)):
        step = steps[k]
        previous, info = looks[k - 1], looks[k]

        def crossing(
            c: float,
            grid: Grid = grid,
            previous: float = previous,
            info: float = info,
            step: float = step,
        ) -> float:
            return float(_mass(_region(0.0, info, c, np.inf, (previous, grid))) - step)

        tail = float(norm.isf(step))
        # Far out the unconditional tail decides: P(Z_k > c) = step bounds the first crossing,
        # and the earlier looks barely bind there, where the grid has lost the tail's mass.
        c = min(tail, NEVER) if tail > FAR else _solve(crossing)
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
    too small to reach within NEVER SDs (alpha all but spent) is a boundary never crossed."""
    low, high = -NEVER, NEVER
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
    c = boundaries(alpha, design.looks, design.spending)
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
    c = boundaries(alpha, design.looks, design.spending)

    @functools.cache  # the bracket's ends are read before the search reads them again
    def beyond(theta: float) -> float:
        # Upward: crossing the upper boundary earlier, or reaching this look at z or above.
        total, before = 0.0, None
        for k in range(look):
            info = design.looks[k]
            total += _mass(_region(theta, info, c[k], np.inf, before))
            before = (info, _region(theta, info, -c[k], c[k], before))
        # At the stopping look only the tail beyond z counts: no continuation to carry on.
        total += _mass(_region(theta, design.looks[look], z, np.inf, before))
        return total - 0.5

    # The drift whose statistic sits at z is z / sqrt(t), so the root lies within a few SDs
    # of it: a fixed bracket missed it for a 50-point drop (z of 35 and more at a first look).
    # A bracket of NEAR around it holds it almost always (the stopping bias is far smaller)
    # and takes a third fewer steps.
    centre = z / math.sqrt(design.looks[look])
    low, high = centre - NEAR, centre + NEAR
    if beyond(low) > 0 or beyond(high) < 0:
        low, high = min(-60.0, centre - 60.0), max(60.0, centre + 60.0)
    return float(optimize.brentq(beyond, low, high, xtol=1e-8))
