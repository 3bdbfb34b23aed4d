"""The two extendable designs of a sequential unit, exactly, on one grid
(docs/gate.md#choosing-the-extendable-design).

    .venv/bin/python experiments/extendable_design.py

For pools of 500-3,000 examples, 1-50% of answers flipping and true drops of 0, the margin
(2 points) and 5 points, alpha 0.05: P(REGRESSION), P(PASS), E[n] and the quartiles of the
examples used, for the gate's O'Brien-Fleming spending design (looks at 25/50/100%) and the
mixture betting e-process (looks every 5%), both from the paired counts' exact law
(regress.stats.design_choice). Beside them, the fixed exact test's P(PASS) at the whole pool:
no level-alpha test of the pool does better. Prints the markdown tables docs/gate.md carries,
then the CPU flags (the figures are exact, the same on every CPU; the flags say where they were
computed). tests/test_design_choice.py recomputes cells of it.
"""

from __future__ import annotations

from _common import cpu_flags

from regress.stats import (
    DESIGNS,
    MAX_DROP,
    SequentialDesign,
    design_cells,
    design_point,
    largest_size,
    stopping_law,
)

HEADER = (
    "| pool | flips | true drop | design | P(REGRESSION) | P(PASS) | E[n] | quartiles of n |\n"
    "| ---: | ---: | ---: | :-- | ---: | ---: | ---: | :-- |"
)


def main() -> None:
    print(HEADER)
    points = []
    for n, drop, flips in design_cells():
        for design in DESIGNS:
            point = design_point(design, n, drop, flips)
            points.append(point)
            quartiles = " / ".join(f"{q:,}" for q in point.quartiles)
            print(
                f"| {n:,} | {flips:.0%} | {drop * 100:.0f} | {design} | "
                f"{point.regression:.4f} | {point.passed:.4f} | {point.expected_n:,.0f} | "
                f"{quartiles} |",
                flush=True,
            )
    for design in DESIGNS:
        mine = [p for p in points if p.design == design]
        print(f"\n{design}: largest size at the margin {largest_size(mine):.4f}")
    fixed = stopping_law(2000, 0.0, 0.15, SequentialDesign(looks=(1.0,)), margin=MAX_DROP)
    print(f"fixed exact test, pool 2,000, 15% flips, unchanged: P(PASS) {fixed.passed:.3f}")
    print(f"\nCPU flags: {cpu_flags()}")


if __name__ == "__main__":
    main()
