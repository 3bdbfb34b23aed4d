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
in the margin, though (the outcomes' order moves with it): n = 300, b = 31, c = 14 rejects a
2-point margin at 0.05 but keeps one at 1.981 (issue 50). So a bound is the edge of the
monotone envelope of the margins rejected (`drop_bound`), and the gate decides by it
(`envelope_rejects`): bound and verdict always agree.
"""

from __future__ import annotations

import functools
import itertools
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
    return _pvalue_at(b, c, n, margin, Side(side))[0]


def _pvalue_at(
    b: int,
    c: int,
    n: int,
    margin: float,
    side: Side,
    level: float = math.inf,
    decision: bool = False,
) -> tuple[float, float]:
    """The exact p-value and the discordance whose tail it is.

    With a `level`, a p-value that the grid of discordances, or a step of the refinement,
    already puts at or above it is returned as found: a lower bound of the p-value, which is
    all a decision at that level needs (the test keeps H0), and spares the (rest of the)
    refinement; its discordance is then not the sup's. A `decision` also skips the
    refinement where an upper bound of the p-value is below the level (the test rejects);
    its p-value is then the grid's, below the level too, and its discordance not the sup's.
    """
    observed = float(_statistic(np.asarray(float(b)), np.asarray(float(c)), n, margin, side))
    window = _window(b + c, n)
    tail, theta = _largest_tail(observed, n, margin, side, window, level, decision)
    return min(1.0, GAMMA + tail), theta


def margin_rejects(b: int, c: int, n: int, margin: float, side: Side, level: float) -> bool:
    """Whether the exact test rejects at `level`: margin_pvalue(...) < level, decided the
    same way, refining the p-value only where bounds of it leave the decision open (most
    decisions an edge search asks for cost a third of the p-value)."""
    _check(b, c, n)
    return n > 0 and _pvalue_at(b, c, n, margin, side, level, decision=True)[0] < level


def drop_bound(b: int, c: int, n: int, level: float, side: Side) -> float:
    """The one-sided 1 - level confidence bound of the drop: the edge of the monotone envelope
    of the margins `margin_pvalue` rejects at `level`.

    BEYOND gives a lower bound, the infimum of the margins the test does not reject: every
    margin below it is rejected, so "the drop is at least this". WITHIN gives an upper bound,
    the supremum of the margins it does not reject: "the drop is at most this". The exact p
    is not monotone in the margin (module docstring), so a margin just beyond a bisected
    crossing can be rejected while one nearer is not; the envelope test, which rejects a
    margin only when it rejects every margin beyond it, is what the gate decides by
    (`envelope_rejects`), so a verdict and its bound always agree.
    """
    _check(b, c, n)
    side = Side(side)
    if n == 0:
        return -1.0 if side is Side.BEYOND else 1.0
    # WITHIN for (b, c) at a drop δ is BEYOND for (c, b) at -δ: the score test is symmetric.
    if side is Side.WITHIN:
        return -_lower_bound(c, b, n, level)
    return _lower_bound(b, c, n, level)


def envelope_rejects(b: int, c: int, n: int, margin: float, level: float, side: Side) -> bool:
    """Whether the envelope test at `level` shows the drop beyond (BEYOND) or within (WITHIN)
    `margin`: the margin lies strictly beyond `drop_bound`. It rejects only where the exact
    test rejects too, so it holds the exact test's size."""
    bound = drop_bound(b, c, n, level, side)
    return margin < bound if Side(side) is Side.BEYOND else margin > bound


def _lower_bound(b: int, c: int, n: int, level: float) -> float:
    """BEYOND's bound: bisect for a crossing of the level, then look below it for margins
    the test keeps (the envelope's edge is the lowest)."""
    if not margin_rejects(b, c, n, -1.0, Side.BEYOND, level):
        return -1.0
    kept, crossing, theta = _bracket(b, c, n, level)  # not rejected / rejected, discordance
    while abs(kept - crossing) > BOUND_TOLERANCE:
        middle = (kept + crossing) / 2
        p, at = _pvalue_at(b, c, n, middle, Side.BEYOND, level)
        if p < level:
            crossing, theta = middle, at
        else:
            kept = middle
    return _lowest_kept(b, c, n, level, crossing, theta)


def _bracket(b: int, c: int, n: int, level: float) -> tuple[float, float, float]:
    """A kept and a rejected margin around the exact test's crossing of `level`, and the
    rejected one's discordance: from the asymptotic score bound, which lies close to it,
    widened until the exact test confirms both ends (at worst [-1, 1])."""
    grid = np.linspace(-1.0, 1.0, 4001)
    statistic = _statistic(
        np.full(grid.size, float(b)), np.full(grid.size, float(c)), n, grid, Side.BEYOND
    )
    rejecting = np.flatnonzero(statistic > sps.norm.isf(level))
    guess = float(grid[rejecting[-1]]) if rejecting.size else -1.0
    width = reach(n)
    while True:
        low, high = max(-1.0, guess - width), min(1.0, guess + width)
        p_low, theta = _pvalue_at(b, c, n, low, Side.BEYOND, level)
        if (low == -1.0 or p_low < level) and (
            high == 1.0 or not margin_rejects(b, c, n, high, Side.BEYOND, level)
        ):
            return 1.0 if high == 1.0 else high, low, theta
        width *= 4


def reach(n: int) -> float:
    """How far below a crossing of the level the exact p can come back above it: its dips
    span up to 0.25 points at n = 100 and 0.13 at n = 300 (issue 50); this is twice that."""
    return min(2.0, 0.05 / math.sqrt(n))


def _lowest_kept(b: int, c: int, n: int, level: float, crossing: float, theta: float) -> float:
    """The lowest margin in [crossing - reach, crossing] the BEYOND test does not reject at
    `level` (`crossing` itself, rejected, when there is none): the envelope's edge.

    The p-value is continuous and rising in the margin between the margins where the
    outcomes' order changes (breakpoints) and jumps only there, so a kept margin below the
    crossing means a piece whose value just before its breakpoint reaches the level; the
    first such piece holds the edge, bisected inside it. Only breakpoints need the exact p.
    """
    low = max(-1.0, crossing - reach(n))
    start = low
    for before, after in _breakpoints(b, c, n, low, crossing, theta):
        if before > start and not margin_rejects(b, c, n, before, Side.BEYOND, level):
            # The piece (start, before] rises through the level: bisect it, rejected below.
            if not margin_rejects(b, c, n, start, Side.BEYOND, level):
                return start
            rejected_at, kept_at = start, before
            while kept_at - rejected_at > BOUND_TOLERANCE:
                middle = (rejected_at + kept_at) / 2
                if margin_rejects(b, c, n, middle, Side.BEYOND, level):
                    rejected_at = middle
                else:
                    kept_at = middle
            return rejected_at
        start = after
    return crossing


BREAK_TOLERANCE = 1e-8
"""Breakpoints are bracketed this tightly: a piece narrower than it holds no bound that a
0.001-point tolerance could tell from its neighbour's."""
BREAK_PROBES = 4
"""Points in the window at which each outcome's order against the observed one is read:
a breakpoint is bisected wherever it changes between two of them."""
SMALLEST_JUMP = 1e-7
"""Outcomes rarer than this (at the crossing's discordance) are left out: the p-value rises
about 4 per unit of margin near a crossing, so the jump they make there moves a bound by
far less than BOUND_TOLERANCE."""


def _breakpoints(
    b: int, c: int, n: int, low: float, high: float, theta: float
) -> list[tuple[float, float]]:
    """Margins just before and just after each point in [low, high] where an outcome near an
    edge of the BEYOND test's region crosses the observed outcome's statistic (the region,
    and the p, jump there), in order."""
    ms = _likely_m(n, *_window(b + c, n))
    edges = [_edges(_observed(b, c, n, x), n, x, Side.BEYOND, ms) for x in (low, high)]
    first = np.maximum(np.minimum(*edges) - 2, 0)
    span = int(np.max(np.maximum(*edges) - first)) + 3
    cand_b = (first[:, None] + np.arange(span)[None, :]).ravel()
    cand_m = np.repeat(ms, span)
    share = min(1.0, (theta + high) / (2 * theta))
    mass = sps.binom.pmf(cand_m, n, theta) * sps.binom.pmf(cand_b, cand_m, share)
    keep = (cand_b <= cand_m) & (mass > SMALLEST_JUMP)
    cand_b, cand_m = cand_b[keep].astype(float), cand_m[keep].astype(float)

    def above(margin: np.ndarray, b_: np.ndarray, m_: np.ndarray) -> np.ndarray:
        """Whether each candidate is at least as extreme as the observed outcome."""
        observed = _statistic(np.asarray(float(b)), np.asarray(float(c)), n, margin, Side.BEYOND)
        threshold = observed - TIE * np.maximum(1.0, np.abs(observed))
        return np.asarray(_statistic(b_, m_ - b_, n, margin, Side.BEYOND) >= threshold)

    found: list[tuple[float, float]] = []
    for left, right in itertools.pairwise(np.linspace(low, high, BREAK_PROBES + 1)):
        at_left = above(np.full(cand_b.size, left), cand_b, cand_m)
        changes = at_left != above(np.full(cand_b.size, right), cand_b, cand_m)
        if not changes.any():
            continue
        b_, m_, at_lo = cand_b[changes], cand_m[changes], at_left[changes]
        lo, hi = np.full(b_.size, left), np.full(b_.size, right)
        while np.max(hi - lo) > BREAK_TOLERANCE:
            middle = (lo + hi) / 2
            same = above(middle, b_, m_) == at_lo
            lo, hi = np.where(same, middle, lo), np.where(same, hi, middle)
        found += zip(lo.tolist(), hi.tolist(), strict=True)
    return sorted(set(found))


def _observed(b: int, c: int, n: int, margin: float) -> float:
    return float(_statistic(np.asarray(float(b)), np.asarray(float(c)), n, margin, Side.BEYOND))


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
        return 0 <= b <= m and margin_rejects(b, m - b, n, margin, side, level)

    edges = np.empty(len(ms), dtype=np.int64)
    edge: int | None = None
    for i, total in enumerate(ms):
        if edge is None:
            edge = _first_edge(total, beyond, rejects)
        elif beyond:
            edge = min(max(edge, 0), total + 1)
            held = edge
            while edge <= total and not rejects(edge, total):
                edge += 1
            # A walk up has just seen edge - 1 kept: only an edge that held can move down.
            if edge == held:
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


@functools.lru_cache(maxsize=65_536)
def _window(m: int, n: int) -> tuple[float, float]:
    """The 1 - GAMMA Clopper-Pearson interval of the discordance, from m of n (kept: an edge
    search tests many b at one m)."""
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


def _statistic(
    b: np.ndarray, c: np.ndarray, n: int, margin: float | np.ndarray, side: Side
) -> np.ndarray:
    """Larger is more extreme for `side`: minus Tango's score at Δ = -margin for BEYOND."""
    score = tango_score(-margin, b, c, n)
    return -score if side is Side.BEYOND else score


def _edges(observed: float, n: int, margin: float, side: Side, m: np.ndarray) -> np.ndarray:
    """Per m, the edge of the outcomes at least as extreme as `observed`.

    For fixed m the statistic is monotone in b (rising for BEYOND, falling for WITHIN), so
    each m's region is one run of b values; a vectorised bisection finds all edges at once
    (or, for a margin asked for often, the first b inside each row of its table: `_table`).
    """
    threshold = observed - TIE * max(1.0, abs(observed)) if math.isfinite(observed) else observed
    # Find j in [0, m + 1], the count of b values outside the region: b = j (BEYOND) or
    # b = m - j (WITHIN) is the first one inside; m + 1 means none is.
    table = _table(n, float(margin), side)
    if table is not None:
        statistic = table[m]
        # Past j = m there is no outcome: counted inside, so each row reads outside, then in.
        inside = (statistic >= threshold) | (np.arange(n + 2) > m[:, None])
        if np.all(inside[:, 1:] >= inside[:, :-1]):
            first = np.asarray(np.argmax(inside, axis=1))
            return first if side is Side.BEYOND else m - first
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


TABLE_N = 500
"""Up to this n, `_edges` reads the statistic of every outcome from one table per margin and
side, once that margin has been asked for TABLE_ASKS times since its table was last kept (an
edge search or a selftest asks for many observed values at one margin; a bound's bisection,
for one at each), rather than bisecting each m."""
TABLE_ASKS = 16
"""A table of n = 300-500 costs about as much as 5-15 bisections."""
TABLES = 16
"""Tables kept (2 MB each at n = 500); the oldest goes first, and its margin counts anew."""
_asked: dict[tuple[int, float, Side], int] = {}
_tables: dict[tuple[int, float, Side], np.ndarray] = {}


def _table(n: int, margin: float, side: Side) -> np.ndarray | None:
    """The statistic's table for an (n, margin, side) asked for often, up to TABLE_N."""
    if n > TABLE_N:
        return None
    key = (n, margin, side)
    kept = _tables.get(key)
    if kept is not None:
        return kept
    _asked[key] = _asked.get(key, 0) + 1
    if _asked[key] < TABLE_ASKS:
        if len(_asked) > 64 * TABLES:
            del _asked[next(iter(_asked))]
        return None
    if len(_tables) >= TABLES:
        oldest = next(iter(_tables))
        del _tables[oldest]
        _asked.pop(oldest, None)
    _tables[key] = table = _statistic_table(n, margin, side)
    return table


def _statistic_table(n: int, margin: float, side: Side) -> np.ndarray:
    """The statistic of every outcome, row m, column j: b = j (BEYOND) or b = m - j (WITHIN),
    as `_edges` counts; -inf where j > m (no outcome)."""
    m, j = np.tril_indices(n + 1)
    b = j if side is Side.BEYOND else m - j
    table = np.full((n + 1, n + 2), -np.inf)
    table[m, j] = _statistic(b.astype(float), (m - b).astype(float), n, margin, side)
    table.flags.writeable = False
    return table


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
    weight = _m_weight(m, n, theta, log_choose)
    return np.asarray(np.sum(weight * _inside(edges, m, margin, side, theta), axis=1))


def _m_weight(m: np.ndarray, n: int, theta: np.ndarray, log_choose: np.ndarray) -> np.ndarray:
    """P(b + c = m) at discordance θ: Binomial(n, θ)."""
    return np.asarray(np.exp(log_choose + special.xlogy(m, theta) + special.xlog1py(n - m, -theta)))


def _inside(
    edges: np.ndarray, m: np.ndarray, margin: float, side: Side, theta: np.ndarray
) -> np.ndarray:
    """P(b in the region | m) at discordance θ on the boundary: b given m is Binomial(m,
    (θ + margin) / 2θ), a share monotone in θ."""
    share = np.clip((theta + margin) / (2 * theta), 0.0, 1.0)
    if side is Side.BEYOND:
        # bdtrc(-1, ...) is 1: every b >= 0 is in the region.
        return np.asarray(special.bdtrc(edges - 1, m, share))
    # bdtr(-1, ...) is undefined where no b is in the region.
    return np.where(edges < 0, 0.0, special.bdtr(np.maximum(edges, 0), m, share))


def _tail_ceiling(
    inside: tuple[np.ndarray, np.ndarray],
    m: np.ndarray,
    n: int,
    interval: tuple[float, float],
    log_choose: np.ndarray,
) -> float:
    """An upper bound of the tail over the discordances in `interval`: per m, the largest
    weight (the binomial in θ peaks at m / n) times the larger of the region's ends (its
    probability, `inside` at either end, is monotone in θ)."""
    left, right = interval
    weight = _m_weight(m, n, np.clip(m / n, left, right), log_choose)
    return float(np.sum(weight * np.maximum(*inside)))


COARSE = 4
"""A decision reads every COARSE-th discordance of the grid first: most p-values an edge
search asks for lie far enough from its level for those, and bounds between them, to
settle it."""
COARSE_PICKS = np.unique(np.r_[np.arange(0, GRID, COARSE), GRID - 1])
"""The grid's indices a decision reads first."""


def _coarse_decision(
    tails: np.ndarray,
    inside: np.ndarray,
    points: np.ndarray,
    m: np.ndarray,
    n: int,
    log_choose: np.ndarray,
    level: float,
) -> tuple[float, float] | None:
    """The largest of the `tails` (at the COARSE_PICKS `points`, where the regions'
    probabilities are `inside`) and its discordance when they settle a decision at `level`
    as the whole grid and its refinement would, else None.

    The whole grid's largest tail is at least theirs, so one at the level keeps H0; and
    between two of them the tail is below the `_tail_ceiling` of that interval, so
    ceilings all below the level (1e-9: rounding's room) reject it.
    """
    best = int(np.argmax(tails))
    read = float(tails[best]), float(points[best])
    if GAMMA + read[0] >= level:
        return read
    peaks = np.clip(m / n, points[:-1, None], points[1:, None])
    ceilings = np.sum(
        _m_weight(m, n, peaks, log_choose) * np.maximum(inside[:-1], inside[1:]), axis=1
    )
    if GAMMA + float(np.max(ceilings)) * (1 + 1e-9) < level:
        return read
    return None


class _Kept(Exception):
    """The refinement reached a tail that puts the p-value at its level."""

    def __init__(self, tail: float, theta: float) -> None:
        super().__init__(tail, theta)
        self.tail, self.theta = tail, theta


def _largest_tail(
    observed: float,
    n: int,
    margin: float,
    side: Side,
    window: tuple[float, float],
    level: float = math.inf,
    decision: bool = False,
) -> tuple[float, float]:
    """sup over the boundary's discordances inside `window` of P(statistic >= observed), and
    the discordance that reaches it; only the first tail found that puts the p-value at
    `level` or above, or (a `decision`, which needs no discordance) when an upper bound of
    the sup puts it below (`_pvalue_at`)."""
    if observed == -math.inf:
        return 1.0, max(abs(margin), window[0])
    # The boundary drop = margin needs at least |margin| of the examples to flip.
    lowest = max(abs(margin), window[0], 1e-12)
    highest = min(1.0, max(lowest, window[1]))
    m = _likely_m(n, lowest, highest)
    edges = _edges(observed, n, margin, side, m)
    log_choose = special.gammaln(n + 1) - special.gammaln(m + 1) - special.gammaln(n - m + 1)

    def tail_at(theta: np.ndarray) -> np.ndarray:
        return _tails(edges, m, n, margin, side, theta, log_choose)

    if lowest >= highest:
        return float(tail_at(np.array([lowest]))[0]), lowest
    grid = np.linspace(lowest, highest, GRID)
    # The grid's tails and regions' probabilities, each discordance read once: a decision's
    # coarse reading is part of the whole grid's.
    tails, inside = np.empty(GRID), np.empty((GRID, m.size))

    def read(rows: np.ndarray) -> None:
        points = grid[rows][:, None]
        inside[rows] = _inside(edges, m, margin, side, points)
        tails[rows] = np.sum(_m_weight(m, n, points, log_choose) * inside[rows], axis=1)

    if decision:
        read(COARSE_PICKS)
        settled = _coarse_decision(
            tails[COARSE_PICKS], inside[COARSE_PICKS], grid[COARSE_PICKS], m, n, log_choose, level
        )
        if settled is not None:
            return settled
        read(np.setdiff1d(np.arange(GRID), COARSE_PICKS))
    else:
        read(np.arange(GRID))
    best = int(np.argmax(tails))
    if GAMMA + float(tails[best]) >= level:
        return float(tails[best]), float(grid[best])
    around = max(best - 1, 0), min(best + 1, GRID - 1)
    left, right = grid[around[0]], grid[around[1]]
    if decision:
        # The refinement can only find a tail up to the ceiling (1e-9: rounding's room).
        ceiling = _tail_ceiling(
            (inside[around[0]], inside[around[1]]), m, n, (left, right), log_choose
        )
        if GAMMA + ceiling * (1 + 1e-9) < level:
            return float(tails[best]), float(grid[best])

    def objective(theta: float) -> float:
        tail = float(tail_at(np.array([theta]))[0])
        if GAMMA + tail >= level:
            # The refinement's result is its largest tail, so this one already keeps H0.
            raise _Kept(tail, theta)
        return -tail

    try:
        refined = optimize.minimize_scalar(
            objective, bounds=(left, right), method="bounded", options={"xatol": 1e-7}
        )
    except _Kept as kept:
        return kept.tail, kept.theta
    if tails[best] >= -refined.fun:
        return float(tails[best]), float(grid[best])
    return float(-refined.fun), float(refined.x)
