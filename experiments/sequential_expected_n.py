"""Expected examples of a sequential unit, exact against the normal approximation
(docs/gate.md#sequential-gate).

    .venv/bin/python experiments/sequential_expected_n.py

For the default design (looks at 20/50/100%, obf-early spending), max_drop 2 points,
alpha 0.05: the share of n an accuracy unit expects to use when the candidate changes
nothing, from the gate's exact tests at each look (regress.stats.stopping_law, what `regress
plan` and the `no_early_stop` warning now read) beside the normal approximation they read
before (the margin test's z drift through the design's boundaries). Prints the markdown table
docs/gate.md carries; tests/test_stats_stopping_law.py recomputes its n = 300 and 500 rows.
"""

from __future__ import annotations

import math

from regress.stats import SequentialDesign, stopping, stopping_law

ALPHA = 0.05
MAX_DROP = 0.02
NS = (300, 500, 1000)
FLIPS = (0.01, 0.03, 0.15)
HEADER = "| n | flips | exact | normal approximation |\n| ---: | ---: | ---: | ---: |"


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


def main() -> None:
    print(HEADER)
    for n in NS:
        for discordance in FLIPS:
            print(row(n, discordance))


if __name__ == "__main__":
    main()
