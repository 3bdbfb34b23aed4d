"""Estimate and test a full suite's accuracy change from a stratified sample of it.

A proxy baseline (regress.core.proxy_design) holds, per stratum h of a unit, a simple random
sample of n_h of the parent suite's N_h examples. With d = candidate right - baseline right per
example (-1, 0 or 1), b_h and c_h the stratum's sampled regressions and improvements, and
W_h = N_h / N:

- Δ̂ = Σ W_h (c_h - b_h) / n_h is design-unbiased for the parent suite's Δ (the stratified,
  or Horvitz-Thompson, estimator: every example weighs 1 / its inclusion probability n_h / N_h).
- Its design variance, as an estimate of the parent suite's own Δ, is
  V_design = Σ W_h² (1 - n_h / N_h) s_h² / n_h (Cochran 1977, 5.3), s_h² the stratum's sample
  variance of d.
- The gate asks what a plain baseline's gate asks: is the model worse on the population the
  suite samples, not only on these N questions. Running all N examples has its own sampling
  variance σ² / N; the proxy adds its design variance on top: V = V_design + σ̂² / N, σ̂² the
  estimated per-example variance of d in the suite (within plus between strata). So the
  verdict means the same on a proxy as on its parent, and √(V / (σ̂² / N)) is what the subset
  cost in interval width against running everything.
- The no-drop test is the stratified analogue of McNemar's score test: under H0 each
  discordant pair is equally likely to go either way, so d has mean 0 and variance p_h, the
  stratum's discordance; z = Δ̂ / √V₀ with V₀ the same two terms at those variances. With one
  stratum that takes every example it is McNemar's asymptotic test, (c - b) / √(b + c).
- The margin test (H0: drop <= max_drop) is the Wald test z = (Δ̂ + max_drop) / √V.

Everything is element-wise over leading array axes, so `regress selftest` simulates thousands
of candidates through the very functions the gate uses. Size and coverage are checked by
seeded simulation in tests/test_stratified.py.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

SHRINK = 2.0
"""Pseudo-examples of the unit's discordance added to each stratum's variance (not to Δ̂)."""


@dataclass(frozen=True)
class Moments:
    """Δ̂ and its variances for one or many simulated units (arrays over leading axes)."""

    delta: np.ndarray
    var_design: np.ndarray
    """Variance of Δ̂ around the parent suite's own Δ."""
    var_full: np.ndarray
    """σ̂² / N: the variance running the whole parent suite would have."""
    var_null: np.ndarray
    """Both terms under H0 "no change" (each stratum's d has mean 0, variance p_h)."""

    @property
    def var(self) -> np.ndarray:
        """Variance of Δ̂ around the Δ the suite estimates: design plus the suite's own."""
        return np.asarray(self.var_design + self.var_full)


@dataclass(frozen=True)
class StratifiedTest:
    """One unit of a proxy: the parent suite's estimated change, its intervals and tests."""

    delta: float
    """Estimated Δ (candidate minus baseline accuracy) of the parent suite."""
    ci: tuple[float, float]
    """Interval of the Δ the suite measures (design and the suite's own sampling)."""
    ci_design: tuple[float, float]
    """Interval of the parent suite's own Δ: what running all of it would have shown."""
    se: float
    se_full: float
    """The standard error running every example of the parent suite would have."""
    change_pvalue: float
    """One-sided p of H0 "no drop" (stratified McNemar score test)."""
    margin_pvalue: float
    """One-sided p of H0 "drop <= margin" (Wald)."""

    @property
    def width_ratio(self) -> float | None:
        """How many times wider the interval is than running the whole parent suite."""
        return self.se / self.se_full if self.se_full > 0 else None


def moments(population: ArrayLike, sampled: ArrayLike, b: ArrayLike, c: ArrayLike) -> Moments:
    """Δ̂ and its variances from per-stratum counts; the stratum is the last axis.

    `population` (N_h) and `sampled` (n_h, at least 2) broadcast against `b` and `c`.
    """
    big_n = np.asarray(population, dtype=float)
    n = np.asarray(sampled, dtype=float)
    b, c = np.asarray(b, dtype=float), np.asarray(c, dtype=float)
    if np.any(n < 2) or np.any(n > big_n):
        raise ValueError("every stratum needs 2 <= n_h <= N_h")
    total = big_n.sum(axis=-1)
    weight = big_n / total[..., None] if big_n.ndim else big_n / total
    fpc = 1.0 - n / big_n
    mean = (c - b) / n
    discordance = (b + c) / n
    # A stratum's variance is estimated from its discordance shrunk towards the unit's
    # (SHRINK pseudo-examples): a stratum that happened to sample no flip still says its flips
    # are rare, not absent. Without it, intervals of near-lossless candidates undercover.
    pooled = np.sum(weight * discordance, axis=-1)[..., None]
    shrunk = (b + c + SHRINK * pooled) / (n + SHRINK)
    s2 = np.maximum(shrunk - mean**2, 0.0) * n / (n - 1)
    delta = np.sum(weight * mean, axis=-1)
    var_design = np.sum(weight**2 * fpc * s2 / n, axis=-1)
    between = np.sum(weight * (mean - delta[..., None]) ** 2, axis=-1)
    sigma2 = np.sum(weight * s2, axis=-1) + between
    var_full = sigma2 / total
    var_null = (
        np.sum(weight**2 * fpc * discordance / n, axis=-1)
        + np.sum(weight * discordance, axis=-1) / total
    )
    return Moments(delta, var_design, var_full, var_null)


def pvalues(m: Moments, margin: float) -> tuple[np.ndarray, np.ndarray]:
    """(no-drop p, drop-beyond-margin p), one-sided for "the candidate is worse"."""
    with np.errstate(divide="ignore", invalid="ignore"):
        z_change = m.delta / np.sqrt(m.var_null)
        z_margin = (m.delta + margin) / np.sqrt(m.var)
    change = np.where(m.var_null > 0, sps.norm.cdf(z_change), 1.0)
    shifted = m.delta + margin
    degenerate = np.where(shifted < 0, 0.0, 1.0)
    return change, np.where(m.var > 0, sps.norm.cdf(z_margin), degenerate)


def upper_drop(m: Moments, alpha: float = 0.05) -> np.ndarray:
    """The upper end of the (1 - alpha) interval of the drop (-Δ)."""
    return np.asarray(-m.delta + sps.norm.isf(alpha / 2) * np.sqrt(m.var))


def stratified_test(
    population: ArrayLike,
    sampled: ArrayLike,
    b: ArrayLike,
    c: ArrayLike,
    margin: float,
    alpha: float = 0.05,
) -> StratifiedTest:
    """Estimate, intervals and both tests of one unit from its strata's counts."""
    m = moments(population, sampled, b, c)
    change_p, margin_p = pvalues(m, margin)
    z = sps.norm.isf(alpha / 2)
    delta, se, se_design = float(m.delta), float(np.sqrt(m.var)), float(np.sqrt(m.var_design))
    return StratifiedTest(
        delta=delta,
        ci=(max(-1.0, delta - z * se), min(1.0, delta + z * se)),
        ci_design=(max(-1.0, delta - z * se_design), min(1.0, delta + z * se_design)),
        se=se,
        se_full=float(np.sqrt(m.var_full)),
        change_pvalue=float(change_p),
        margin_pvalue=float(margin_p),
    )


def weighted_mean(population: ArrayLike, sampled: ArrayLike, hits: ArrayLike) -> float:
    """The stratified estimate of a share (an accuracy) from hits per stratum."""
    big_n = np.asarray(population, dtype=float)
    return float(np.sum(big_n * np.asarray(hits) / np.asarray(sampled)) / big_n.sum())
