"""A unit's drop tested against any margin, in either direction, and the bounds that invert it.

Every kind of unit answers the same two one-sided questions (regress.stats.margin.Side):
is the drop shown BEYOND a margin (a REGRESSION), is it shown WITHIN it (a PASS that needs
evidence)? The bound a report prints beside a verdict is the inversion of the very test that
decided it, at the level the family-wise correction applied (for paired counts, up to the
exact p-value's non-monotonicity in the margin: regress.stats.margin, whose bound is the edge
of the margins it rejects, as a betting test's is).

- `PairedCounts`: accuracy units, the exact unconditional test of regress.stats.margin;
- `NormalShift`: a normal estimate with a standard error (a proxy's stratified estimate);
- `StudentizedShift`: a bootstrap-t resampling distribution (scores);
- `BoundedDrop`: the betting test of per-example drops known to lie in a range (a gold
  choice's probability, a capped divergence; regress.stats.bounded_mean), valid under any
  skew;
- `RelativeIncrease`: a log-ratio's test asked as a relative increase (perplexity, whose
  log-ratio test is regress.stats.perplexity.CorpusShift).

The drop is measured as the gate measures it: accuracy points lost (a fraction), a score
lost, or a corpus log-ratio gained (perplexity).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from scipy import stats as sps

from regress.stats.bounded_mean import Direction, bounded_mean_bound, bounded_mean_pvalue
from regress.stats.margin import BOUND_TOLERANCE, Side, drop_bound, margin_pvalue


class DropTest(Protocol):
    """One unit's evidence about its drop."""

    def pvalue(self, margin: float, side: Side) -> float:
        """One-sided p of H0 "drop <= margin" (BEYOND) or "drop >= margin" (WITHIN)."""
        ...

    def bound(self, level: float, side: Side) -> float:
        """The 1 - level one-sided bound that inverts `pvalue`: the drop is at least it
        (BEYOND) or at most it (WITHIN)."""
        ...


@dataclass(frozen=True)
class PairedCounts:
    """b regressions and c improvements among n paired right/wrong outcomes."""

    b: int
    c: int
    n: int

    def pvalue(self, margin: float, side: Side) -> float:
        """The exact unconditional margin test."""
        return margin_pvalue(self.b, self.c, self.n, margin, side)

    def bound(self, level: float, side: Side) -> float:
        """Its inversion, to BOUND_TOLERANCE."""
        return drop_bound(self.b, self.c, self.n, level, side)


@dataclass(frozen=True)
class NormalShift:
    """An estimated drop with a standard error, tested by its normal tail."""

    drop: float
    se: float

    def pvalue(self, margin: float, side: Side) -> float:
        """P(N(margin, se²) beyond the estimate), in the direction of `side`."""
        shift = self.drop - margin if Side(side) is Side.BEYOND else margin - self.drop
        if self.se <= 0:
            return 0.0 if shift > 0 else 1.0
        return float(sps.norm.sf(shift / self.se))

    def bound(self, level: float, side: Side) -> float:
        """The estimate minus (BEYOND) or plus (WITHIN) z(level) standard errors."""
        reach = float(sps.norm.isf(level)) * self.se
        return self.drop - reach if Side(side) is Side.BEYOND else self.drop + reach


@dataclass(frozen=True)
class StudentizedShift:
    """An estimated drop, its standard error and resampled studentized drops, (d* - d) / se*.

    The resampling distribution stands in for the normal one, carrying the skew a t test
    ignores (Hall 1992); p-values count resamples, with the +1 that keeps them valid.
    """

    drop: float
    se: float
    studentized: np.ndarray

    def pvalue(self, margin: float, side: Side) -> float:
        """(1 + resamples at least as extreme) / (1 + resamples)."""
        if self.se <= 0:
            shift = self.drop - margin if Side(side) is Side.BEYOND else margin - self.drop
            return 0.0 if shift > 0 else 1.0
        t = (self.drop - margin) / self.se
        t_star = self.studentized
        extreme = np.sum(t_star >= t) if Side(side) is Side.BEYOND else np.sum(t_star <= t)
        return float((1 + extreme) / (1 + t_star.size))

    def bound(self, level: float, side: Side) -> float:
        """The margin where `pvalue` crosses `level`, found by bisection."""
        if self.se <= 0:
            return self.drop
        return bisect_bound(self.pvalue, level, side, self.drop, self.se)


@dataclass(frozen=True)
class BoundedDrop:
    """Per-example drops known to lie in [low, high], in the run's order, tested by betting:
    valid at any n and under any skew, since the values' range is known. A difference of
    values in [0, 1] (a gold choice's probability) lies in [-1, 1]; a capped divergence is a
    "drop" in [0, cap] (regress.gate.divergence).

    Its p-value is monotone in the margin (regress.stats.bounded_mean), so its bound is the
    edge of the margins it rejects and a verdict that asks for both agrees with the bound."""

    drops: np.ndarray
    low: float = -1.0
    high: float = 1.0

    def pvalue(self, margin: float, side: Side) -> float:
        """The betting p of H0 "mean drop <= margin" (BEYOND) or ">= margin" (WITHIN)."""
        direction = Direction.ABOVE if Side(side) is Side.BEYOND else Direction.BELOW
        return float(bounded_mean_pvalue(self.drops, margin, direction, self.low, self.high))

    def bound(self, level: float, side: Side) -> float:
        """The edge of the margins `pvalue` rejects at `level` (bounded_mean_bound)."""
        direction = Direction.ABOVE if Side(side) is Side.BEYOND else Direction.BELOW
        return bounded_mean_bound(self.drops, level, direction, self.low, self.high)


@dataclass(frozen=True)
class RelativeIncrease:
    """A test of a log-ratio (a perplexity's), asked and answered as a relative increase."""

    log_test: DropTest

    def pvalue(self, margin: float, side: Side) -> float:
        """The log-ratio's p against log(1 + margin)."""
        return self.log_test.pvalue(math.log1p(margin), side)

    def bound(self, level: float, side: Side) -> float:
        """The log-ratio's bound as a relative increase."""
        return math.expm1(self.log_test.bound(level, side))


def bisect_bound(pvalue: PValue, level: float, side: Side, estimate: float, scale: float) -> float:
    """The bound of a test whose p is monotone in the margin, searched around `estimate`.

    BEYOND rejects the margins below the bound, WITHIN those above it.
    """
    beyond = Side(side) is Side.BEYOND
    step = scale if scale > 0 else 1.0
    outside = estimate - step if beyond else estimate + step
    inside = estimate
    while pvalue(outside, side) >= level:
        inside, step = outside, step * 2
        outside = estimate - step if beyond else estimate + step
        if step > 1e6:
            return -math.inf if beyond else math.inf
    while abs(inside - outside) > BOUND_TOLERANCE * max(1.0, scale):
        middle = (inside + outside) / 2
        if pvalue(middle, side) < level:
            outside = middle
        else:
            inside = middle
    return outside


class PValue(Protocol):
    """A one-sided p-value as a function of the margin."""

    def __call__(self, margin: float, side: Side, /) -> float: ...
