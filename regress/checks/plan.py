"""What a stored baseline can detect: per gated unit, the MDE and the n for a target drop.

`regress plan --baseline NAME` reads the baseline's own records for each unit's n and kind and
the policy for its rule, threshold, alpha and power. How many answers a candidate will flip is
not in a baseline, so the discordance is an assumption the caller states.
"""

from __future__ import annotations

from dataclasses import dataclass

from regress.core.errors import BadInput
from regress.core.manifest import Run
from regress.gate.outcomes import unit_kind
from regress.gate.pairing import units_of
from regress.gate.policy import Policy
from regress.gate.results import UnitKind
from regress.gate.units import PLAN_FACTOR
from regress.stats import (
    Rule,
    SequentialDesign,
    accuracy_mde,
    accuracy_n,
    pass_n,
    stopping_law,
)

TYPICAL_DISCORDANCE = 0.16
"""Share of answers a typical real requantization flips: SmolLM2-135M Q4_1 to Q4_0 or Q2_K
changed 15.7% and 16.6% of all 2,376 ARC-Easy answers (Q8_0 2.1%, IQ3_S 27.6%:
docs/results/proxy-efficiency.md)."""
LIGHTEST_DISCORDANCE = 0.012
"""The fewest answers a real requantization flipped: a Q8_0's 1.2% of 300 ARC-Easy answers
(docs/results/sequential-gate.md)."""


@dataclass(frozen=True)
class UnitPlan:
    """One unit of a baseline: what it can detect, and what a target drop needs."""

    name: str
    kind: UnitKind
    gated: bool
    rule: Rule
    n: int
    """Examples in the baseline (documents, for perplexity)."""
    baseline: float | None
    """The baseline's accuracy (accuracy units)."""
    threshold: float
    drop: float | None
    """The target drop the plan is made for (twice the threshold unless given)."""
    mde: float | None
    """Smallest drop flagged as a REGRESSION with the policy's power at n and the discordance;
    None where the plan needs more than a baseline holds (score and perplexity units)."""
    n_needed: int | None
    """Examples that flag `drop` with the policy's power; None if not an accuracy unit or the
    drop is within the threshold."""
    n_to_pass: int | None
    """Examples that show an unchanged candidate within the threshold with the policy's power
    (a PASS under pass_requires: evidence); None if not an accuracy unit."""
    expected_n: tuple[float, float, float] | None = None
    """Under the policy's sequential design: the examples a unit expects to use when the
    candidate changes nothing, drops exactly the threshold, and drops twice it (exact, at the
    discordance); None for a fixed design or a unit that is not accuracy."""


def sequential_n(
    design: SequentialDesign, n: int, discordance: float, threshold: float, alpha: float
) -> tuple[float, float, float]:
    """Expected examples of a sequential accuracy unit of n at true drops 0, the threshold
    and twice it, from the exact tests at each look (regress.stats.stopping_law; the normal
    approximation used before said 0.62 of n for an unchanged candidate flipping 1% at
    n = 500, the exact tests 0.89). A drop flips at least its own share of answers."""
    found = [
        stopping_law(n, drop, max(discordance, drop), design, alpha, threshold).expected_n
        if n
        else 0.0
        for drop in (0.0, threshold, 2 * threshold)
    ]
    return found[0], found[1], found[2]


def plan_baseline(
    run: Run, policy: Policy, discordance: float, drop: float | None = None
) -> list[UnitPlan]:
    """Plan every unit of a baseline at an assumed discordance, alpha split over gated units."""
    if run.manifest.proxy is not None:
        # The plain formulas would treat a margin-stratified sample as a random one.
        raise BadInput(
            f"{run.manifest.name} is a proxy baseline: `regress selftest --baseline "
            f"{run.manifest.name}` simulates what its gate can detect"
        )
    tasks = [run.manifest.tasks[name] for name in sorted(run.manifest.tasks)]
    units = units_of(tasks)
    gated = max(1, sum(policy.for_unit(name).gate for name in units))
    plans = []
    for name, members in units.items():
        own = policy.for_unit(name)
        records = [r for task in members for r in run.records.get(task.name, [])]
        kind = unit_kind(name, members, {t.name: run.records.get(t.name, []) for t in members})
        rule = own.rule or policy.rule
        alpha = policy.alpha / (gated if own.gate else 1)
        accuracy = kind is UnitKind.ACCURACY
        perplexity = kind is UnitKind.PERPLEXITY
        threshold = (own.max_relative_increase if perplexity else own.max_drop) or 0.0
        target = PLAN_FACTOR * threshold if drop is None else drop
        n = len(records)
        plans.append(
            UnitPlan(
                name=name,
                kind=kind,
                gated=own.gate,
                rule=rule,
                n=n,
                baseline=sum(bool(r.correct) for r in records) / n if accuracy and n else None,
                threshold=threshold,
                drop=target if accuracy else None,
                mde=accuracy_mde(n, discordance, threshold, rule, alpha, policy.power)
                if accuracy
                else None,
                n_needed=accuracy_n(discordance, target, threshold, rule, alpha, policy.power)
                if accuracy and target > 0
                else None,
                # At the full alpha: the gate's PASS is an intersection of the units' tests.
                n_to_pass=pass_n(discordance, threshold, policy.alpha, policy.power)
                if accuracy
                else None,
                expected_n=sequential_n(policy.sequential, n, discordance, threshold, alpha)
                if accuracy and policy.sequential is not None
                else None,
            )
        )
    return plans


def small_units(run: Run, policy: Policy) -> list[str]:
    """One line per gated unit with fewer examples than the policy's `min_examples`: every
    check against it will be INCONCLUSIVE, so say so now, with the n that would decide."""
    lines = []
    for unit in plan_baseline(run, policy, TYPICAL_DISCORDANCE):
        if not unit.gated or unit.kind is UnitKind.PERPLEXITY or unit.n >= policy.min_examples:
            continue
        line = (
            f"unit {unit.name} has {unit.n} examples, under the policy's min_examples "
            f"{policy.min_examples}: every check of it will be INCONCLUSIVE"
        )
        if unit.n_needed and unit.drop:
            needed = max(unit.n_needed, policy.min_examples)
            line += (
                f"; about {needed:,} would detect a {unit.drop * 100:.1f}-point drop (twice "
                f"max_drop, if {TYPICAL_DISCORDANCE:.0%} of answers flip: `regress plan`)"
            )
        lines.append(line)
    return lines


def no_early_stop(run: Run, policy: Policy) -> str | None:
    """A warning when the policy's sequential design expects no gated accuracy unit of `run` to
    save a tenth of its examples, even for a candidate that flips as few answers as a Q8_0
    (LIGHTEST_DISCORDANCE), unchanged or at twice max_drop: the looks then cost more than they
    save (each reads its tasks' few-shot prefixes again)."""
    if policy.sequential is None:
        return None
    plans = [
        unit
        for unit in plan_baseline(run, policy, LIGHTEST_DISCORDANCE)
        if unit.gated and unit.expected_n is not None and unit.n
    ]
    if not plans or any(min(u.expected_n or ()) < 0.9 * u.n for u in plans):
        return None
    return (
        "sequential: at these unit sizes no unit is expected to save a tenth of its examples, "
        f"even if only {LIGHTEST_DISCORDANCE:.1%} of answers flip (`regress plan --sequential "
        f"--discordance {LIGHTEST_DISCORDANCE}`): only a gross drop stops early, and each look "
        "reads its tasks' few-shot prefixes again, so the fixed gate is likely faster here"
    )
