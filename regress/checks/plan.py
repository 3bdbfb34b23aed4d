"""What a stored baseline can detect: per gated unit, the MDE and the n for a target drop.

`regress plan --baseline NAME` reads the baseline's own records for each unit's n and kind and
the policy for its rule, threshold, alpha and power. How many answers a candidate will flip is
not in a baseline, so the discordance is an assumption the caller states.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy import special

from regress.core.errors import BadInput
from regress.core.manifest import Run
from regress.core.records import Record
from regress.gate.margins import NORMALISED_METRICS
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
_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(48)
_WEIGHTS = _WEIGHTS / _WEIGHTS.sum()


def flip_chance(record: Record, noise: float, metric: str = "acc") -> float | None:
    """The chance that the record's right/wrong outcome changes when every choice's
    log-likelihood moves by independent normal noise of scale `noise` nats; None without
    per-choice scores or a single gold index (a generation, a failed example).

    The gold choice stays on top with probability E_z[prod_j Phi((x_g - x_j + s_g z) / s_j)]
    (one normal z for the gold's own noise, each rival's integrated out), computed by 48-node
    Gauss-Hermite quadrature: exact for the model, all choices counted. For acc_norm the
    scores are per character, so a choice's noise is `noise` over its length.
    """
    logliks = record.scores.get("loglik")
    gold = record.target
    if not record.ok or not logliks or len(logliks) < 2:
        return None
    if not isinstance(gold, int) or not 0 <= gold < len(logliks):
        return None
    x = np.asarray(logliks, dtype=float)
    scale = np.full(x.size, float(noise))
    if metric in NORMALISED_METRICS:
        chars = record.scores.get("chars") or []
        if len(chars) != x.size:
            return None
        lengths = np.maximum(np.asarray(chars, dtype=float), 1.0)
        x, scale = x / lengths, scale / lengths
    rivals = np.arange(x.size) != gold
    z = _NODES[:, None]
    on_top = special.ndtr((x[gold] - x[rivals] + scale[gold] * z) / scale[rivals])
    stays = float(np.clip(_WEIGHTS @ np.prod(on_top, axis=1), 0.0, 1.0))
    return 1.0 - stays if record.right else stays


def flip_share(
    records: Sequence[Record], noise: float, metrics: Mapping[str, str] | None = None
) -> float | None:
    """The share of `records` expected to change outcome under choice noise of scale `noise`
    (the mean of flip_chance over those that have one, each under its task's metric in
    `metrics`, acc if absent); None if none has."""
    chances = [
        c
        for r in records
        if (c := flip_chance(r, noise, (metrics or {}).get(r.task, "acc"))) is not None
    ]
    return float(np.mean(chances)) if chances else None


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
        _expected_n(design, n, discordance, threshold, alpha, drop)
        for drop in (0.0, threshold, 2 * threshold)
    ]
    return found[0], found[1], found[2]


def _expected_n(
    design: SequentialDesign, n: int, discordance: float, threshold: float, alpha: float,
    drop: float,
) -> float:  # fmt: skip
    """One exact law's expected examples at a true `drop` (which flips at least its share)."""
    if not n:
        return 0.0
    return stopping_law(n, drop, max(discordance, drop), design, alpha, threshold).expected_n


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
            f"unit {unit.name} has {unit.n:,} examples, under the policy's min_examples "
            f"{policy.min_examples:,}: every check of it will be INCONCLUSIVE"
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
    design = policy.sequential
    if design is None:
        return None
    plans = plan_baseline(run, replace(policy, sequential=None), LIGHTEST_DISCORDANCE)
    level = policy.alpha / max(1, sum(u.gated for u in plans))
    units = [u for u in plans if u.gated and u.kind is UnitKind.ACCURACY and u.n]
    # One exact law at a time, the likeliest to stop early first: a large pool answers at the
    # first (each law of a 2,000-example unit takes seconds).
    for unit in units:
        for drop in (0.0, 2 * unit.threshold, unit.threshold):
            found = _expected_n(design, unit.n, LIGHTEST_DISCORDANCE, unit.threshold, level, drop)
            if found < 0.9 * unit.n:
                return None
    if not units:
        return None
    return (
        "sequential: at these unit sizes no unit is expected to save a tenth of its examples, "
        f"even if only {LIGHTEST_DISCORDANCE:.1%} of answers flip (`regress plan --sequential "
        f"--discordance {LIGHTEST_DISCORDANCE}`): only a gross drop stops early, and each look "
        "reads its tasks' few-shot prefixes again, so the fixed gate is likely faster here"
    )


LIGHTEST_NOISE = 0.16
"""Choice noise (nats) of a Q8_0-like candidate: the scale whose expected flips on SmolLM2's
first 300 ARC-Easy log-likelihoods equal a real Q8_0's there (2.3%; fitted 0.161:
docs/results/flip-profiles.md)."""
TYPICAL_NOISE = 1.6
"""Choice noise (nats) of a Q4_0-like candidate, fitted the same way to a real Q4_0 (16.3%;
fitted 1.57). On PIQA it predicts 9.3% flips where Q4_0 made 9.7%; on the built-in suite's
one-token choices both scales predict more flips than the real candidates made (5.8% and 28.7%
against 2.0% and 18.0%), so plans there are conservative."""


@dataclass(frozen=True)
class FlipProfile:
    """A kind of candidate to plan for: choice noise of a scale, and a true accuracy drop."""

    name: str
    noise: float
    """Normal noise (nats) on each choice's log-likelihood: where, and how many, answers flip."""
    drop: float | None
    """The true drop it carries; None: twice the unit's max_drop (PLAN_FACTOR)."""
    fallback: float
    """Its discordance on a unit without per-choice scores (generations)."""

    @property
    def passes(self) -> bool:
        """Whether the gate should PASS it (an unchanged candidate), else flag a REGRESSION."""
        return self.drop == 0


PROFILES = (
    FlipProfile("Q8_0-like", LIGHTEST_NOISE, 0.0, LIGHTEST_DISCORDANCE),
    FlipProfile("Q4_0-like", TYPICAL_NOISE, None, TYPICAL_DISCORDANCE),
)
"""The typical candidates a budget plan must decide: a near-lossless requantization that
changes nothing on average (PASS), and a typical one that drops twice max_drop (REGRESSION)."""


@dataclass(frozen=True)
class BudgetOptions:
    """What `plan_budget` plans for: the time, its price, and the choices it may make."""

    seconds: float
    """The CI budget: wall time for the whole check, the model load included."""
    seconds_per_example: Mapping[str, float]
    """Unit -> wall seconds one of its examples takes on this machine."""
    load_seconds: float = 0.0
    """Paid once before the first example (model load, prompt rendering)."""
    margins: tuple[float, ...] | None = None
    """max_drop values to choose from; None: half, once and one and a half the unit's."""
    designs: tuple[SequentialDesign, ...] = (SequentialDesign(looks=(1.0,)),)
    """Looks to choose from (one look at 100% is the fixed gate)."""
    profiles: tuple[FlipProfile, ...] = PROFILES

    def __post_init__(self) -> None:
        if not self.seconds > 0:
            raise BadInput(f"a budget must be positive, not {self.seconds:g} s")
        if self.margins is not None and not all(0 < m < 1 for m in self.margins):
            raise BadInput("margins must lie in (0, 1)")
        if not self.designs or not self.profiles:
            raise BadInput("a budget plan needs at least one design and one profile")


@dataclass(frozen=True)
class ProfileOutcome:
    """How one plan treats one profile, exactly (regress.stats.stopping_law)."""

    profile: str
    discordance: float
    """The profile's expected share of flipped answers on this unit (from its margins)."""
    drop: float
    decided: float
    """P(PASS) for a profile that should pass, P(REGRESSION) for one that should not."""
    expected_n: float
    expected_seconds: float


@dataclass(frozen=True)
class UnitBudget:
    """One gated accuracy unit's plan: the examples its share of the budget affords, and the
    pool, margin and looks that decide its typical candidates most surely within them."""

    name: str
    n: int
    """Examples in the baseline."""
    affordable: int
    """Examples its share of the budget pays for."""
    pool: int
    margin: float
    looks: tuple[float, ...]
    alpha: tuple[float, float]
    """The PASS test's alpha and the REGRESSION test's (Bonferroni over the gated units)."""
    outcomes: tuple[ProfileOutcome, ...]
    from_margins: bool
    """Whether the discordances come from the baseline's per-choice scores (else assumed)."""

    @property
    def decided(self) -> float:
        """The plan's score: the least sure of its profiles' decisions."""
        return min(o.decided for o in self.outcomes)


@dataclass(frozen=True)
class BudgetPlan:
    """A baseline's units planned into one CI budget."""

    seconds: float
    fixed_seconds: float
    """The budget spent on units run whole (not gated, or not accuracy) and the load."""
    units: tuple[UnitBudget, ...]


def plan_budget(run: Run, policy: Policy, options: BudgetOptions) -> BudgetPlan:
    """Per gated accuracy unit, the pool (at most the baseline's examples), margin and looks
    whose exact operating characteristics decide `options.profiles` most surely within the
    unit's share of the budget (the highest least P(decide); ties to the fewer expected
    seconds). Units not planned run whole; the rest share what remains equally in time, a
    unit that needs less giving its surplus to the others."""
    if run.manifest.proxy is not None:
        raise BadInput(f"{run.manifest.name} is a proxy baseline: a budget plan needs a pool")
    tasks = [run.manifest.tasks[name] for name in sorted(run.manifest.tasks)]
    units = units_of(tasks)
    records = {
        name: [r for task in members for r in run.records.get(task.name, [])]
        for name, members in units.items()
    }
    planned = [
        name
        for name, members in units.items()
        if policy.for_unit(name).gate
        and unit_kind(name, members, {t.name: run.records.get(t.name, []) for t in members})
        is UnitKind.ACCURACY
        and records[name]
    ]
    missing = sorted(set(units) - set(options.seconds_per_example))
    if missing:
        raise BadInput(f"no price per example for unit(s) {', '.join(missing)}")
    whole = options.load_seconds + sum(
        options.seconds_per_example[name] * len(records[name])
        for name in units
        if name not in planned
    )
    if not planned:
        raise BadInput(f"baseline {run.manifest.name!r} has no gated accuracy unit to plan")
    if whole >= options.seconds:
        raise BadInput(
            f"the budget ({options.seconds / 60:.1f} min) does not cover the load and the "
            f"units that run whole ({whole / 60:.1f} min)"
        )
    shares = _share(
        options.seconds - whole,
        {name: (len(records[name]), options.seconds_per_example[name]) for name in planned},
    )
    gated = max(1, sum(policy.for_unit(name).gate for name in units))
    found = []
    for name in planned:
        found.append(
            _plan_unit(
                name,
                records[name],
                {t.name: t.metric for t in units[name]},
                shares[name],
                policy,
                (policy.alpha, policy.alpha / gated),
                options,
            )
        )
    return BudgetPlan(options.seconds, whole, tuple(found))


def _share(seconds: float, units: Mapping[str, tuple[int, float]]) -> dict[str, int]:
    """Examples per unit of an equal split of `seconds` in time, water-filled: a unit whose
    whole baseline costs less than its share takes it all and leaves the rest to the others."""
    left, open_ = seconds, dict(units)
    found: dict[str, int] = {}
    while open_:
        share = left / len(open_)
        small = {k: (n, cost) for k, (n, cost) in open_.items() if n * cost <= share}
        if not small:
            found.update({k: min(n, int(share / cost)) for k, (n, cost) in open_.items()})
            break
        for k, (n, cost) in small.items():
            found[k] = n
            left -= n * cost
            del open_[k]
    return found


def _plan_unit(
    name: str,
    records: Sequence[Record],
    metrics: Mapping[str, str],
    affordable: int,
    policy: Policy,
    alphas: tuple[float, float],
    options: BudgetOptions,
) -> UnitBudget:
    """The best plan of one unit over `options`' margins and designs, at the largest pool its
    share affords: the exact tests' power grows with n (up to their small sawtooth)."""
    n = len(records)
    pool = min(n, affordable)
    if pool == 0:
        raise BadInput(f"the budget affords no example of unit {name}")
    threshold = policy.for_unit(name).max_drop or 0.0
    margins = options.margins or tuple(
        m for m in (threshold / 2, threshold, 1.5 * threshold) if m > 0
    )
    if not margins:
        raise BadInput(f"unit {name} has max_drop 0: give margins to plan it")
    flips = {p.name: flip_share(records, p.noise, metrics) for p in options.profiles}
    cost = options.seconds_per_example.get(name, 0.0)
    best: UnitBudget | None = None
    for margin in margins:
        for design in options.designs:
            outcomes = tuple(
                _outcome(pool, margin, threshold, design, alphas, cost, p, flips[p.name])
                for p in options.profiles
            )
            plan = UnitBudget(
                name=name,
                n=n,
                affordable=affordable,
                pool=pool,
                margin=margin,
                looks=design.looks,
                alpha=alphas,
                outcomes=outcomes,
                from_margins=all(f is not None for f in flips.values()),
            )
            if best is None or _better(plan, best):
                best = plan
    assert best is not None  # margins and designs are never empty
    return best


def _outcome(
    pool: int,
    margin: float,
    threshold: float,
    design: SequentialDesign,
    alphas: tuple[float, float],
    cost: float,
    profile: FlipProfile,
    flips: float | None,
) -> ProfileOutcome:
    """One profile under one plan: its deciding side's probability and expected examples."""
    drop = PLAN_FACTOR * threshold if profile.drop is None else profile.drop
    # A drop flips at least its own share of answers.
    discordance = max(profile.fallback if flips is None else flips, drop, 1e-6)
    # The law takes one alpha for both sides: the deciding side's. Exact for one gated unit;
    # with more, the other side's stop is at the wrong level, which moves the decision by
    # that side's own (here negligible) probability: a PASS of a 2x max_drop drop, a
    # REGRESSION of an unchanged candidate.
    alpha = alphas[0] if profile.passes else alphas[1]
    law = stopping_law(pool, drop, discordance, design, alpha, margin)
    decided = law.passed if profile.passes else law.regression
    return ProfileOutcome(
        profile.name, discordance, drop, decided, law.expected_n, law.expected_n * cost
    )


def _better(plan: UnitBudget, than: UnitBudget) -> bool:
    """More surely decided, or as surely in less expected time."""
    if plan.decided != than.decided:
        return plan.decided > than.decided
    return sum(o.expected_seconds for o in plan.outcomes) < sum(
        o.expected_seconds for o in than.outcomes
    )
