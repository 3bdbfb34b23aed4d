"""The perplexity unit's test: the length-weighted corpus log-ratio, by sign flips and bootstrap-t.

A perplexity threshold judges the corpus perplexity, exp(-Σ loglik / Σ weight), so the test is
of the corpus log-ratio R = Σ d_i / Σ w_i, with d_i the candidate's extra loss (nats) on
document i and w_i its size (words or bytes). R is a ratio estimator; its linearised standard
error is sqrt(Σ (d_i - R w_i)²) / Σ w_i (Cochran 1977, §6.4).

Two resampling tests of H0: R <= R0 each hold their size where the other does not:

- The sign-flip test (Fisher's one-sample randomisation test) flips the signs of
  e_i = d_i - R0 w_i. It is exact whenever each document's change is symmetric about R0 w_i,
  whatever the lengths, but with skewed changes (a quarter of documents 3% better per word,
  the rest 1% worse) its one-sided size reaches 0.08-0.10. Studentizing cannot fix it: flips
  leave Σ e_i² unchanged, so a studentized sign-flip statistic is a monotone function of the
  plain one and gives the same p-values.
- The bootstrap-t (Efron & Tibshirani 1993, ch. 12; Hall 1992, §3.5) resamples documents and
  refers (R - R0) / se to the resampled (R* - R) / se*, which carries the skew the sample
  shows. It cannot carry gains the sample does not show: when 5% of documents improve 15%
  per word and the rest worsen just enough to make the corpus change the margin, runs that
  drew one or two of the gains look like a uniform increase: at the margin it flagged 8-16%
  of runs at 62-200 documents. So it resamples the documents plus one unseen document that
  favours H0 (a pseudo-observation, as in Laplace's rule of succession or Chen, Variyath &
  Abraham's 2008 adjusted empirical likelihood): as long as the document an average word
  sits in, Σ w² / Σ w, and changed per word as much as the most favourable document seen
  (the smallest d_i / w_i against H0: R <= R0, the largest against H0: R >= R0). The
  data's own estimate and standard error stay those of the documents.

The gate's test rejects only when both reject: its p-value is the larger of the two, so its
size is at most the smaller of their sizes under any null. Measured under five nulls and the
rare-large-gain case at 62 and 200 documents (`experiments/perplexity_size.py`,
docs/results/perplexity-size.md), it is at most 0.045; in the rare-gain case that is the 4%
of runs with no gain at all, every document worse. No test from the data alone can tell a
sample that missed rare gains from a uniform increase, so a test valid there has to be this
conservative: the unseen document costs power (0.72 to 0.70 against issue 12's case at 200
documents and a 2% margin).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from regress.stats.margin import Side
from regress.stats.paired import RESAMPLES, SEED

_ROUNDING = 1e-9
"""Relative size below which a sum of squared residuals is rounding error, not spread."""


@dataclass(frozen=True)
class CorpusTest:
    """A paired comparison of a corpus perplexity, exp(-Σ loglik / Σ weight) (lower is better)."""

    n: int
    """Documents paired."""
    baseline: float
    """The baseline's corpus perplexity."""
    candidate: float
    """The candidate's corpus perplexity."""
    pvalue: float
    """One-sided p for "the candidate's corpus perplexity is higher": the larger of the
    sign-flip and bootstrap-t (with one unseen document) p-values."""
    margin_pvalue: float
    """One-sided p for "higher by more than the margin" (a relative increase), likewise."""
    ci: tuple[float, float]
    """Two-sided 1 - alpha interval for the relative change, by inverting the same test: each
    end is where that side's one-sided p crosses alpha / 2."""
    se: float
    """Standard error of the log corpus-perplexity ratio (linearised ratio estimator)."""

    @property
    def relative_change(self) -> float:
        """Candidate / baseline - 1: positive when the candidate is worse."""
        return self.candidate / self.baseline - 1


def corpus_ratio_test(
    base_logliks: ArrayLike,
    cand_logliks: ArrayLike,
    weights: ArrayLike,
    margin: float = 0.0,
    alpha: float = 0.05,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> CorpusTest:
    """Test and interval for the corpus perplexity's relative change (module docstring).

    `weights` is each document's size in the perplexity's unit (words for word perplexity,
    bytes for byte perplexity), so long documents weigh as much as they do in the corpus
    quantity. Against H0: R <= R0 (R0 = 0, or log(1 + margin); `margin` is a relative
    increase, 0.02 = 2%) the p-value is the larger of the sign-flip p-value and that of the
    bootstrap-t with one unseen document in H0's favour (`with_unseen_document`), each from
    `resamples` resamples seeded by `seed`. The interval is the set of R0
    that neither one-sided test rejects at alpha / 2, so it excludes exactly what the test
    rejects.

    The bootstrap-t needs spread to studentize by. Without it (one document, or documents
    that all changed by the same amount per word) the sign-flip test alone decides: one
    document gives p near 1/2 and an unbounded interval, ten documents all worse p = 1/1024.
    """
    shift = corpus_shift(base_logliks, cand_logliks, weights, resamples, seed)
    return shift.summary(margin, alpha)


def corpus_shift(
    base_logliks: ArrayLike,
    cand_logliks: ArrayLike,
    weights: ArrayLike,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> CorpusShift:
    """The combined test of the corpus log-ratio, ready for any margin in either direction."""
    base, cand, w = (np.asarray(x, dtype=float) for x in (base_logliks, cand_logliks, weights))
    if not base.shape == cand.shape == w.shape or base.ndim != 1:
        raise ValueError("baseline, candidate and weights must have one value per document")
    if np.any(w <= 0):
        raise ValueError("every document needs a positive weight (words or bytes)")
    return CorpusShift(base, cand, w, resamples, np.random.default_rng(seed))


class CorpusShift:
    """The corpus log-ratio R and its two resampling tests, as a DropTest on the log scale
    (regress.stats.drops; the gate wraps it in RelativeIncrease): each side's p is the
    larger of the sign-flip test's and that side's bootstrap-t's, each bound the farther of
    their bounds, so the bound a report prints inverts the test that decided."""

    def __init__(
        self,
        base: np.ndarray,
        cand: np.ndarray,
        weights: np.ndarray,
        resamples: int,
        rng: np.random.Generator,
    ) -> None:
        self.n = int(base.size)
        self.base, self.cand, self.weights = base, cand, weights
        self.flips: SignFlip | None = None
        self.boots: dict[Side, BootstrapT] = {}
        self.drop, self.se = math.nan, math.nan
        if self.n == 0:
            return
        total = float(weights.sum())
        extra = base - cand
        self.drop = float(extra.sum()) / total
        residuals = extra - self.drop * weights
        spread = math.sqrt(float(np.sum(residuals**2)))
        self.se = spread / total
        self.flips = SignFlip(extra, weights, resamples, rng)
        # Residuals at rounding level (one document, or every document changed by the same
        # amount per word) are no spread to studentize by: the sign-flip test alone decides.
        if spread <= _ROUNDING * math.sqrt(float(np.sum(extra**2))):
            return
        # Both sides draw the same resamples, so swapping baseline and candidate mirrors them.
        seed = int(rng.integers(2**63))
        for side in Side:
            augmented_extra, augmented_weights = with_unseen_document(extra, weights, side)
            self.boots[side] = BootstrapT.of(
                augmented_extra, augmented_weights, resamples, np.random.default_rng(seed)
            )

    def _tests(self, side: Side) -> list[SignFlip | BootstrapT]:
        """The tests that decide H0 on this side: the sign flips and that side's bootstrap-t."""
        tests: list[SignFlip | BootstrapT] = [] if self.flips is None else [self.flips]
        if Side(side) in self.boots:
            tests.append(self.boots[Side(side)])
        return tests

    def pvalue(self, margin: float, side: Side) -> float:
        """One-sided p against the log-ratio `margin`: the larger of the two tests'."""
        tests = self._tests(side)
        if not tests:
            return 1.0
        return max(test.pvalue(margin, side) for test in tests)

    def bound(self, level: float, side: Side) -> float:
        """The one-sided 1 - level bound of the log-ratio: the farther of the two tests'."""
        tests = self._tests(side)
        if not tests:
            return -math.inf if Side(side) is Side.BEYOND else math.inf
        lows, highs = zip(*(test.bounds(2 * level) for test in tests), strict=True)
        return float(min(lows) if Side(side) is Side.BEYOND else max(highs))

    def summary(self, margin: float, alpha: float) -> CorpusTest:
        """The figures a unit reports, H0 "no increase" and H0 "increase <= margin"."""
        if self.n == 0:
            nan = math.nan
            return CorpusTest(0, nan, nan, pvalue=1.0, margin_pvalue=1.0, ci=(nan, nan), se=nan)
        total = float(self.weights.sum())
        return CorpusTest(
            n=self.n,
            baseline=math.exp(-self.base.sum() / total),
            candidate=math.exp(-self.cand.sum() / total),
            pvalue=self.pvalue(0.0, Side.BEYOND),
            margin_pvalue=self.pvalue(math.log1p(margin), Side.BEYOND),
            ci=(
                math.expm1(self.bound(alpha / 2, Side.BEYOND)),
                math.expm1(self.bound(alpha / 2, Side.WITHIN)),
            ),
            se=self.se,
        )


def with_unseen_document(
    extra: np.ndarray, weights: np.ndarray, side: Side
) -> tuple[np.ndarray, np.ndarray]:
    """The documents plus one unseen document in H0's favour, for the bootstrap-t of `side`.

    Its size is Σ w² / Σ w, the size of the document an average word sits in; its change per
    word is the smallest d_i / w_i seen against H0: R <= R0 (BEYOND), the largest against
    H0: R >= R0 (WITHIN). A sample that missed rare gains (or losses) resamples as if it had
    seen one more, on a typical word's document: what keeps the test's size there.
    """
    per_word = extra / weights
    favourable = per_word.min() if Side(side) is Side.BEYOND else per_word.max()
    size = float(np.sum(weights**2) / np.sum(weights))
    return np.append(extra, favourable * size), np.append(weights, size)


def _tail_count(alpha: float, size: int) -> int:
    """The most resamples beyond the data (besides the data) that a p < alpha / 2 allows.

    Counted with the p-value's own arithmetic, (1 + count) / (1 + size), so an interval's end
    and the p-value agree at the boundary; -1 when no count does (too few resamples).
    """
    return int(np.sum((1 + np.arange(size + 1)) / (1 + size) < alpha / 2)) - 1


class SignFlip:
    """Fisher's sign-flip test of H0: R <= R0, for every R0 from one set of flips.

    Flipping the documents F moves Σ (d_i - R0 w_i) to or past its observed value exactly
    when R0 >= Σ_F d / Σ_F w, so the sorted flipped ratios answer every null. A resample that
    flips nothing ties with the data at every R0 (`always`).
    """

    def __init__(
        self, extra: np.ndarray, weights: np.ndarray, resamples: int, rng: np.random.Generator
    ) -> None:
        chunk = max(1, 2_000_000 // extra.size)
        ratios, always = [], 0
        for start in range(0, resamples, chunk):
            flips = rng.random((min(chunk, resamples - start), extra.size)) < 0.5
            numerator, denominator = flips @ extra, flips @ weights
            empty = ~flips.any(axis=1)
            always += int(empty.sum())
            ratios.append(numerator[~empty] / denominator[~empty])
        self.ratios = np.sort(np.concatenate(ratios))
        self.always = always
        self.resamples = resamples

    def pvalue(self, null: float, side: Side = Side.BEYOND) -> float:
        """One-sided p of H0: R <= null (BEYOND) or R >= null (WITHIN), the mirror image."""
        if Side(side) is Side.BEYOND:
            beyond = int(np.searchsorted(self.ratios, null, side="right"))
        else:
            beyond = self.ratios.size - int(np.searchsorted(self.ratios, null, side="left"))
        return float((1 + self.always + beyond) / (1 + self.resamples))

    def bounds(self, alpha: float) -> tuple[float, float]:
        """Where each side's one-sided p reaches alpha / 2 (infinite with too few flips)."""
        k = _tail_count(alpha, self.resamples) - self.always
        if not 0 <= k < self.ratios.size:
            return (-math.inf, math.inf)
        return (float(self.ratios[k]), float(self.ratios[-1 - k]))


class BootstrapT:
    """The bootstrap-t test of H0: R <= R0: (R - R0) / se against resampled (R* - R) / se*.

    Each resample draws n documents with replacement; with c_i the times document i is drawn
    and e_i = d_i - R w_i its residual at the estimate, R* - R = Σ c e / Σ c w and the
    resample's residuals are e_i - (R* - R) w_i. Working from e rather than d keeps the
    variance's subtraction small, and five weighted sums per resample give everything.
    Resamples without spread (one document drawn n times) are dropped.
    """

    def __init__(
        self,
        ratio: float,
        se: float,
        residuals: np.ndarray,
        weights: np.ndarray,
        resamples: int,
        rng: np.random.Generator,
    ) -> None:
        n = residuals.size
        columns = np.column_stack(
            [residuals, weights, residuals**2, residuals * weights, weights**2]
        )
        chunk = max(1, 2_000_000 // n)
        found = []
        for start in range(0, resamples, chunk):
            rows = min(chunk, resamples - start)
            # Draw counts c_i: bincount of flat offsets is several times faster than multinomial.
            drawn = rng.integers(0, n, size=(rows, n)) + n * np.arange(rows)[:, None]
            counts = np.bincount(drawn.ravel(), minlength=rows * n).reshape(rows, n)
            e, w, ee, ew, ww = (counts @ columns).T
            shift = e / w
            variance = np.maximum(ee - 2 * shift * ew + shift**2 * ww, 0.0)
            spread = variance > _ROUNDING * ee
            found.append(shift[spread] * w[spread] / np.sqrt(variance[spread]))
        self.t_star = np.sort(np.concatenate(found))
        self.ratio, self.se = ratio, se

    @classmethod
    def of(
        cls, extra: np.ndarray, weights: np.ndarray, resamples: int, rng: np.random.Generator
    ) -> BootstrapT:
        """The test of documents' extra losses and sizes, at their own ratio and spread."""
        total = float(weights.sum())
        ratio = float(extra.sum()) / total
        residuals = extra - ratio * weights
        se = math.sqrt(float(np.sum(residuals**2))) / total
        return cls(ratio, se, residuals, weights, resamples, rng)

    def pvalue(self, null: float, side: Side = Side.BEYOND) -> float:
        """One-sided p of H0: R <= null (BEYOND) or R >= null (WITHIN)."""
        size = self.t_star.size
        t = (self.ratio - null) / self.se
        # Resamples at least as far beyond R as R is beyond the null, counted with the data.
        if Side(side) is Side.BEYOND:
            beyond = size - int(np.searchsorted(self.t_star, t))
        else:
            beyond = int(np.searchsorted(self.t_star, t, side="right"))
        return float((1 + beyond) / (1 + size))

    def bounds(self, alpha: float) -> tuple[float, float]:
        """Where each side's one-sided p reaches alpha / 2 (infinite with too few resamples)."""
        k = _tail_count(alpha, self.t_star.size)
        if k < 0:
            return (-math.inf, math.inf)
        return (
            self.ratio - self.se * float(self.t_star[-1 - k]),
            self.ratio - self.se * float(self.t_star[k]),
        )
