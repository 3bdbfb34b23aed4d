"""The extendable designs of a sequential unit, exactly, on one grid
(docs/gate.md#choosing-the-extendable-design).

    .venv/bin/python experiments/extendable_design.py

For pools of 500-3,000 examples, 1-50% of answers flipping and true drops of 0, the margin
(2 points) and 5 points, alpha 0.05: P(REGRESSION), P(PASS), E[n] and the quartiles of the
examples used, for the gate's spending design (obf-early: looks at 20/50/100%, a tenth of
alpha at the first, O'Brien-Fleming's shape after), the O'Brien-Fleming design it replaced
(obf: looks at 25/50/100%) and the mixture betting e-process (looks every 5%), all from the
paired counts' exact law (regress.stats.design_choice). Beside them, the fixed exact test's
P(PASS) at the whole pool: no level-alpha test of the pool does better. Prints the markdown
tables docs/gate.md carries (exact arithmetic: the same on every machine);
tests/test_design_choice.py recomputes cells of it.
"""

from __future__ import annotations

from regress.stats import (
    DESIGNS,
    MAX_DROP,
    DesignPoint,
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


def goals(points: list[DesignPoint]) -> str:
    """The issue's goals, pool 2,000 (the medians also at 1,000 and 3,000), per design: a
    markdown table."""

    def at(design: str, n: int, drop: float, flips: float) -> DesignPoint:
        return next(
            p
            for p in points
            if (p.design, p.n_max, p.drop, p.discordance) == (design, n, drop, flips)
        )

    def median(design: str, flips: float) -> str:
        halves = {n: at(design, n, 0.0, flips).quartiles[1] for n in (1000, 2000, 3000)}
        return " / ".join(f"{half:,} ({half / n:.0%})" for n, half in halves.items())

    rows = [
        (
            "1% flip, unchanged (Q8_0-like): median n at pools 1,000 / 2,000 / 3,000, goal < 25%",
            lambda d: median(d, 0.01),
        ),
        ("2% flip, unchanged: median n at pools 1,000 / 2,000 / 3,000", lambda d: median(d, 0.02)),
        (
            "15% flip, unchanged: P(PASS) by the end of a pool of 2,000, goal >= 0.8",
            lambda d: f"{at(d, 2000, 0.0, 0.15).passed:.3f}",
        ),
        (
            "5-point drop, 15% flip, pool 2,000: P(REGRESSION)",
            lambda d: f"{at(d, 2000, 0.05, 0.15).regression:.3f}",
        ),
        (
            "size at the margin, whole grid, <= 0.05",
            lambda d: f"{largest_size([p for p in points if p.design == d]):.4f}",
        ),
    ]
    lines = [
        "| goal | " + " | ".join(DESIGNS) + " |",
        "| :-- |" + " ---: |" * len(DESIGNS),
    ]
    lines += [f"| {label} | " + " | ".join(cell(d) for d in DESIGNS) + " |" for label, cell in rows]
    return "\n".join(lines)


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
    print(f"fixed exact test, pool 2,000, 15% flips, unchanged: P(PASS) {fixed.passed:.3f}\n")
    print(goals(points))


if __name__ == "__main__":
    main()
