"""The exact unconditional test of a paired accuracy drop against a margin, in both directions.

Over n paired examples, b counts those the baseline got right and the candidate wrong, c the
reverse, m = b + c; the drop is (b - c) / n in truth's terms p_b - p_c. Against a margin δ the
gate asks two one-sided questions:
- BEYOND (H0: drop <= δ): is the drop shown to exceed δ? A REGRESSION under the margin rule.
- WITHIN (H0: drop >= δ): is the drop shown to stay below δ? A PASS that needs evidence.

Tango's score statistic (regress.stats.paired.tango_score) orders the outcomes, as in the
asymptotic test, but the p-value is the exact probability of an outcome at least as extreme,
maximised over the nuisance parameter: the discordance θ = p_b + p_c, at the boundary drop = δ
(Suissa & Shuster 1991 for matched pairs; Chan 1998 for non-inferiority). Given θ, m is
Binomial(n, θ) and b given m is Binomial(m, (θ + δ) / 2θ), so each tail is a sum over m alone.
The asymptotic score test exceeds alpha when few answers flip (n = 100 at 4-5% discordance:
P(REGRESSION) 0.07 at the margin); this one holds alpha for every n and discordance.

A p-value and its confidence bound come from the same function. The p-value is not monotone
in the margin, though (the outcomes' order moves with it), so a bisected bound can sit just
on the other side of a margin from that margin's verdict (docs/gate.md, issue 50: n = 300,
b = 31, c = 14 rejects a 2-point margin at 0.05 with a bound of 1.981).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from enum import StrEnum

import numpy as np
from scipy import optimize, special
from scipy import stats as sps

from regress.stats.paired import tango_score

GAMMA = 0.001
"""Berger & Boos (1994): the nuisance discordance is searched only inside its 1 - GAMMA
Clopper-Pearson interval, and GAMMA is added to the p-value. Still exact, and far less
conservative than searching every discordance: a boundary discordance of exactly the margin
(every flip a regression) makes the tail jump by whole examples."""
GRID = 32
"""Discordances searched for the largest tail before a local refinement: the tail is smooth in
θ, and the refinement brings the maximum to within 1e-7 of θ."""
TIE = 1e-9
"""Outcomes whose statistic equals the observed one up to rounding count as "as extreme"."""
BOUND_TOLERANCE = 1e-5
"""Confidence bounds are found to 0.001 points, far below the 0.1 points a report prints."""


class Side(StrEnum):
    """Which one-sided question a margin test answers."""

    BEYOND = "beyond"
    """H0: drop <= margin. A small p shows the drop beyond the margin."""
    WITHIN = "within"
    """H0: drop >= margin. A small p shows the drop within the margin."""


def margin_pvalue(b: int, c: int, n: int, margin: float, side: Side = Side.BEYOND) -> float:
    """Exact unconditional one-sided p-value of counts (b, c) of n against `margin` (a drop).

    With no example there is no evidence: p = 1.
    """
    _check(b, c, n)
    if n == 0:
        return 1.0
    side = Side(side)
    observed = float(_statistic(np.asarray(float(b)), np.asarray(float(c)), n, margin, side))
    tail = _largest_tail(observed, n, margin, side, _window(b + c, n))
    return min(1.0, GAMMA + tail)


def drop_bound(b: int, c: int, n: int, level: float, side: Side) -> float:
    """The one-sided 1 - level confidence bound of the drop that inverts `margin_pvalue`.

    BEYOND gives a lower bound: every margin below it is rejected at `level`, so "the drop is
    at least this". WITHIN gives an upper bound: "the drop is at most this". A margin test at
    `level` rejects when the margin lies beyond the bound (up to BOUND_TOLERANCE), except
    where the p-value is not monotone in the margin (module docstring).
    """
    _check(b, c, n)
    side = Side(side)
    beyond = side is Side.BEYOND
    if n == 0:
        return -1.0 if beyond else 1.0

    def rejected(margin: float) -> bool:
        return margin_pvalue(b, c, n, margin, side) < level

    # BEYOND rejects the margins below the bound, WITHIN those above it.
    outer = -1.0 if beyond else 1.0
    if not rejected(outer):
        return outer
    inside, outside = -outer, outer  # not rejected / rejected
    while abs(inside - outside) > BOUND_TOLERANCE:
        middle = (inside + outside) / 2
        if rejected(middle):
            outside = middle
        else:
            inside = middle
    return outside


def rejection_edges(
    n: int, margin: float, level: float, side: Side, m: range | None = None
) -> np.ndarray:
    """Per m = b + c in `m` (default 0..n), the edge of the outcomes a test at `level` rejects:
    b >= edge (BEYOND; m + 1 when none) or b <= edge (WITHIN; -1 when none).

    For exact operating characteristics: P(reject) at any (drop, discordance) is then a sum
    over m, and the m a discordance cannot produce may be left out. For fixed m the p-value
    is monotone in b, and an edge moves by at most one example from one m to the next, so
    the first edge is bisected and the others are walked to from their neighbour.
    """
    side = Side(side)
    beyond = side is Side.BEYOND
    ms = range(n + 1) if m is None else m

    def rejects(b: int, m: int) -> bool:
        return 0 <= b <= m and margin_pvalue(b, m - b, n, margin, side) < level

    edges = np.empty(len(ms), dtype=np.int64)
    edge: int | None = None
    for i, total in enumerate(ms):
        if edge is None:
            edge = _first_edge(total, beyond, rejects)
        elif beyond:
            edge = min(max(edge, 0), total + 1)
            while edge <= total and not rejects(edge, total):
                edge += 1
            while edge > 0 and rejects(edge - 1, total):
                edge -= 1
        else:
            edge = min(edge + 1, total)
            while edge >= 0 and not rejects(edge, total):
                edge -= 1
        edges[i] = edge
    return edges


def _first_edge(m: int, beyond: bool, rejects: Callable[[int, int], bool]) -> int:
    """The edge at one m by bisection: the rejected b values are one run at one end."""
    # Count the rejected b values from the rejecting end (b = m for BEYOND, b = 0 for WITHIN).
    low, high = 0, m + 1
    while low < high:
        middle = (low + high) // 2
        if rejects(m - middle if beyond else middle, m):
            low = middle + 1
        else:
            high = middle
    return m + 1 - low if beyond else low - 1


def _check(b: int, c: int, n: int) -> None:
    if b < 0 or c < 0 or b + c > n:
        raise ValueError(f"need 0 <= b, c and b + c <= n, got b={b}, c={c}, n={n}")


def _window(m: int, n: int) -> tuple[float, float]:
    """The 1 - GAMMA Clopper-Pearson interval of the discordance, from m of n."""
    low = float(sps.beta.ppf(GAMMA / 2, m, n - m + 1)) if m > 0 else 0.0
    high = float(sps.beta.ppf(1 - GAMMA / 2, m + 1, n - m)) if m < n else 1.0
    return low, high


def _likely_m(n: int, low: float, high: float) -> np.ndarray:
    """The m = b + c that carry any mass (beyond 1e-15) for a discordance in [low, high]."""
    # 9 sd of the widest binomial in the window: what lies beyond has mass below 1e-18.
    widest = 0.25 if low <= 0.5 <= high else max(low * (1 - low), high * (1 - high))
    spread = 9 * math.sqrt(n * widest)
    first = max(0, math.floor(n * low - spread))
    last = min(n, math.ceil(n * high + spread))
    return np.arange(first, last + 1)


def _statistic(b: np.ndarray, c: np.ndarray, n: int, margin: float, side: Side) -> np.ndarray:
    """Larger is more extreme for `side`: minus Tango's score at Δ = -margin for BEYOND."""
    score = tango_score(-margin, b, c, n)
    return -score if side is Side.BEYOND else score


def _edges(observed: float, n: int, margin: float, side: Side, m: np.ndarray) -> np.ndarray:
    """Per m, the edge of the outcomes at least as extreme as `observed`.

    For fixed m the statistic is monotone in b (rising for BEYOND, falling for WITHIN), so
    each m's region is one run of b values; a vectorised bisection finds all edges at once.
    """
    threshold = observed - TIE * max(1.0, abs(observed)) if math.isfinite(observed) else observed
    # Bisect on j in [0, m + 1], the count of b values outside the region: b = j (BEYOND) or
    # b = m - j (WITHIN) is the first one inside; m + 1 means none is.
    low, high = np.zeros(m.size, dtype=np.int64), m + 1
    while np.any(low < high):
        middle = (low + high) // 2
        b = middle if side is Side.BEYOND else m - middle
        inside = (middle <= m) & (
            _statistic(b.astype(float), (m - b).astype(float), n, margin, side) >= threshold
        )
        active = low < high
        high = np.where(active & inside, middle, high)
        low = np.where(active & ~inside, middle + 1, low)
    return low if side is Side.BEYOND else m - low


def _tails(
    edges: np.ndarray,
    m: np.ndarray,
    n: int,
    margin: float,
    side: Side,
    theta: np.ndarray,
    log_choose: np.ndarray,
) -> np.ndarray:
    """P(outcome in the region) at each discordance θ on the boundary drop = margin, summed
    over the given m (the others carry no mass at these θ).

    The binomial terms come from scipy.special's ufuncs rather than scipy.stats.binom, whose
    per-call argument handling cost five times the arithmetic here (an exact p-value evaluates
    this about 15 times); they agree with it to 1e-15.
    """
    theta = np.atleast_1d(theta)[:, None]
    share = np.clip((theta + margin) / (2 * theta), 0.0, 1.0)
    weight = np.exp(log_choose + special.xlogy(m, theta) + special.xlog1py(n - m, -theta))
    if side is Side.BEYOND:
        # bdtrc(-1, ...) is 1: every b >= 0 is in the region.
        inside = special.bdtrc(edges - 1, m, share)
    else:
        # bdtr(-1, ...) is undefined where no b is in the region.
        inside = np.where(edges < 0, 0.0, special.bdtr(np.maximum(edges, 0), m, share))
    return np.asarray(np.sum(weight * inside, axis=1))


def _largest_tail(
    observed: float, n: int, margin: float, side: Side, window: tuple[float, float]
) -> float:
    """sup over the boundary's discordances inside `window` of P(statistic >= observed)."""
    if observed == -math.inf:
        return 1.0
    # The boundary drop = margin needs at least |margin| of the examples to flip.
    lowest = max(abs(margin), window[0], 1e-12)
    highest = min(1.0, max(lowest, window[1]))
    m = _likely_m(n, lowest, highest)
    edges = _edges(observed, n, margin, side, m)
    log_choose = special.gammaln(n + 1) - special.gammaln(m + 1) - special.gammaln(n - m + 1)

    def tail_at(theta: np.ndarray) -> np.ndarray:
        return _tails(edges, m, n, margin, side, theta, log_choose)

    if lowest >= highest:
        return float(tail_at(np.array([lowest]))[0])
    grid = np.linspace(lowest, highest, GRID)
    tails = tail_at(grid)
    best = int(np.argmax(tails))
    left, right = grid[max(best - 1, 0)], grid[min(best + 1, GRID - 1)]
    refined = optimize.minimize_scalar(
        lambda t: -float(tail_at(np.array([t]))[0]),
        bounds=(left, right),
        method="bounded",
        options={"xatol": 1e-7},
    )
    return float(max(tails[best], -refined.fun))
