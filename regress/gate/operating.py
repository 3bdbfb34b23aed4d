"""Operating characteristics of the gate's rules: how often each verdict comes, by true drop.

The table of docs/gate.md (section "What the verdicts mean") is
`render_table(operating_table())`, and a test fails when the two differ; regenerate it with
`python -m regress.gate.operating`.

One accuracy unit of n paired examples, with a true drop δ and a share ψ of flipped examples:
(b, c, rest) ~ Multinomial(n; (ψ + δ) / 2, (ψ - δ) / 2, 1 - ψ). Every (b, c) is enumerated
and judged by the gate's own tests and decision rules (regress.gate.stats, regress.gate.rules),
so the probabilities are exact, not simulated. The rate of INCONCLUSIVE across several unchanged
units needs Holm's correction across them, so it is simulated, with a fixed seed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as sps

from regress.gate.rules import Rule, inconclusive, regression
from regress.gate.stats import (
    SEED,
    Test,
    holm_rows,
    margin_pvalue,
    mcnemar_pvalue,
    tango_score,
)

ALPHA = 0.05
MAX_DROP = 0.02
DISCORDANCE = 0.15
SIZES = (300, 1000)
DROP_FACTORS = (0.0, 0.5, 1.0, 1.5, 2.5)
"""True drops, as multiples of max_drop."""
CI_ALPHA = 0.05
"""The reports' interval is 95%: INCONCLUSIVE asks whether it reaches beyond max_drop."""


@dataclass(frozen=True)
class OperatingPoint:
    """The verdict probabilities of one unit at one true drop."""

    rule: Rule
    n: int
    drop: float
    regression: float
    """P(REGRESSION)."""
    inconclusive: float
    """P(INCONCLUSIVE)."""


@dataclass(frozen=True)
class NullRate:
    """How often unchanged units give a verdict other than PASS, in seeded simulated runs."""

    rule: Rule
    n: int
    units: int
    runs: int
    inconclusive: float
    """Share of runs with at least one INCONCLUSIVE unit."""
    regression: float
    """Share of runs with at least one REGRESSION unit."""


def verdicts(
    b: np.ndarray,
    c: np.ndarray,
    n: int,
    rule: Rule,
    rule_p: np.ndarray | None = None,
    change_p: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """REGRESSION and INCONCLUSIVE masks of accuracy units with counts (b, c) out of n.

    `rule_p` and `change_p` default to the units' own p-values (one unit, nothing to
    correct); pass Holm-adjusted ones for several units. The 95% Tango interval reaches a drop
    beyond max_drop exactly when the score statistic at Δ = -max_drop is below z(0.975).
    """
    if change_p is None:
        change_p = np.asarray(mcnemar_pvalue(b, c, Test.MIDP))
    if rule_p is None:
        rule_p = margin_pvalue(b, c, n, MAX_DROP) if rule is Rule.MARGIN else change_p
    reaches = tango_score(-MAX_DROP, b, c, n) < sps.norm.isf(CI_ALPHA / 2)
    regressed = regression(rule, ALPHA, rule_p, (b - c) / n, MAX_DROP)
    # Only whether the interval's upper drop passes max_drop matters: 1 stands for "beyond".
    upper = np.where(reaches, 1.0, 0.0)
    return regressed, inconclusive(regressed, ALPHA, change_p, upper, MAX_DROP)


def operating_table(
    sizes: Sequence[int] = SIZES, factors: Sequence[float] = DROP_FACTORS
) -> list[OperatingPoint]:
    """P(REGRESSION) and P(INCONCLUSIVE) for each rule, n and true drop, by enumeration."""
    points = []
    for n in sizes:
        b, c = (grid.ravel() for grid in np.mgrid[0 : n + 1, 0 : n + 1])
        keep = b + c <= n
        b, c = b[keep], c[keep]
        counts = np.stack([b, c, n - b - c], axis=-1)
        for rule in Rule:
            regressed, undecided = verdicts(b, c, n, rule)
            for factor in factors:
                drop = factor * MAX_DROP
                shares = [(DISCORDANCE + drop) / 2, (DISCORDANCE - drop) / 2, 1 - DISCORDANCE]
                pmf = sps.multinomial.pmf(counts, n, shares)
                points.append(
                    OperatingPoint(
                        rule=rule,
                        n=n,
                        drop=drop,
                        regression=float(pmf[regressed].sum()),
                        inconclusive=float(pmf[undecided].sum()),
                    )
                )
    return points


def null_rates(
    n: int = 300, units: int = 3, runs: int = 20_000, seed: int = SEED
) -> list[NullRate]:
    """Runs of `units` unchanged units (Holm across them): how often any is not a PASS."""
    rng = np.random.default_rng(seed)
    shares = [DISCORDANCE / 2, DISCORDANCE / 2, 1 - DISCORDANCE]
    counts = rng.multinomial(n, shares, size=(runs, units))
    b, c = counts[..., 0], counts[..., 1]
    change_raw = np.asarray(mcnemar_pvalue(b, c, Test.MIDP))
    change_p = holm_rows(change_raw)
    rates = []
    for rule in Rule:
        rule_raw = margin_pvalue(b, c, n, MAX_DROP) if rule is Rule.MARGIN else change_raw
        rule_p = holm_rows(rule_raw) if rule is Rule.MARGIN else change_p
        regressed, undecided = verdicts(b, c, n, rule, rule_p, change_p)
        rates.append(
            NullRate(
                rule=rule,
                n=n,
                units=units,
                runs=runs,
                inconclusive=float(undecided.any(axis=1).mean()),
                regression=float(regressed.any(axis=1).mean()),
            )
        )
    return rates


def render_table(points: Sequence[OperatingPoint]) -> str:
    """The Markdown table docs/gate.md shows: one row per rule and n,
    P(REGRESSION) / P(INCONCLUSIVE)."""
    drops = sorted({p.drop for p in points})
    header = ["rule", "n", *(f"drop {d * 100:.0f} pts" if d else "no drop" for d in drops)]
    header = [h.replace(".0 pts", " pts") for h in header]
    lines = [_row(header), _row(["---", "---:", *["---:"] * len(drops)])]
    for rule in Rule:
        for n in sorted({p.n for p in points}):
            cells = {p.drop: p for p in points if p.rule is rule and p.n == n}
            row = [f"`{rule}`", f"{n:,}"]
            row += [f"{cells[d].regression:.3f} / {cells[d].inconclusive:.3f}" for d in drops]
            lines.append(_row(row))
    return "\n".join(lines)


def render_null_rates(rates: Sequence[NullRate]) -> str:
    """docs/gate.md's sentence on INCONCLUSIVE (and REGRESSION) among unchanged units."""
    first = rates[0]
    parts = "; ".join(
        f"`{r.rule}`: at least one INCONCLUSIVE in {r.inconclusive:.1%} of runs, "
        f"at least one REGRESSION in {r.regression:.1%}"
        for r in rates
    )
    return (
        f"{first.units} unchanged units of n = {first.n} ({DISCORDANCE:.0%} of answers flipping "
        f"at random, Holm across them, {first.runs:,} seeded runs): {parts}."
    )


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    """Print docs/gate.md's operating-characteristic table and the unchanged-units sentence."""
    print(render_table(operating_table()))
    print()
    print(render_null_rates(null_rates()))


if __name__ == "__main__":
    main()
