"""Expected examples of a sequential unit, exact against the normal approximation
(docs/gate.md#sequential-gate).

    .venv/bin/python experiments/sequential_expected_n.py
    .venv/bin/python experiments/sequential_expected_n.py --pool

For the default design (looks at 20/50/100%, obf-early spending), max_drop 2 points,
alpha 0.05: the share of n an accuracy unit expects to use when the candidate changes
nothing, from the gate's exact tests at each look (regress.stats.stopping_law, what `regress
plan` and the `no_early_stop` warning now read) beside the normal approximation they read
before (the margin test's z drift through the design's boundaries). Prints the markdown table
docs/gate.md carries; tests/test_stats_stopping_law.py recomputes its n = 300 and 500 rows.

With `--pool`, instead: the built-in suite's two sizes for an unchanged candidate, the fixed
gate over the embedded default's 500 questions against the default design over the pool of
2,000 (P(PASS), expected and median examples), the table docs/results/sequential-gate.md
carries. Exact arithmetic: the same on every machine.
"""

from __future__ import annotations

import math
import sys

from regress.stats import SequentialDesign, stopping, stopping_law
from regress.stats.design_choice import used_quantile

ALPHA = 0.05
MAX_DROP = 0.02
NS = (300, 500, 1000)
FLIPS = (0.01, 0.03, 0.15)
HEADER = "| n | flips | exact | normal approximation |\n| ---: | ---: | ---: | ---: |"
POOL_FLIPS = (0.01, 0.02, 0.023, 0.05)
"""2.3%: SmolLM2's Q8_0 on the built-in pool's first 1,000 questions."""
POOL_HEADER = (
    "| flips | fixed, 500: P(PASS) | pool of 2,000: P(PASS) | expected n | median n |\n"
    "| ---: | ---: | ---: | ---: | ---: |"
)


def normal_fraction(design: SequentialDesign, n: int, discordance: float) -> float:
    """What plan read before: the drift of the margin test of an unchanged candidate, z =
    -max_drop / se with se = sqrt(discordance / n), through the design's normal boundaries."""
    theta = -MAX_DROP / math.sqrt(discordance / n)
    up, down = stopping(design, ALPHA, theta)
    used, left = 0.0, 1.0
    for k, t in enumerate(design.looks[:-1]):
        used += (up[k] + down[k]) * t
        left -= up[k] + down[k]
    return used + max(0.0, left) * design.looks[-1]


def row(n: int, discordance: float) -> str:
    """One markdown row: the expected share of n, exact and normal."""
    design = SequentialDesign()
    exact = stopping_law(n, 0.0, discordance, design, ALPHA, MAX_DROP).expected_n / n
    return (
        f"| {n:,} | {discordance:.0%} | {exact:.2f} | "
        f"{normal_fraction(design, n, discordance):.2f} |"
    )


def pool_row(discordance: float) -> str:
    """One markdown row: an unchanged candidate on 500 questions (fixed) and on the pool."""
    fixed = stopping_law(500, 0.0, discordance, SequentialDesign(looks=(1.0,)), ALPHA, MAX_DROP)
    pool = stopping_law(2000, 0.0, discordance, SequentialDesign(), ALPHA, MAX_DROP)
    return (
        f"| {discordance:.1%} | {fixed.passed:.3f} | {pool.passed:.3f} | "
        f"{pool.expected_n:,.0f} | {used_quantile(pool, 0.5):,} |"
    )


def main() -> None:
    if "--pool" in sys.argv[1:]:
        print(POOL_HEADER)
        for discordance in POOL_FLIPS:
            print(pool_row(discordance))
        return
    print(HEADER)
    for n in NS:
        for discordance in FLIPS:
            print(row(n, discordance))


if __name__ == "__main__":
    main()
