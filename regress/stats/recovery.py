"""Exact operating characteristics of the recovery test (regress.gate.recovery).

The test of "recovery >= 1 - r" is the exact margin test of the paired drop at the margin
r x k / n, where k of the n examples are right on the baseline: its rejection region at that
margin is `rejection_edges`' (b >= edge for BEYOND, b <= edge for WITHIN, per m = b + c). Its
chance of rejecting at true cell probabilities (p11, p10, p01, p00) is then an exact sum over
the multinomial outcomes (k, m, b) that carry mass, with no simulation error: both sides at a
true recovery of exactly 1 - r are its size.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats as sps
from scipy.special import gammaln

from regress.stats.margin import Side, rejection_edges

TAIL = 1e-7
"""Mass left out at each end of k and m (2e-7 at most in all): below what a table prints."""


@dataclass(frozen=True)
class RecoveryPoint:
    """One unit's chance of each verdict of its recovery test at a true state."""

    n: int
    baseline: float
    """True baseline accuracy."""
    discordance: float
    """True share of examples whose answer flips either way."""
    recovery: float
    """True candidate accuracy over the baseline's."""
    max_relative_drop: float
    regression: float
    """P(shown below 1 - max_relative_drop)."""
    passed: float
    """P(shown above it)."""


def recovery_point(
    n: int,
    baseline: float,
    discordance: float,
    recovery: float,
    max_relative_drop: float,
    alpha: float = 0.05,
) -> RecoveryPoint:
    """P(REGRESSION) and P(PASS) of one unit's recovery test, exactly, at a true state.

    The cells: p10 - p01 = the drop = baseline x (1 - recovery), p10 + p01 = discordance;
    a state the cells cannot hold (a discordance below the drop) is refused (ValueError)."""
    drop = baseline * (1 - recovery)
    p10, p01 = (discordance + drop) / 2, (discordance - drop) / 2
    p11, p00 = baseline - p10, 1 - baseline - p01
    if min(p10, p01, p11, p00) < 0:
        raise ValueError("the discordance must hold the drop, within the baseline's accuracy")
    cells = np.array([p11, p10, p01, p00])
    ks = _likely(n, baseline)
    ms = _likely(n, discordance)
    regression = passed = 0.0
    for k in ks:
        margin = max_relative_drop * k / n
        beyond = rejection_edges(n, margin, alpha, Side.BEYOND, ms)
        within = rejection_edges(n, margin, alpha, Side.WITHIN, ms)
        for m, low, high in zip(ms, beyond, within, strict=True):
            b = np.arange(max(0, m - (n - k)), min(m, k) + 1)
            if not len(b):
                continue
            mass = np.exp(_log_multinomial(n, k - b, b, m - b, n - k - (m - b), cells))
            regression += float(mass[b >= low].sum())
            passed += float(mass[b <= high].sum())
    return RecoveryPoint(n, baseline, discordance, recovery, max_relative_drop, regression, passed)


def _likely(n: int, p: float) -> range:
    """The counts a binomial(n, p) takes but for TAIL at each end."""
    low, high = sps.binom.ppf(TAIL, n, p), sps.binom.isf(TAIL, n, p)
    return range(int(max(0, low)), int(min(n, high)) + 1)


def _log_multinomial(
    n: int, n11: np.ndarray, n10: np.ndarray, n01: np.ndarray, n00: np.ndarray, p: np.ndarray
) -> np.ndarray:
    """log P(n11, n10, n01, n00) of a multinomial(n, p), element-wise."""
    counts = np.stack([n11, n10, n01, n00]).astype(float)
    with np.errstate(divide="ignore"):
        logs = np.where(counts > 0, counts * np.log(p)[:, None], 0.0)
    log_p = gammaln(n + 1) - gammaln(counts + 1).sum(axis=0) + logs.sum(axis=0)
    return np.asarray(log_p)
