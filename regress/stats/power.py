"""Power, minimum detectable effect and the n that would decide, for the rule a unit uses.

Normal approximations to the tests in `regress.stats.paired`, each checked by simulation in
`tests/test_stats.py` (power at the planned n within 0.80 +- 0.04):
- accuracy, `change` rule: McNemar's test (Connor 1987, Biometrics 43:207) *and* the observed
  drop beyond max_drop, two conditions on nearly the same statistic, so the power is the
  smaller of the two probabilities;
- accuracy, `margin` rule: Tango's score test at Δ = -max_drop, whose null variance comes
  from the constrained maximum-likelihood cell probabilities (Tango 1998, Stat Med 17:891);
- scores and corpus log-ratios: a shift of a normal estimate with a known standard error.

A drop δ needs at least δ of the examples to flip, so every plan uses the discordance
max(ψ, δ), ψ being the observed (or assumed) share of flipped examples. Alpha is per unit:
with k gated units, callers pass alpha / k (Holm's first step, the conservative case).
"""

from __future__ import annotations

import math

from scipy import optimize
from scipy import stats as sps

from regress.stats.decision import Rule
from regress.stats.paired import constrained_p_b


def _normal_power(shift: float, spread: float) -> float:
    """P(N(shift, spread²) > 0): the power of a one-sided test whose margin is `shift`."""
    if spread <= 0:
        return 1.0 if shift > 0 else 0.0
    return float(sps.norm.cdf(shift / spread))


def _spreads(discordance: float, drop: float, max_drop: float) -> tuple[float, float, float]:
    """Discordance used, sd of one pair's c - b under the drop, and under the margin's H0."""
    psi = min(1.0, max(discordance, drop))
    spread = math.sqrt(max(psi - drop * drop, 0.0))
    p_b = float(constrained_p_b(-max_drop, (psi + drop) / 2, (psi - drop) / 2))
    null_spread = math.sqrt(max(2 * p_b - max_drop - max_drop * max_drop, 0.0))
    return psi, spread, null_spread


def accuracy_power(
    n: int, discordance: float, drop: float, max_drop: float, rule: Rule, alpha: float
) -> float:
    """Approximate P(REGRESSION) of an accuracy unit of n examples at a true `drop`."""
    psi, spread, null_spread = _spreads(discordance, drop, max_drop)
    z = float(sps.norm.isf(alpha))
    root = math.sqrt(n)
    if Rule(rule) is Rule.MARGIN:
        return _normal_power(root * (drop - max_drop) - z * null_spread, spread)
    significant = _normal_power(root * drop - z * math.sqrt(psi), spread)
    return min(significant, _normal_power(root * (drop - max_drop), spread))


def accuracy_n(
    discordance: float, drop: float, max_drop: float, rule: Rule, alpha: float, power: float
) -> int | None:
    """Examples an accuracy unit needs for `power` at a true `drop`; None if drop <= max_drop.

    At max_drop 0 both rules give Connor's n for McNemar's test.
    """
    if drop <= max_drop:
        return None
    psi, spread, null_spread = _spreads(discordance, drop, max_drop)
    z, z_power = float(sps.norm.isf(alpha)), float(sps.norm.ppf(power))
    if Rule(rule) is Rule.MARGIN:
        return math.ceil(((z * null_spread + z_power * spread) / (drop - max_drop)) ** 2)
    connor = ((z * math.sqrt(psi) + z_power * spread) / drop) ** 2
    beyond = (z_power * spread / (drop - max_drop)) ** 2
    return math.ceil(max(connor, beyond))


def pass_n(discordance: float, max_drop: float, alpha: float, power: float) -> int | None:
    """Examples an accuracy unit needs to show its drop within `max_drop` with `power`, when
    the candidate changes nothing but flips `discordance` of the answers both ways.

    The margin test's mirror image (a PASS test rejects H0 "drop >= max_drop"): the same
    spreads, the distance max_drop to cover from the other side. None when max_drop is 0
    (no n shows a drop below nothing).
    """
    if max_drop <= 0:
        return None
    _, spread, null_spread = _spreads(discordance, 0.0, max_drop)
    z, z_power = float(sps.norm.isf(alpha)), float(sps.norm.ppf(power))
    return math.ceil(((z * null_spread + z_power * spread) / max_drop) ** 2)


def accuracy_mde(
    n: int, discordance: float, max_drop: float, rule: Rule, alpha: float, power: float
) -> float | None:
    """The smallest true drop an accuracy unit of n examples flags with `power`.

    None when no drop up to 100 points would be flagged that often (n too small).
    """
    if n <= 0:
        return None

    def short(drop: float) -> float:
        return accuracy_power(n, discordance, drop, max_drop, rule, alpha) - power

    low = max_drop + 1e-9
    if short(1.0) < 0:
        return None
    if short(low) >= 0:
        return low
    return float(optimize.brentq(short, low, 1.0, xtol=1e-7))


def shift_mde(se: float, threshold: float, rule: Rule, alpha: float, power: float) -> float:
    """Smallest true shift of a normal estimate with standard error `se` flagged with `power`.

    Scores (threshold max_drop) and corpus log-ratios (threshold log(1 + increase)).
    """
    z, z_power = float(sps.norm.isf(alpha)), float(sps.norm.ppf(power))
    if Rule(rule) is Rule.MARGIN:
        return threshold + (z + z_power) * se
    return max((z + z_power) * se, threshold + z_power * se)


def shift_n(
    sd: float, drop: float, threshold: float, rule: Rule, alpha: float, power: float
) -> int | None:
    """Examples a mean of per-example differences (sd `sd`) needs for `power` at `drop`."""
    if drop <= threshold:
        return None
    z, z_power = float(sps.norm.isf(alpha)), float(sps.norm.ppf(power))
    if Rule(rule) is Rule.MARGIN:
        needed = ((z + z_power) * sd / (drop - threshold)) ** 2
    else:
        needed = max(((z + z_power) * sd / drop) ** 2, (z_power * sd / (drop - threshold)) ** 2)
    return max(2, math.ceil(needed))
