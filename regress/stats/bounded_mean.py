"""A one-sided test of the mean of values known to lie in a bounded range, valid at any n and
under any skew: testing by betting (Waudby-Smith & Ramdas 2024, "Estimating means of bounded
random variables by betting", JRSS-B 86(1)).

A t-test of per-example rates in [0, 1] exceeds its level when the values are skewed: a
refusal share of 5 samples per example, true rate 2%, is "shown below 2%" in 13% of runs at
n = 50-100, since a run with one refusal has a tiny mean and a tinier spread. Neither scipy
nor statsmodels has a bounded-mean test, so it is here.

To show the mean above `bound` (H0: mean <= bound) a gambler starts with wealth 1 and stakes
λ_t · (x_t - bound) on each value in turn, λ_t fixed before x_t is seen and small enough that
wealth stays positive. Under H0 each factor has expectation at most 1, so wealth is a
nonnegative supermartingale, and by Ville's inequality P(max_t wealth >= 1/α) <= α: the
p-value 1 / max wealth holds its level for every distribution on the range, any n, and
remains valid if the examples were looked at as they came. Showing the mean below `bound`
stakes on bound - x_t. The stakes are WSR's predictable plug-in for a fixed n (their eq.
(26)): λ_t = sqrt(2 log(1/LEVEL) / (n σ²_{t-1})), with σ²_{t-1} the regularised running
variance, capped at CAP of the stake that would risk the whole wealth. Any predictable stake
keeps the test valid; this one spends its power near the level a gate uses.

The p-value is monotone in the bound, so a confidence bound is the edge of one run of rejected
means (`bounded_mean_bound`) and a verdict read against it agrees with the test. For ABOVE,
scaled to [0, 1]: the stake λ_t(m) = min(a_t, CAP / m) has a_t from x_1..x_{t-1} alone, and
each factor 1 + λ_t(m)(x_t - m) is positive and non-increasing in m: where x_t >= m both
λ_t(m) and x_t - m are non-negative and non-increasing; where x_t < m, λ_t(m)(m - x_t) is
the smaller of a_t(m - x_t) and CAP(1 - x_t / m), both non-decreasing. So every partial
product, their maximum and 1 / maximum are monotone: p rises with m (BELOW, mirrored, falls).
It is not monotone in the data's order: the largest wealth may come early, and a mean the
first examples refute is rejected though the whole sample's average equals it.
"""

from __future__ import annotations

from enum import StrEnum

import numpy as np
from numpy.typing import ArrayLike

LEVEL = 0.05
"""The level the stakes are tuned to (WSR's α in λ_t); the p-value is valid at every level."""
CAP = 0.75
"""Largest stake, as a share of the one that could lose all wealth on one value (WSR's c:
1/2 or 3/4)."""
GRID = 2001
"""Means an interval is searched over: 0.05 points of a rate, 0.0045 of a 1-10 grade."""
CHUNK = 2_000_000
"""Values held at once while an interval is searched (a grid of means times the sample)."""
TOLERANCE = 1e-7
"""Share of the range a bound is found to: 2e-5 points of a drop in [-1, 1], far below the
0.1 points a report prints, and 1e-7 nat of a divergence printed to 1e-4."""


PLAN_SIZES = (
    25, 50, 75, 100, 150, 200, 250, 300, 400, 500, 600, 750, 1000, 1250, 1500, 2000, 2500,
    3000, 4000, 5000, 6000, 8000, 10000, 15000, 20000,
)  # fmt: skip
"""The sizes `betting_n` plans on: steps of at most a third, up to 20,000 examples."""
PLAN_DRAWS = 1000
"""Resamples per size: the share that decides is known to about ±0.013 at 80% power (200
put a size whose power is 0.86 at 0.795)."""
PLAN_SEED = 0


class Direction(StrEnum):
    """Which side of the bound the test tries to show the mean on."""

    ABOVE = "above"
    """H0: mean <= bound."""
    BELOW = "below"
    """H0: mean >= bound."""


def bounded_mean_pvalue(
    values: ArrayLike,
    bound: float | np.ndarray,
    direction: Direction,
    low: float = 0.0,
    high: float = 1.0,
) -> np.ndarray | float:
    """The betting test's p-value (1 / largest wealth, at most 1) of H0 "mean <= bound"
    (ABOVE) or "mean >= bound" (BELOW) for values in [low, high], taken in their order.

    `values` may be one sample (a float comes back) or a 2-D array of samples, one per row
    (an array of p-values, for simulations; `bound` may then be one per row). Values outside
    [low, high] are a ValueError: the test's guarantee rests on the range.
    """
    x = np.asarray(values, dtype=float)
    single = x.ndim == 1
    x = np.atleast_2d(x)
    if not high > low:
        raise ValueError(f"need low < high, got {low}, {high}")
    if x.shape[1] == 0:
        raise ValueError("need at least one value")
    if np.any(x < low) or np.any(x > high):
        raise ValueError(f"values must lie in [{low:g}, {high:g}]")
    x = (x - low) / (high - low)
    m = np.broadcast_to((np.asarray(bound, dtype=float) - low) / (high - low), x.shape[:1])
    above = Direction(direction) is Direction.ABOVE
    # Mirroring turns BELOW into ABOVE: the mean of 1 - x is above 1 - m.
    if not above:
        x, m = 1.0 - x, 1.0 - m
    p = _above(x, m)
    return float(p[0]) if single else p


def bounded_mean_interval(
    values: ArrayLike, confidence: float, low: float = 0.0, high: float = 1.0
) -> tuple[float, float]:
    """The two-sided `confidence` interval that inverts the betting test: the means on a grid
    of GRID points of [low, high] that neither one-sided test rejects at (1 - confidence) / 2.
    Its ends are grid points, so it is at most (high - low) / (GRID - 1) wider than exact."""
    x = np.asarray(values, dtype=float)
    level = (1 - confidence) / 2
    grid = np.linspace(low, high, GRID)
    kept = np.concatenate(
        [
            (bounded_mean_pvalue(np.broadcast_to(x, (len(chunk), x.size)), chunk,
                                 Direction.ABOVE, low, high) >= level)
            & (bounded_mean_pvalue(np.broadcast_to(x, (len(chunk), x.size)), chunk,
                                   Direction.BELOW, low, high) >= level)
            for chunk in np.array_split(grid, max(1, GRID * x.size // CHUNK))
        ]
    )  # fmt: skip
    inside = grid[kept]
    if inside.size == 0:  # the grid stepped over a narrow interval: the mean is in it
        mean = float(np.mean(x))
        return mean, mean
    return float(inside[0]), float(inside[-1])


def bounded_mean_bound(
    values: ArrayLike, level: float, direction: Direction, low: float = 0.0, high: float = 1.0
) -> float:
    """The one-sided 1 - level bound that inverts the betting test: the edge of the means it
    rejects at `level`. ABOVE gives a lower bound (the mean is at least it), BELOW an upper one.

    The p-value is monotone in the mean tested (module docstring), so the rejected means are
    one run from `low` (ABOVE) or to `high` (BELOW). The bound is a mean the test rejects,
    within TOLERANCE of the range of the first it keeps, bisected over the whole range: every
    mean beyond it is rejected too, so a verdict that asks its margin to lie beyond the bound
    rejects only what the test rejects. No mean rejected: `low` (ABOVE) or `high` (BELOW).
    """
    x = np.asarray(values, dtype=float)
    if x.ndim != 1:
        raise ValueError("need one sample")
    rejected, kept = (low, high) if Direction(direction) is Direction.ABOVE else (high, low)

    def rejects(mean: float) -> bool:
        return float(bounded_mean_pvalue(x, mean, direction, low, high)) < level

    if not rejects(rejected):
        return rejected
    while abs(kept - rejected) > TOLERANCE * (high - low):
        middle = (rejected + kept) / 2
        if rejects(middle):
            rejected = middle
        else:
            kept = middle
    return rejected


def betting_n(
    values: ArrayLike,
    target: float,
    margin: float,
    direction: Direction,
    level: float,
    power: float,
    low: float = 0.0,
    high: float = 1.0,
) -> int | None:
    """Examples the betting test needs to show a sample like `values`, moved to mean
    `target`, beyond `margin` (ABOVE) or within it (BELOW) at `level` with `power`: the
    smallest of PLAN_SIZES at which that share of PLAN_DRAWS seeded resamples (with
    replacement; the values shifted to `target` and clipped to the range) rejects. None when
    no size up to the last does, or the target is not on the side shown.

    A plan of this test, not of a normal approximation: its stakes cap what one value can
    win, so even a sample of identical values needs a floor of examples (about 210 to be shown
    within a 2-point margin on [-1, 1]), which a standard error of 0 would put at 2.
    """
    x = np.asarray(values, dtype=float)
    beyond = Direction(direction) is Direction.ABOVE
    if x.size == 0 or (target <= margin if beyond else target >= margin):
        return None
    moved = np.clip(x - x.mean() + target, low, high)
    rng = np.random.default_rng(PLAN_SEED)

    def decides(n: int) -> bool:
        rejected = 0
        for rows in np.array_split(np.arange(PLAN_DRAWS), max(1, PLAN_DRAWS * n // CHUNK)):
            draws = moved[rng.integers(0, moved.size, size=(rows.size, n))]
            rejected += int(
                np.sum(bounded_mean_pvalue(draws, margin, direction, low, high) < level)
            )
        return rejected >= power * PLAN_DRAWS

    # Power grows with n: bisect the sizes for the first that decides.
    first, last = 0, len(PLAN_SIZES)
    while first < last:
        middle = (first + last) // 2
        if decides(PLAN_SIZES[middle]):
            last = middle
        else:
            first = middle + 1
    return PLAN_SIZES[first] if first < len(PLAN_SIZES) else None


def _above(x: np.ndarray, m: np.ndarray) -> np.ndarray:
    """p of H0 "mean <= m" for rows of values in [0, 1], one m per row."""
    n = x.shape[1]
    inner = np.clip(m, 1e-12, 1 - 1e-12)[:, None]
    t = np.arange(1, n + 1)
    # WSR's regularised running mean and variance, each shifted by one value so that the
    # stake on x_t uses x_1..x_{t-1} only.
    mean = (0.5 + np.cumsum(x, axis=1)) / (t + 1)
    spread = (0.25 + np.cumsum((x - mean) ** 2, axis=1)) / (t + 1)
    before = np.concatenate([np.full((x.shape[0], 1), 0.25), spread[:, :-1]], axis=1)
    stake = np.minimum(np.sqrt(2 * np.log(1 / LEVEL) / (n * before)), CAP / inner)
    log_wealth = np.cumsum(np.log1p(stake * (x - inner)), axis=1)
    p = np.minimum(1.0, np.exp(-np.max(log_wealth, axis=1)))
    # No mean exceeds 1; a mean <= 0 means every value is 0, which one positive value refutes.
    p = np.where(m >= 1.0, 1.0, p)
    return np.where(m <= 0.0, np.where(np.any(x > 0, axis=1), 0.0, 1.0), p)
