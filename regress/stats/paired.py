"""The statistics of the gate: pure functions of counts and per-document values.

Conventions, shared with `compare.py` (DESIGN.md): over n paired examples, b counts those the
baseline got right and the candidate wrong, c those the baseline got wrong and the candidate
right. Δ = (c - b) / n is the candidate's accuracy minus the baseline's, and a drop is -Δ.
Every test here is one-sided, for "the candidate is worse": against no change, or against a
margin (the candidate is worse by more than the margin). Resampling tests take an explicit
seed, so a rerun of the gate gives the same report.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import overload

import numpy as np
from numpy.typing import ArrayLike
from scipy import optimize, special
from scipy import stats as sps

RESAMPLES = 9999
"""Bootstrap or sign-flip resamples per test: the p-value's Monte Carlo error is below 0.003."""
SEED = 20261201
"""Every resampling test starts from this seed: the same records give the same report."""


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


@overload
def mcnemar_pvalue(b: int, c: int, test: Test = ...) -> float: ...
@overload
def mcnemar_pvalue(b: np.ndarray, c: np.ndarray, test: Test = ...) -> np.ndarray: ...
def mcnemar_pvalue(b: ArrayLike, c: ArrayLike, test: Test = Test.MIDP) -> float | np.ndarray:
    """One-sided McNemar p-value for "the candidate is worse" (more b than c).

    Under H0 the b + c discordant pairs split evenly, b ~ Binomial(b + c, 1/2). Exact is
    P(X >= b), mid-p is P(X > b) + P(X = b) / 2, asymptotic is the upper normal tail of
    (b - c) / sqrt(b + c). With no discordant pair there is no evidence at all: p = 1.
    Takes counts or arrays of counts (a float for scalars).
    """
    b, c = np.asarray(b), np.asarray(c)
    if np.any(b < 0) or np.any(c < 0):
        raise ValueError(f"counts must be non-negative, got b={b}, c={c}")
    test = Test(test)
    m = b + c
    with np.errstate(divide="ignore", invalid="ignore"):
        if test is Test.EXACT:
            p = sps.binom.sf(b - 1, m, 0.5)
        elif test is Test.MIDP:
            p = sps.binom.sf(b, m, 0.5) + 0.5 * sps.binom.pmf(b, m, 0.5)
        else:
            p = sps.norm.sf((b - c) / np.sqrt(m))
    return _scalar_or_array(np.where(m == 0, 1.0, np.minimum(1.0, p)))


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

    def score(delta: float) -> float:
        return float(tango_score(delta, b, c, n))

    # The score statistic decreases in δ, so each limit is the single root on its side.
    lower = -1.0
    if b < n and score(-1 + eps) > z:
        lower = optimize.brentq(lambda d: score(d) - z, -1 + eps, estimate)
    upper = 1.0
    if c < n and score(1 - eps) < -z:
        upper = optimize.brentq(lambda d: score(d) + z, estimate, 1 - eps)
    return (float(lower), float(upper))


def tango_score(delta: ArrayLike, b: ArrayLike, c: ArrayLike, n: ArrayLike) -> np.ndarray:
    """Tango's score statistic for H0: Δ = delta (positive when the data lie above delta).

    Element-wise over arrays, so the operating characteristics can be enumerated exactly.
    """
    # Broadcast by the arithmetic itself: the exact tests call this thousands of times on
    # small arrays, where np.broadcast_arrays and np.errstate cost more than the sums.
    delta, b, c, n = (np.asarray(x, dtype=float) for x in (delta, b, c, n))
    p_b = constrained_p_b(delta, b / n, c / n)
    variance = n * (2 * p_b + delta * (1 - delta))
    numerator = c - b - n * delta
    positive = variance > 0
    score = numerator / np.sqrt(np.where(positive, variance, 1.0))
    degenerate = np.where(numerator == 0, 0.0, np.copysign(np.inf, numerator))
    return np.where(positive, score, degenerate)


def constrained_p_b(delta: ArrayLike, p_b: ArrayLike, p_c: ArrayLike) -> np.ndarray:
    """Maximum-likelihood P(baseline right, candidate wrong) under Δ = delta.

    The root of Tango's quadratic, from the observed (or expected) shares b / n and c / n.
    """
    delta, p_b, p_c = (np.asarray(x, dtype=float) for x in (delta, p_b, p_c))
    qb = -p_b - p_c + (2 - p_c + p_b) * delta
    qc = -p_b * delta * (1 - delta)
    return np.asarray((np.sqrt(np.maximum(qb * qb - 8 * qc, 0.0)) - qb) / 4)


def _scalar_or_array(values: np.ndarray) -> float | np.ndarray:
    return float(values) if np.ndim(values) == 0 else values


def adjust_pvalues(pvalues: Sequence[float], method: Correction = Correction.HOLM) -> list[float]:
    """Family-wise adjusted p-values (Holm or Bonferroni), in the input order."""
    if len(pvalues) == 0:
        return []
    row = np.asarray([list(pvalues)], dtype=float)
    if Correction(method) is Correction.HOLM:
        return [float(p) for p in holm_rows(row)[0]]
    return [float(p) for p in np.minimum(1.0, row[0] * float(len(pvalues)))]


def family_levels(
    pvalues: Sequence[float], alpha: float, method: Correction = Correction.HOLM
) -> list[float]:
    """The level each hypothesis of a family is tested at, in the input order.

    A hypothesis is rejected (its adjusted p below alpha) exactly when its raw p is below its
    level, so a bound computed at that level agrees with the decision. Bonferroni: alpha / k.
    Holm steps down alpha / k, alpha / (k - 1), ... and stops at the first hypothesis it keeps:
    that one and every later one are held to the level it failed, which their p-values, no
    smaller than its own, fail too.
    """
    k = len(pvalues)
    if Correction(method) is Correction.BONFERRONI:
        return [alpha / k] * k
    order = np.argsort(np.asarray(pvalues, dtype=float), kind="stable")
    levels = [0.0] * k
    stop: int | None = None
    for rank, i in enumerate(order):
        step = rank if stop is None else stop
        levels[i] = alpha / (k - step)
        if stop is None and pvalues[i] >= levels[i]:
            stop = rank
    return levels


def holm_rows(pvalues: np.ndarray) -> np.ndarray:
    """Holm-adjusted p-values of each run (row) at once: the gate's one Holm.

    Row-wise, so thousands of simulated runs (regress.stats.operating, regress.proxy.selftest)
    adjust in one call; tests check it against statsmodels' `multipletests` to the bit.
    """
    k = pvalues.shape[1]
    order = np.argsort(pvalues, axis=1, kind="stable")
    ranked = np.take_along_axis(pvalues, order, axis=1) * (k - np.arange(k))
    ranked = np.minimum(1.0, np.maximum.accumulate(ranked, axis=1))
    adjusted = np.empty_like(ranked)
    np.put_along_axis(adjusted, order, ranked, axis=1)
    return adjusted


def wilson_interval(count: int, nobs: int, alpha: float = 0.05) -> tuple[float, float]:
    """Wilson's score interval for a binomial proportion (Wilson 1927), two-sided at 1 - alpha;
    the same floats as statsmodels' `proportion_confint(method="wilson")`."""
    crit = -float(special.ndtri(alpha / 2))
    q = count * 1.0 / nobs
    crit2 = crit**2
    denom = 1 + crit2 / nobs
    center = (q + crit2 / (2 * nobs)) / denom
    dist = crit * math.sqrt(q * (1.0 - q) / nobs + crit2 / (4.0 * nobs**2)) / denom
    # Inside [0, 1] mathematically; clipped for the last bit of rounding, as statsmodels does.
    return max(0.0, center - dist), min(1.0, center + dist)


def choice_kl(base_logliks: np.ndarray, cand_logliks: np.ndarray) -> np.ndarray:
    """Row-wise KL(base || cand) between softmaxes of summed log-likelihoods over choices.

    Takes arrays of shape (examples, choices); returns one divergence (nats) per example.
    """
    log_p = special.log_softmax(np.asarray(base_logliks, dtype=float), axis=-1)
    log_q = special.log_softmax(np.asarray(cand_logliks, dtype=float), axis=-1)
    return np.asarray(np.sum(np.exp(log_p) * (log_p - log_q), axis=-1))


def kl_divergence_choices(base_logliks: Sequence[float], cand_logliks: Sequence[float]) -> float:
    """KL(base || cand), in nats, of one example's distributions over its choices."""
    if len(base_logliks) != len(cand_logliks):
        raise ValueError(f"{len(base_logliks)} baseline choices vs {len(cand_logliks)} candidate")
    return float(choice_kl(np.asarray([base_logliks]), np.asarray([cand_logliks]))[0])


def top1_agreement(base_logliks: np.ndarray, cand_logliks: np.ndarray) -> np.ndarray:
    """Row-wise whether both sides put their highest log-likelihood on the same choice."""
    return np.asarray(np.argmax(base_logliks, axis=-1) == np.argmax(cand_logliks, axis=-1))


@dataclass(frozen=True)
class MeanTest:
    """A paired comparison of per-example scores in [0, 1] (higher is better)."""

    n: int
    delta: float
    """Mean of candidate - baseline."""
    ci: tuple[float, float]
    """Two-sided 95% bootstrap-t interval for delta."""
    pvalue: float
    """One-sided bootstrap-t p for "the candidate's mean is lower" (H0: delta >= 0)."""
    margin_pvalue: float
    """One-sided bootstrap-t p for "lower by more than the margin" (H0: delta >= -margin)."""
    se: float
    """Standard error of delta: the differences' standard deviation / sqrt(n)."""


def paired_mean_test(
    base_values: ArrayLike,
    cand_values: ArrayLike,
    margin: float = 0.0,
    alpha: float = 0.05,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> MeanTest:
    """Bootstrap-t test and 1 - alpha interval for a mean score (e.g. TruthfulQA MC2's mass).

    A paired t test assumes a symmetric mean: with right-skewed differences (rare large gains)
    its one-sided size reaches 0.09-0.11 at n = 100. The bootstrap-t (Efron & Tibshirani 1993,
    ch. 12; Hall 1992) resamples the studentized mean, which carries the skew, and is
    second-order accurate for one-sided tests. One set of resamples gives both p-values and
    the interval.
    """
    diffs = np.asarray(cand_values, dtype=float) - np.asarray(base_values, dtype=float)
    n = int(diffs.size)
    if n == 0:
        return MeanTest(n=0, delta=0.0, ci=(-1.0, 1.0), pvalue=1.0, margin_pvalue=1.0, se=0.0)
    delta = float(diffs.mean())
    se = float(diffs.std(ddof=1) / math.sqrt(n)) if n > 1 else 0.0
    # No spread (identical runs, or one example) leaves no noise to test against.
    if se == 0.0:
        return MeanTest(
            n=n,
            delta=delta,
            ci=(delta, delta),
            pvalue=float(delta >= 0),
            margin_pvalue=float(delta >= -margin),
            se=0.0,
        )
    t_star = _bootstrap_t(diffs, resamples, np.random.default_rng(seed))

    def pvalue(null: float) -> float:
        return float((1 + np.sum(t_star <= (delta - null) / se)) / (1 + t_star.size))

    low, high = np.quantile(t_star, [alpha / 2, 1 - alpha / 2])
    return MeanTest(
        n=n,
        delta=delta,
        ci=(delta - float(high) * se, delta - float(low) * se),
        pvalue=pvalue(0.0),
        margin_pvalue=pvalue(-margin),
        se=se,
    )


def bootstrap_t(values: ArrayLike, resamples: int = RESAMPLES, seed: int = SEED) -> np.ndarray:
    """Studentized means of `values`' resamples: the draws `paired_mean_test` uses."""
    return _bootstrap_t(np.asarray(values, dtype=float), resamples, np.random.default_rng(seed))


def _bootstrap_t(values: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Studentized means of resamples, (mean* - mean) / se*, dropping those without spread."""
    n = values.size
    mean = values.mean()
    chunk = max(1, 2_000_000 // n)
    found = []
    for start in range(0, resamples, chunk):
        sample = values[rng.integers(0, n, size=(min(chunk, resamples - start), n))]
        se = sample.std(axis=1, ddof=1) / math.sqrt(n)
        spread = se > 0
        found.append((sample.mean(axis=1)[spread] - mean) / se[spread])
    return np.concatenate(found)
