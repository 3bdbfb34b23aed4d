"""An anytime-valid e-process for the paired margin test: betting on each example's flip.

Each paired example is d = +1 (the baseline was right, the candidate wrong), -1 (the reverse)
or 0, and the drop is E[d]. To show the drop beyond a margin δ (BEYOND, H0: E[d] <= δ) a
gambler stakes λ (d - δ) on every example; to show it within (WITHIN, H0: E[d] >= δ), λ (δ - d).
Under H0 each factor 1 + λ (d - δ) has expectation at most 1 whatever came before, so the
product is a nonnegative supermartingale and Ville's inequality bounds the chance it ever
reaches 1/α by α: at every example, at any looks, and for a run continued later (its wealth
just keeps multiplying). The same idea as regress.stats.bounded_mean's betting test (Waudby-
Smith & Ramdas 2024), for three values.

The stake is not learnt from the data but mixed: the wealth is the average over BETS, a fixed
grid of stakes, of the constant-stake products. An average of supermartingales is one, and
with a constant stake the product depends on the counts alone,

    W = mean_λ (1 + λ(1 - δ))^b (1 - λ(1 + δ))^c (1 - λδ)^(n - b - c)    (BEYOND),

so the paired counts (b, c) are all the e-process needs: it can be stored, continued, and its
operating characteristics computed exactly by the same trinomial recursion as
regress.stats.operating.stopping_law (`eprocess_law`). A plug-in stake (WSR's) would depend
on the examples' order, and its law could only be simulated.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import signal, special
from scipy import stats as sps

from regress.stats.margin import Side
from regress.stats.operating import MASS, StoppingLaw
from regress.stats.spending import cut

BETS = tuple(float(f) for f in np.geomspace(0.02, 0.9, 12))
"""Stakes mixed, as shares of the largest stake that keeps wealth positive: one geometric grid
from the Kelly stake of a half-flipped unit near its margin (about 0.04) to that of a Q8_0
flipping 1% (capped near 1). Twelve cost log 12 of wealth against knowing the best stake."""


def log_wealth(
    b: np.ndarray | int, c: np.ndarray | int, n: int, margin: float, side: Side
) -> np.ndarray:
    """log W of the mixture e-process after n paired examples with counts (b, c), testing
    H0 drop <= margin (BEYOND) or drop >= margin (WITHIN). Broadcasts over b and c."""
    b = np.asarray(b, dtype=float)
    c = np.asarray(c, dtype=float)
    rest = n - b - c
    if Side(side) is Side.BEYOND:
        # Stakes on d - δ: +1 - δ when the candidate lost an answer, -1 - δ when it gained one.
        top = 1.0 / (1.0 + margin)
        up, down, still = 1.0 - margin, -(1.0 + margin), -margin
    else:
        top = 1.0 / (1.0 - margin)
        up, down, still = -(1.0 - margin), 1.0 + margin, margin
    terms = [
        b * math.log1p(lam * up) + c * math.log1p(lam * down) + rest * math.log1p(lam * still)
        for lam in (share * top for share in BETS)
    ]
    return np.asarray(special.logsumexp(np.stack(terms), axis=0) - math.log(len(BETS)))


def eprocess_pvalue(b: int, c: int, n: int, margin: float, side: Side) -> float:
    """The anytime-valid p-value 1 / W at counts (b, c) of n (at most 1). Valid at any look;
    over several looks the smallest so far is (1 / the largest wealth)."""
    if b < 0 or c < 0 or b + c > n:
        raise ValueError(f"need 0 <= b, c and b + c <= n, got b={b}, c={c}, n={n}")
    return float(min(1.0, math.exp(-float(log_wealth(b, c, n, margin, side)))))


def eprocess_law(
    n: int,
    drop: float,
    discordance: float,
    looks: tuple[float, ...],
    alpha: float = 0.05,
    margin: float = 0.02,
) -> StoppingLaw:
    """A unit gated by the e-process at `looks` (shares of n): its exact verdict rates and
    stopping law, REGRESSION when the BEYOND wealth reaches 1/alpha, PASS when the WITHIN one
    does. The paired counts' law is carried look to look as in stopping_law."""
    if not 0 < discordance <= 1 or abs(drop) > discordance:
        raise ValueError(f"need 0 < discordance <= 1 and |drop| <= it, got {drop}, {discordance}")
    sizes = tuple(cut(n, t) for t in looks)
    bar = math.log(1.0 / alpha)
    law = np.ones((1, 1))
    before, stopped, regressed, passed = 0, [], 0.0, 0.0
    for size in sizes:
        law = signal.fftconvolve(law, _counts(size - before, drop, discordance))
        law = np.clip(law, 0.0, None)
        before = size
        # Only counts with mass are judged: the rest moves no rate by more than MASS.
        b, c = np.nonzero(law > MASS)
        worse = log_wealth(b, c, size, margin, Side.BEYOND) >= bar
        within = ~worse & (log_wealth(b, c, size, margin, Side.WITHIN) >= bar)
        regressed += float(law[b[worse], c[worse]].sum())
        passed += float(law[b[within], c[within]].sum())
        done = worse | within
        stopped.append(float(law[b[done], c[done]].sum()))
        law[b[done], c[done]] = 0.0
    return StoppingLaw(sizes, tuple(stopped), regressed, passed)


def _counts(steps: int, drop: float, discordance: float) -> np.ndarray:
    """P(b, c) over `steps` new examples: m = b + c ~ Binomial(steps, discordance), b given m
    ~ Binomial(m, (discordance + drop) / 2 discordance)."""
    b, c = np.indices((steps + 1, steps + 1))
    share = (discordance + drop) / (2 * discordance)
    return np.asarray(
        sps.binom.pmf(b + c, steps, discordance) * sps.binom.pmf(b, b + c, share), dtype=float
    )
