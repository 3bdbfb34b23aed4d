"""docs/gate.md's operating-characteristics tables, rendered from regress.stats.operating:
`python -m regress.report.operating` prints them all (a few minutes of exact sums and seeded
simulation)."""

from __future__ import annotations

from collections.abc import Sequence

from regress.report.tables import table_row as _row
from regress.stats import (
    MAX_DROP,
    SEQUENTIAL_CELLS,
    SEQUENTIAL_N,
    CreepPoint,
    FamilyRate,
    PassRequires,
    Rule,
    SequentialDesign,
    SequentialPoint,
    Side,
    SizePoint,
    VerdictPoint,
    creep_chains,
    creep_false_alarms,
    family_false_alarms,
    sequential_oc,
    size_grid,
    verdict_table,
)


def render_size_grid(points: Sequence[SizePoint]) -> str:
    """docs/gate.md's guarantee table: P(REGRESSION) / P(PASS) at a true drop of max_drop."""
    discordances = sorted({p.discordance for p in points})
    header = ["n", *(f"{d:.0%} flip" for d in discordances)]
    lines = [_row(header), _row(["---:", *["---:"] * len(discordances)])]
    for n in sorted({p.n for p in points}):
        cells = {(p.side, p.discordance): p.probability for p in points if p.n == n}
        row = [f"{n:,}"]
        row += [f"{cells[Side.BEYOND, d]:.3f} / {cells[Side.WITHIN, d]:.3f}" for d in discordances]
        lines.append(_row(row))
    return "\n".join(lines)


def render_verdict_table(points: Sequence[VerdictPoint]) -> str:
    """docs/gate.md's table: one row per rule, pass_requires and n; P(REGRESSION) /
    P(INCONCLUSIVE) / P(PASS) per true drop."""
    drops = sorted({p.drop for p in points})
    header = ["rule", "pass_requires", "n", *(f"drop {d * 100:g} pts" for d in drops)]
    lines = [_row(header), _row(["---", "---", "---:", *["---:"] * len(drops)])]
    for rule in Rule:
        for pass_requires in PassRequires:
            for n in sorted({p.n for p in points}):
                cells = {
                    p.drop: p
                    for p in points
                    if p.rule is rule and p.pass_requires is pass_requires and p.n == n
                }
                row = [f"`{rule}`", f"`{pass_requires}`", f"{n:,}"]
                row += [
                    f"{cells[d].regression:.3f} / {cells[d].inconclusive:.3f} / "
                    f"{cells[d].passed:.3f}"
                    for d in drops
                ]
                lines.append(_row(row))
    return "\n".join(lines)


def render_family(rates: Sequence[FamilyRate]) -> str:
    """docs/gate.md's sentence on the whole gate's false alarms."""
    parts = "; ".join(
        f"{'every change at its threshold' if r.at_threshold else 'nothing changed'}: "
        f"{r.regression:.1%} ± {r.se:.1%}"
        for r in rates
    )
    return (
        f"Whole gate runs ({rates[0].runs:,} seeded each; 3 units of n = 300, a failure class, "
        f"a golden set of 50, one Holm family), any REGRESSION: {parts}."
    )


def render_creep(points: Sequence[CreepPoint], rates: Sequence[FamilyRate]) -> str:
    """docs/gate.md's creep-guard table and its size sentence."""
    lines = [
        _row(
            [
                "step",
                "true drop since anchor",
                "gate vs last baseline: PASS",
                "every step so far PASSED",
                "guarded gate: REGRESSION",
                "stopped by now",
            ]
        ),
        _row(["---:"] * 6),
    ]
    for p in points:
        lines.append(
            _row(
                [
                    str(p.step),
                    f"{p.cumulative_drop * 100:.1f} pts",
                    f"{p.step_passed:.0%}",
                    f"{p.every_step_passed:.0%}",
                    f"{p.regression:.0%}",
                    f"{p.stopped:.0%}",
                ]
            )
        )
    parts = "; ".join(
        f"{'both true drops at their thresholds' if r.at_threshold else 'nothing changed'}: "
        f"{r.regression:.1%} ± {r.se:.1%}"
        for r in rates
    )
    lines += ["", f"Guarded gate runs ({rates[0].runs:,} seeded each), any REGRESSION: {parts}."]
    return "\n".join(lines)


def render_sequential(points: Sequence[SequentialPoint]) -> str:
    """docs/gate.md's sequential table."""
    rows = [
        "| true drop | flips | P(REGRESSION) sequential / fixed | P(PASS) sequential / fixed "
        f"| expected n (fixed: {SEQUENTIAL_N}) |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for p in points:
        drop = "0" if p.drop == 0 else f"{p.drop * 100:g} pts"
        if p.drop == MAX_DROP:
            drop += " (the margin)"
        rows.append(
            f"| {drop} | {p.discordance:.0%} | {p.regression:.3f} / {p.fixed_regression:.3f} | "
            f"{p.passed:.3f} / {p.fixed_passed:.3f} | {p.mean_n:.0f} |"
        )
    return "\n".join(rows)


def main() -> None:
    """Print docs/gate.md's tables and the whole-gate sentence."""
    print(render_size_grid(size_grid()))
    print()
    print(render_verdict_table(verdict_table()))
    print()
    print(render_family([family_false_alarms(False), family_false_alarms(True)]))
    print()
    design = SequentialDesign()
    cells = [sequential_oc(SEQUENTIAL_N, d, f, design, runs=2000) for d, f in SEQUENTIAL_CELLS]
    print(render_sequential(cells))
    print()
    print(render_creep(creep_chains(), [creep_false_alarms(False), creep_false_alarms(True)]))


if __name__ == "__main__":
    main()
