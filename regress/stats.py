"""The statistics of the gate: pure functions of counts and per-document values.

Conventions, shared with `compare.py` (DESIGN.md): over n paired examples, b counts those the
baseline got right and the candidate wrong, c those the baseline got wrong and the candidate
right. Δ = (c - b) / n is the candidate's accuracy minus the baseline's, and a drop is -Δ.
Every test here is one-sided, for "the candidate is worse".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from scipy import optimize, special
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests


class Test(StrEnum):
    """The McNemar variant used for binary (right/wrong) units."""

    MIDP = "midp"
    """Exact conditional test with the mid-p correction: close to nominal size, more power
    than the exact test (Fagerland, Lydersen & Laake 2013, BMC Med Res Methodol 13:91)."""
    EXACT = "exact"
    """Exact conditional binomial test: never exceeds alpha, conservative at small b + c."""
    ASYMPTOTIC = "asymptotic"
    """Normal approximation z = (b - c) / sqrt(b + c), without continuity correction."""


class Correction(StrEnum):
    """Family-wise correction of p-values across the gated units."""

    HOLM = "holm"
    BONFERRONI = "bonferroni"


def mcnemar_pvalue(b: int, c: int, test: Test = Test.MIDP) -> float:
    """One-sided McNemar p-value for "the candidate is worse" (more b than c).

    Under H0 the b + c discordant pairs split evenly, b ~ Binomial(b + c, 1/2). Exact is
    P(X >= b), mid-p is P(X > b) + P(X = b) / 2, asymptotic is the upper normal tail of
    (b - c) / sqrt(b + c). With no discordant pair there is no evidence at all: p = 1.
    """
    if b < 0 or c < 0:
        raise ValueError(f"counts must be non-negative, got b={b}, c={c}")
    test = Test(test)
    m = b + c
    if m == 0:
        return 1.0
    if test is Test.EXACT:
        p = sps.binom.sf(b - 1, m, 0.5)
    elif test is Test.MIDP:
        p = sps.binom.sf(b, m, 0.5) + 0.5 * sps.binom.pmf(b, m, 0.5)
    else:
        p = sps.norm.sf((b - c) / math.sqrt(m))
    return float(min(1.0, p))


def paired_diff_ci(b: int, c: int, n: int, alpha: float = 0.05) -> tuple[float, float]:
    """Two-sided 1 - alpha confidence interval for Δ = (c - b) / n: Tango's score interval.

    Tango (1998, Stat Med 17:891) inverts the score test of H0: Δ = δ, whose variance uses
    the maximum-likelihood cell probabilities constrained to Δ = δ. It needs only b, c and
    n, stays inside [-1, 1], behaves at b = c = 0, and is among the intervals Fagerland,
    Lydersen & Laake (2014, Stat Med 33:2850) recommend for paired proportions.
    With n == 0 nothing is known: the interval is the whole range (-1, 1).
    """
    if n == 0:
        return (-1.0, 1.0)
    if b < 0 or c < 0 or b + c > n:
        raise ValueError(f"need 0 <= b, c and b + c <= n, got b={b}, c={c}, n={n}")
    z = sps.norm.isf(alpha / 2)
    estimate = (c - b) / n
    eps = 1e-12
    # The score statistic decreases in δ, so each limit is the single root on its side.
    lower = -1.0
    if b < n and _tango_score(-1 + eps, b, c, n) > z:
        lower = optimize.brentq(lambda d: _tango_score(d, b, c, n) - z, -1 + eps, estimate)
    upper = 1.0
    if c < n and _tango_score(1 - eps, b, c, n) < -z:
        upper = optimize.brentq(lambda d: _tango_score(d, b, c, n) + z, estimate, 1 - eps)
    return (float(lower), float(upper))


def _tango_score(delta: float, b: int, c: int, n: int) -> float:
    """Tango's score statistic for H0: Δ = delta (positive when the data lie above delta)."""
    # Constrained MLE of P(baseline right, candidate wrong), the root of a quadratic.
    qa = 2 * n
    qb = -b - c + (2 * n - c + b) * delta
    qc = -b * delta * (1 - delta)
    p_b = (math.sqrt(max(qb * qb - 4 * qa * qc, 0.0)) - qb) / (2 * qa)
    variance = n * (2 * p_b + delta * (1 - delta))
    numerator = c - b - n * delta
    if variance <= 0:
        return 0.0 if numerator == 0 else math.copysign(math.inf, numerator)
    return numerator / math.sqrt(variance)


def adjust_pvalues(pvalues: Sequence[float], method: Correction = Correction.HOLM) -> list[float]:
    """Family-wise adjusted p-values (Holm or Bonferroni), in the input order."""
    if len(pvalues) == 0:
        return []
    _, adjusted, _, _ = multipletests(list(pvalues), method=str(method))
    return [float(p) for p in adjusted]


def _z_alpha(alpha: float, one_sided: bool) -> float:
    return float(sps.norm.isf(alpha if one_sided else alpha / 2))


def connor_n(
    discordance: float,
    drop: float,
    alpha: float = 0.05,
    power: float = 0.8,
    one_sided: bool = True,
    units: int = 1,
) -> int:
    """Examples needed to detect `drop` with McNemar's test (Connor 1987, Biometrics 43:207).

    n = (z_a sqrt(ψ) + z_b sqrt(ψ - δ²))² / δ², with ψ = (b + c) / n the discordant
    proportion and δ the drop. With `units` gated units under Bonferroni or Holm, the plan is
    made at alpha / units (Holm's first step, the conservative case).
    """
    if not 0 < drop <= discordance <= 1:
        raise ValueError(f"need 0 < drop <= discordance <= 1, got {drop}, {discordance}")
    z_a = _z_alpha(alpha / units, one_sided)
    z_b = float(sps.norm.ppf(power))
    root = z_a * math.sqrt(discordance) + z_b * math.sqrt(discordance - drop * drop)
    return math.ceil(root * root / (drop * drop))


def mcnemar_power(
    n: int, discordance: float, drop: float, alpha: float = 0.05, one_sided: bool = True
) -> float:
    """Approximate power of McNemar's test at n examples: Connor's formula solved for power."""
    if not 0 < drop <= discordance <= 1:
        raise ValueError(f"need 0 < drop <= discordance <= 1, got {drop}, {discordance}")
    spread = math.sqrt(discordance - drop * drop)
    z_a = _z_alpha(alpha, one_sided)
    shift = drop * math.sqrt(n) - z_a * math.sqrt(discordance)
    if spread == 0:
        return 1.0 if shift > 0 else 0.0
    return float(sps.norm.cdf(shift / spread))


def choice_kl(base_logliks: np.ndarray, cand_logliks: np.ndarray) -> np.ndarray:
    """Row-wise KL(base || cand) between softmaxes of summed log-likelihoods over choices.

    Takes arrays of shape (examples, choices); returns one divergence (nats) per example.
    """
    log_p = special.log_softmax(np.asarray(base_logliks, dtype=float), axis=-1)
    log_q = special.log_softmax(np.asarray(cand_logliks, dtype=float), axis=-1)
    return np.sum(np.exp(log_p) * (log_p - log_q), axis=-1)


def kl_divergence_choices(base_logliks: Sequence[float], cand_logliks: Sequence[float]) -> float:
    """KL(base || cand), in nats, of one example's distributions over its choices."""
    if len(base_logliks) != len(cand_logliks):
        raise ValueError(f"{len(base_logliks)} baseline choices vs {len(cand_logliks)} candidate")
    return float(choice_kl(np.asarray([base_logliks]), np.asarray([cand_logliks]))[0])


def top1_agreement(base_logliks: np.ndarray, cand_logliks: np.ndarray) -> np.ndarray:
    """Row-wise whether both sides put their highest log-likelihood on the same choice."""
    return np.argmax(base_logliks, axis=-1) == np.argmax(cand_logliks, axis=-1)


@dataclass(frozen=True)
class ContinuousTest:
    """A paired comparison of a corpus perplexity, exp(-Σ loglik / Σ weight) (lower is better)."""

    n: int
    """Documents paired."""
    baseline: float
    """The baseline's corpus perplexity."""
    candidate: float
    """The candidate's corpus perplexity."""
    pvalue: float
    """One-sided Wilcoxon signed-rank p for "the candidate's log-likelihood is lower"."""

    @property
    def relative_change(self) -> float:
        """Candidate / baseline - 1: positive when the candidate is worse."""
        return self.candidate / self.baseline - 1


def paired_relative_test(
    base_logliks: Sequence[float], cand_logliks: Sequence[float], weights: Sequence[float]
) -> ContinuousTest:
    """Compare per-document log-likelihoods of the same documents (perplexity-like tasks).

    `weights` is each document's size in the perplexity's unit (words for word perplexity,
    bytes for byte perplexity). The test is Wilcoxon's signed-rank test on the per-document
    log-likelihood per unit, one-sided for "the candidate is lower". A paired t test would be
    dominated by the few documents whose log-likelihood moves a lot under quantization
    (heavy tails, over tens of documents); the signed-rank test keeps its size without
    normality and asks whether the candidate is worse on most documents, while the relative
    threshold on the corpus perplexity judges how much.
    """
    base = np.asarray(base_logliks, dtype=float)
    cand = np.asarray(cand_logliks, dtype=float)
    w = np.asarray(weights, dtype=float)
    if not base.shape == cand.shape == w.shape:
        raise ValueError("baseline, candidate and weights must have one value per document")
    if base.size == 0:
        return ContinuousTest(n=0, baseline=math.nan, candidate=math.nan, pvalue=1.0)
    total = w.sum()
    diffs = (base - cand) / w
    pvalue = 1.0
    # With every difference zero (an A/A run) the signed-rank test is undefined: no evidence.
    if np.any(diffs != 0):
        pvalue = float(sps.wilcoxon(diffs, alternative="greater", zero_method="wilcox").pvalue)
    return ContinuousTest(
        n=int(base.size),
        baseline=math.exp(-base.sum() / total),
        candidate=math.exp(-cand.sum() / total),
        pvalue=pvalue,
    )


@dataclass(frozen=True)
class MeanTest:
    """A paired comparison of per-example scores in [0, 1] (higher is better)."""

    n: int
    delta: float
    """Mean of candidate - baseline."""
    ci: tuple[float, float]
    """Two-sided 95% t interval for delta."""
    pvalue: float
    """One-sided paired t test p for "the candidate's mean is lower"."""
    sd: float
    """Standard deviation of the per-example differences."""


def paired_mean_test(
    base_values: Sequence[float], cand_values: Sequence[float], alpha: float = 0.05
) -> MeanTest:
    """Paired t test and 1 - alpha interval for a mean score (e.g. TruthfulQA MC2's mass).

    A t test rather than a rank test here: the scores are bounded in [0, 1], so their mean
    difference is close to normal at the sizes the gate requires (min_examples), and the
    t test judges the very mean that max_drop thresholds, with a matching interval.
    """
    diffs = np.asarray(cand_values, dtype=float) - np.asarray(base_values, dtype=float)
    n = int(diffs.size)
    if n == 0:
        return MeanTest(n=0, delta=0.0, ci=(-1.0, 1.0), pvalue=1.0, sd=0.0)
    delta = float(diffs.mean())
    sd = float(diffs.std(ddof=1)) if n > 1 else 0.0
    # No spread (identical runs, or one example) leaves no noise to test against.
    if sd == 0.0:
        return MeanTest(
            n=n, delta=delta, ci=(delta, delta), pvalue=1.0 if delta >= 0 else 0.0, sd=0.0
        )
    result = sps.ttest_1samp(diffs, 0.0, alternative="less")
    low, high = sps.ttest_1samp(diffs, 0.0).confidence_interval(1 - alpha)
    return MeanTest(
        n=n, delta=delta, ci=(float(low), float(high)), pvalue=float(result.pvalue), sd=sd
    )


def paired_mean_n(
    sd: float, drop: float, alpha: float = 0.05, power: float = 0.8, units: int = 1
) -> int:
    """Examples a one-sided paired test needs to detect a mean drop: ((z_a + z_b) sd / drop)²."""
    if drop <= 0 or sd < 0:
        raise ValueError(f"need drop > 0 and sd >= 0, got {drop}, {sd}")
    z = _z_alpha(alpha / units, one_sided=True) + float(sps.norm.ppf(power))
    return max(2, math.ceil((z * sd / drop) ** 2))
