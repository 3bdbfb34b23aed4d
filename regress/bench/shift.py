"""How much slower: the Hodges-Lehmann estimate of a paired shift in log latency, with the
distribution-free confidence bounds that invert the Wilcoxon signed-rank test.

Each pair is one prompt timed on both sides next to each other in time, so slow phases of a
shared machine hit both. On log latencies a shift is a ratio: exp(shift) estimates the ratio
of the two sides' medians (exactly so when one side's distribution is the other's scaled).
The estimate is the median of the n(n+1)/2 Walsh averages (d_i + d_j) / 2; the one-sided
1-alpha bounds are the Walsh averages whose ranks come from the exact null distribution of the
signed-rank statistic (Hollander, Wolfe & Chicken, Nonparametric Statistical Methods, 3rd ed.,
section 3.3). Heavy-tailed noise (a request that hit a burst of other work) moves it little.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np


@dataclass(frozen=True)
class Shift:
    """A ratio (candidate over baseline) with one-sided bounds at level 1 - alpha each."""

    ratio: float
    low: float
    """Lower 1-alpha confidence bound of the ratio (0 when too few pairs to bound it)."""
    high: float
    """Upper 1-alpha confidence bound (inf when too few pairs)."""
    n_pairs: int
    alpha: float


@cache
def _signed_rank_cdf(n: int) -> np.ndarray:
    """P(T+ <= t) for t = 0..n(n+1)/2 under H0, by counting subsets of ranks 1..n."""
    top = n * (n + 1) // 2
    counts = np.zeros(top + 1, dtype=float)
    counts[0] = 1.0
    for rank in range(1, n + 1):
        counts[rank:] = counts[rank:] + counts[:-rank].copy()
    return np.cumsum(counts) / 2.0**n


def bound_rank(n: int, alpha: float) -> int:
    """k such that the k-th smallest Walsh average is the lower 1-alpha bound (0: none).

    The largest k with P(T+ <= k - 1) <= alpha, so the bound covers with at least 1 - alpha.
    """
    cdf = _signed_rank_cdf(n)
    return int(np.searchsorted(cdf, alpha, side="right"))


def paired_shift(log_ratios: Sequence[float], alpha: float) -> Shift:
    """Hodges-Lehmann ratio and bounds from paired log(candidate / baseline) values."""
    d = np.asarray(log_ratios, dtype=float)
    n = len(d)
    if n == 0:
        return Shift(math.nan, 0.0, math.inf, 0, alpha)
    i, j = np.triu_indices(n)
    walsh = np.sort((d[i] + d[j]) / 2.0)
    k = bound_rank(n, alpha)
    low = math.exp(walsh[k - 1]) if k >= 1 else 0.0
    high = math.exp(walsh[len(walsh) - k]) if k >= 1 else math.inf
    return Shift(math.exp(float(np.median(walsh))), low, high, n, alpha)
