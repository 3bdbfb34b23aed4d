"""`regress selftest`: would this baseline's gate catch a drop of X? Simulated, not assumed.

Candidates are simulated from the baseline's own records. Flips are drawn where real flips
happen: each example flips with a probability proportional to the calibration's flip rate at
its margin quantile (regress.proxy.flip_rates), in both directions, scaled so that the unit's
expected discordance is ψ (the share of answers that change) and its expected accuracy change
is -δ: a regression (baseline right) with total probability (ψ + δ) / 2, an improvement
(baseline wrong) with (ψ - δ) / 2. On a proxy the targets hold for the parent suite (each
sampled example weighs N_h / n_h).

Real flips need not follow the calibration: a candidate that breaks something may change sure
answers too. So each unit is simulated under more than one flip profile (`Profile`): the
calibrated one above and a flat one (every example equally likely to flip), by default; a
reversed one (flips concentrated at the surest answers) is a stress test on request. The
headline MDE of a unit is the worst over the profiles simulated, so it does not rest on the
calibration being right about where the flips fall.

Each simulated run is judged by the gate's own statistics and rules (the McNemar and Tango
tests of a plain unit, regress.stats.stratified on a proxy, the family-wise correction over the
gated units, regress.stats.decision), vectorised over runs; a test checks that `compare` gives
the same verdicts on records. A drop is injected into one unit at a time while every other unit
is an unchanged candidate with the same discordance, so each row answers "a drop of δ here and
nothing elsewhere: what does the whole gate say?".
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
from scipy import stats as sps

from regress.core.errors import BadInput
from regress.core.manifest import Run
from regress.core.proxy_design import Calibration
from regress.gate.integrity import check_proxy
from regress.gate.pairing import units_of
from regress.gate.policy import Policy
from regress.gate.results import Verdict
from regress.proxy import flip_rates
from regress.stats import (
    CI_ALPHA,
    SEED,
    Correction,
    PassRequires,
    Rule,
    SequentialDesign,
    SequentialPoint,
    Side,
    holm_rows,
    inconclusive,
    margin_pvalue,
    mcnemar_pvalue,
    moments,
    pvalues,
    regression,
    sequential_oc,
    tango_score,
    upper_drop,
)

DROPS = (0.0, 0.001, 0.01, 0.02, 0.03, 0.05)
"""Injected true drops (0.001 is the seed's "0.1-point variation")."""


class Profile(StrEnum):
    """Where the simulated flips fall along the baseline's margin (top-1 minus top-2)."""

    CALIBRATED = "calibrated"
    """As the calibration measured: mostly where the baseline was unsure."""
    FLAT = "flat"
    """Every example equally likely to flip, whatever its margin."""
    REVERSED = "reversed"
    """The calibration mirrored: mostly where the baseline was sure (a stress test)."""


PROFILES = (Profile.CALIBRATED, Profile.FLAT)
"""Simulated by default: the headline is the worse of the two."""


@dataclass(frozen=True)
class SelftestOptions:
    """What to simulate."""

    drops: tuple[float, ...] = DROPS
    runs: int = 1000
    seed: int = SEED
    discordance: float | None = None
    """Share of answers that change, ψ; default the calibration's mean flip rate."""
    calibration: Calibration = flip_rates.DEFAULT
    policy: Policy = field(default_factory=Policy)
    profiles: tuple[Profile, ...] = PROFILES
    """Flip profiles to simulate; the calibrated one is required (it fills the unit's `points`
    and `mde`), and the headline is the worst of them."""
    sequential: SequentialDesign | None = None
    """Also simulate each gated unit under this group-sequential design (`sequential_rows`)."""


@dataclass(frozen=True)
class Groups:
    """A unit's examples grouped by what the simulation needs: right/wrong and propensity.

    Arrays over groups: examples the baseline got right and wrong, their relative flip
    propensity (by the simulated profile), and their weight (1, or N_h / n_h on a proxy). On a
    proxy a group is a stratum; `stratum` maps groups to strata (plain units: all -1).
    """

    right: np.ndarray
    wrong: np.ndarray
    propensity: np.ndarray
    weight: np.ndarray
    stratum: np.ndarray
    population: np.ndarray | None
    """N_h per stratum on a proxy, else None."""
    sampled: np.ndarray | None


@dataclass(frozen=True)
class SelftestPoint:
    """The gate's verdict probabilities with a true drop in one unit."""

    drop: float
    regression: float
    inconclusive: float
    passed: float


@dataclass(frozen=True)
class ProfileSelftest:
    """A unit's simulated operating characteristic and MDE under one flip profile."""

    profile: Profile
    points: tuple[SelftestPoint, ...]
    mde: float | None
    """Smallest drop the gate flags as REGRESSION in at least `power` of the runs; None for
    none up to `largest_drop`, or for a unit that is not gated."""
    largest_drop: float
    """The largest drop these examples can show under this profile (the MDE's search range)."""


@dataclass(frozen=True)
class UnitSelftest:
    """One unit's simulated operating characteristic and minimum detectable effect."""

    name: str
    n: int
    population: int
    """Examples the unit's figures speak for: n, or the parent's on a proxy."""
    gated: bool
    rule: Rule
    threshold: float
    discordance: float
    points: tuple[SelftestPoint, ...]
    """Under the calibrated profile."""
    mde: float | None
    """Smallest drop the gate flags as REGRESSION in at least `power` of the runs, under the
    calibrated profile; `headline` is the figure that does not trust the calibration."""
    largest_drop: float = 0.0
    """The largest drop these examples can show at this discordance under the calibrated
    profile (the MDE's search range)."""
    simulated: bool = True
    """False for units that are not right/wrong (scores, perplexity): not simulated."""
    profiles: tuple[ProfileSelftest, ...] = ()
    """Every simulated profile, the calibrated one first."""
    headline: ProfileSelftest | None = None
    """The profile with the worst MDE (none detectable is worst; ties go to the earlier
    profile): the unit's main figure. None for a unit not gated or not simulated."""
    sequential: tuple[SequentialPoint, ...] = ()
    """Under `SelftestOptions.sequential`, one row per injected drop (`sequential_rows`)."""


@dataclass(frozen=True)
class SelftestResult:
    """Every unit's rows, with what was assumed."""

    baseline: str
    proxy_of: str | None
    runs: int
    seed: int
    power: float
    calibration: str
    units: tuple[UnitSelftest, ...]
    profiles: tuple[Profile, ...] = (Profile.CALIBRATED,)
    """The flip profiles simulated, the calibrated one first."""
    sequential: SequentialDesign | None = None


def selftest_baseline(baseline: Run, options: SelftestOptions | None = None) -> SelftestResult:
    """Simulate candidates of `baseline` and tabulate the gate's verdicts by injected drop."""
    check_proxy(baseline)
    options = options or SelftestOptions()
    profiles = options.profiles
    if not profiles or profiles[0] is not Profile.CALIBRATED or len(set(profiles)) < len(profiles):
        raise BadInput(
            "selftest's profiles must start with the calibrated one and name each profile once"
        )
    policy = options.policy
    if options.sequential is not None:
        _refuse_sequential(baseline, policy)
    psi = options.discordance
    if psi is None:
        psi = float(np.mean([rate for _, rate in options.calibration.points]))
    by_profile = {p: unit_groups(baseline, options.calibration, p) for p in profiles}
    names = list(by_profile[Profile.CALIBRATED])
    gated = [policy.for_unit(name).gate for name in names]
    results = []
    for target, name in enumerate(names):
        unit_policy = policy.for_unit(name)
        threshold = unit_policy.max_drop or 0.0
        rule = Rule(unit_policy.rule or policy.rule)
        calibrated = by_profile[Profile.CALIBRATED][name]
        if calibrated is None:
            results.append(
                UnitSelftest(
                    name, 0, 0, unit_policy.gate, rule, threshold, psi, (), None, simulated=False
                )
            )
            continue
        outcomes = tuple(
            _simulate(p, by_profile[p], names, gated, target, psi, options) for p in profiles
        )
        first = outcomes[0]
        n = int(calibrated.right.sum() + calibrated.wrong.sum())
        population = n if calibrated.population is None else int(calibrated.population.sum())
        results.append(
            UnitSelftest(
                name=name,
                n=n,
                population=population,
                gated=unit_policy.gate,
                rule=rule,
                threshold=threshold,
                discordance=psi,
                points=first.points,
                mde=first.mde,
                largest_drop=first.largest_drop,
                profiles=outcomes,
                headline=worst(outcomes) if unit_policy.gate else None,
                sequential=sequential_rows(n, threshold, psi, sum(gated), options)
                if options.sequential is not None and unit_policy.gate
                else (),
            )
        )
    return SelftestResult(
        baseline=baseline.manifest.name,
        proxy_of=baseline.manifest.proxy.parent if baseline.manifest.proxy else None,
        runs=options.runs,
        seed=options.seed,
        power=policy.power,
        calibration=f"{options.calibration.name}: {options.calibration.source}",
        units=tuple(results),
        profiles=profiles,
        sequential=options.sequential,
    )


def _refuse_sequential(baseline: Run, policy: Policy) -> None:
    """The sequential simulation models the default gate of a plain baseline; say so for
    anything else rather than print figures for a gate that does not run."""
    if baseline.manifest.proxy is not None:
        raise BadInput(
            f"{baseline.manifest.name} is a proxy: its gate cannot stop early, so it has no "
            "sequential figures (drop --sequential)"
        )
    manifest = baseline.manifest
    names = units_of([manifest.tasks[t] for t in sorted(manifest.tasks)])
    rules = {Rule(policy.for_unit(u).rule or policy.rule) for u in names}
    if rules != {Rule.MARGIN} or policy.pass_requires is not PassRequires.EVIDENCE:
        raise BadInput(
            "selftest --sequential simulates the margin rule with pass_requires: evidence "
            "(the defaults); this policy sets another"
        )


def sequential_rows(
    n: int, threshold: float, psi: float, units: int, options: SelftestOptions
) -> tuple[SequentialPoint, ...]:
    """One gated unit under the sequential design at each injected drop: its verdict rates
    and expected examples beside the fixed design's, flips placed flat (regress.stats.operating
    .sequential_oc), alpha split evenly over the gated units as `regress plan` does."""
    design = options.sequential
    assert design is not None
    alpha = options.policy.alpha / max(units, 1)
    return tuple(
        sequential_oc(n, drop, psi, design, options.runs, options.seed, alpha, threshold)
        for drop in options.drops
    )


def worst(outcomes: Sequence[ProfileSelftest]) -> ProfileSelftest:
    """The profile with the largest MDE; no detectable drop counts as the largest of all."""
    # max() keeps the first of equals, so a tie goes to the calibrated profile.
    return max(outcomes, key=lambda o: np.inf if o.mde is None else o.mde)


def _simulate(
    profile: Profile,
    groups: dict[str, Groups | None],
    names: Sequence[str],
    gated: Sequence[bool],
    target: int,
    psi: float,
    options: SelftestOptions,
) -> ProfileSelftest:
    """One profile's rows and MDE for the unit `names[target]`, the others unchanged."""
    policy = options.policy

    def chances(drop: float) -> SelftestPoint:
        # The same seed at every drop (common random numbers): the chances rise smoothly
        # with the drop, so the MDE's bisection is not led astray by simulation noise.
        rng = np.random.default_rng(options.seed)
        return _point(groups, names, gated, target, drop, psi, policy, options.runs, rng)

    unit = groups[names[target]]
    assert unit is not None
    largest = largest_drop(unit, psi)
    return ProfileSelftest(
        profile=profile,
        points=tuple(chances(drop) for drop in options.drops),
        mde=_mde(chances, largest, policy.power) if policy.for_unit(names[target]).gate else None,
        largest_drop=largest,
    )


def unit_groups(
    baseline: Run, calibration: Calibration, profile: Profile = Profile.CALIBRATED
) -> dict[str, Groups | None]:
    """Each unit's groups for the simulation, flip propensities by `profile`; None for a unit
    that is not right/wrong."""
    manifest = baseline.manifest
    units = units_of([manifest.tasks[t] for t in sorted(manifest.tasks)])
    out: dict[str, Groups | None] = {}
    for name, tasks in units.items():
        records = [r for t in tasks for r in baseline.records[t.name]]
        if any(t.output_type == "loglikelihood_rolling" for t in tasks) or any(
            r.ok and r.correct is None for r in records
        ):
            out[name] = None
        elif manifest.proxy is not None:
            out[name] = _proxy_groups(baseline, name, calibration, profile)
        else:
            out[name] = _plain_groups(baseline, [t.name for t in tasks], calibration, profile)
    return out


def propensity(
    calibration: Calibration, quantiles: Sequence[float], profile: Profile
) -> np.ndarray:
    """Relative flip propensity at each margin quantile (0 = least sure) under `profile`.

    Only ratios matter: flip_chances scales them to the target discordance and drop.
    """
    if profile is Profile.FLAT:
        return np.ones(len(quantiles))
    if profile is Profile.REVERSED:
        return np.array([calibration.flip_rate(1 - q) for q in quantiles])
    return np.array([calibration.flip_rate(q) for q in quantiles])


def _plain_groups(
    baseline: Run, tasks: Sequence[str], calibration: Calibration, profile: Profile
) -> Groups:
    ranks = flip_rates.margin_ranks(baseline, tasks)
    bins = flip_rates.BINS
    right, wrong = np.zeros(bins), np.zeros(bins)
    for task in tasks:
        for record in baseline.records[task]:
            k = min(bins - 1, int(ranks[task, record.doc_id] * bins))
            if record.right:
                right[k] += 1
            else:
                wrong[k] += 1
    mids = [(k + 0.5) / bins for k in range(bins)]
    return Groups(
        right=right,
        wrong=wrong,
        propensity=propensity(calibration, mids, profile),
        weight=np.ones(bins),
        stratum=np.full(bins, -1),
        population=None,
        sampled=None,
    )


def _proxy_groups(baseline: Run, unit: str, calibration: Calibration, profile: Profile) -> Groups:
    design = baseline.manifest.proxy
    assert design is not None
    strata = design.unit_strata(unit)
    by_doc = {(r.task, r.doc_id): r for recs in baseline.records.values() for r in recs}
    right, wrong = np.zeros(len(strata)), np.zeros(len(strata))
    for h, task, doc in design.members(unit):
        if by_doc[task, doc].right:
            right[h] += 1
        else:
            wrong[h] += 1
    count = len(strata)
    population = np.array([s.population for s in strata], dtype=float)
    sampled = np.array([s.sampled for s in strata], dtype=float)
    return Groups(
        right=right,
        wrong=wrong,
        propensity=propensity(calibration, [(h + 0.5) / count for h in range(count)], profile),
        weight=population / sampled,
        stratum=np.arange(count),
        population=population,
        sampled=sampled,
    )


def flip_chances(groups: Groups, drop: float, psi: float) -> tuple[np.ndarray, np.ndarray]:
    """Per group: the chance a right example turns wrong, and a wrong one right.

    Chosen so the weighted expected regressions are N (ψ + δ) / 2 and improvements
    N (ψ - δ) / 2, each proportional to the group's propensity.
    """
    total = float(np.sum(groups.weight * (groups.right + groups.wrong)))
    mass_right = float(np.sum(groups.weight * groups.right * groups.propensity))
    mass_wrong = float(np.sum(groups.weight * groups.wrong * groups.propensity))
    if drop > psi or drop < -psi:
        raise BadInput(f"a drop of {drop:.1%} needs more than {psi:.1%} of answers to change")
    to_wrong = groups.propensity * total * (psi + drop) / 2 / max(mass_right, 1e-12)
    to_right = groups.propensity * total * (psi - drop) / 2 / max(mass_wrong, 1e-12)
    if np.any(to_wrong > 1) or np.any(to_right > 1):
        raise BadInput(
            f"a drop of {drop:.1%} at {psi:.1%} discordance needs more flips than this "
            "baseline's examples can give; lower --discordance or the drop"
        )
    return to_wrong, to_right


def largest_drop(groups: Groups, psi: float) -> float:
    """The largest drop these examples can show at discordance ψ (no flip chance above 1)."""
    total = float(np.sum(groups.weight * (groups.right + groups.wrong)))
    mass_right = float(np.sum(groups.weight * groups.right * groups.propensity))
    top = float(np.max(groups.propensity, where=groups.right > 0, initial=0.0))
    if top <= 0:
        return 0.0
    return min(psi, 2 * mass_right / (total * top) - psi)


@dataclass(frozen=True)
class _UnitDraws:
    """Simulated p-values and drops of one unit over runs."""

    rule_p: np.ndarray
    change_p: np.ndarray
    pass_p: np.ndarray
    """p of H0 "drop >= threshold": a PASS when it falls below its level."""
    drop: np.ndarray
    reaches: np.ndarray
    """Whether the 95% interval reaches a drop beyond the threshold."""
    too_small: bool


def draw(
    groups: Groups, drop: float, psi: float, runs: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Simulated regressions b and improvements c per run and group: (runs, groups) arrays."""
    to_wrong, to_right = flip_chances(groups, drop, psi)
    b = rng.binomial(groups.right.astype(int), to_wrong, size=(runs, len(to_wrong)))
    c = rng.binomial(groups.wrong.astype(int), to_right, size=(runs, len(to_right)))
    return b, c


def judge_counts(
    groups: Groups, b: np.ndarray, c: np.ndarray, threshold: float, rule: Rule, policy: Policy
) -> _UnitDraws:
    """The gate's tests of one unit from per-group counts, exactly as `compare` computes them."""
    n = int(groups.right.sum() + groups.wrong.sum())
    if groups.population is not None and groups.sampled is not None:
        m = moments(groups.population, groups.sampled, b, c)
        change_p, margin_p = pvalues(m, threshold)
        drop = -m.delta
        # compare's NormalShift: the same normal tail, the other way.
        se = np.sqrt(m.var)
        with np.errstate(divide="ignore", invalid="ignore"):
            within = sps.norm.sf((threshold - drop) / se)
        pass_p = np.where(se > 0, within, np.where(drop < threshold, 0.0, 1.0))
        reaches = upper_drop(m, CI_ALPHA) > threshold
    else:
        bt, ct = b.sum(axis=-1), c.sum(axis=-1)
        change_p = np.asarray(mcnemar_pvalue(bt, ct, policy.test))
        margin_p = _exact(bt, ct, n, threshold, Side.BEYOND)
        pass_p = _exact(bt, ct, n, threshold, Side.WITHIN)
        drop = (bt - ct) / n
        reaches = tango_score(-threshold, bt, ct, n) < sps.norm.isf(CI_ALPHA / 2)
    rule_p = margin_p if rule is Rule.MARGIN else change_p
    return _UnitDraws(rule_p, change_p, pass_p, drop, reaches, n < policy.min_examples)


@functools.lru_cache(maxsize=200_000)
def _exact_one(b: int, c: int, n: int, threshold: float, side: Side) -> float:
    return margin_pvalue(b, c, n, threshold, side)


def _exact(b: np.ndarray, c: np.ndarray, n: int, threshold: float, side: Side) -> np.ndarray:
    """The exact margin test of every simulated run: runs repeat few distinct counts, and each
    is computed once (cached across the drops and profiles a selftest tries)."""
    pairs, where = np.unique(np.stack([b, c], axis=-1), axis=0, return_inverse=True)
    found = np.array([_exact_one(int(x), int(y), n, threshold, side) for x, y in pairs])
    return found[where.reshape(b.shape)]


def overall_verdicts(
    draws: Sequence[_UnitDraws | None],
    gated: Sequence[bool],
    rules: Sequence[Rule],
    thresholds: Sequence[float],
    policy: Policy,
) -> np.ndarray:
    """The comparison's verdict per run (an array of Verdict values), gated units only."""
    live = {i: d for i, d in enumerate(draws) if d is not None and gated[i]}
    runs = len(next(d for d in draws if d is not None).drop)
    k = sum(gated)
    verdict = np.full(runs, Verdict.PASS.value, dtype=object)
    if not live:
        return verdict
    # Units not simulated stay in the family with p = 1: they take their share of alpha.
    rule_raw = np.ones((runs, k))
    change_raw = np.ones((runs, k))
    pass_raw = np.ones((runs, k))
    slots = {i: j for j, i in enumerate(i for i, g in enumerate(gated) if g)}
    for i, d in live.items():
        rule_raw[:, slots[i]] = d.rule_p
        change_raw[:, slots[i]] = d.change_p
        pass_raw[:, slots[i]] = d.pass_p
    rule_adj, change_adj = _correct(rule_raw, policy), _correct(change_raw, policy)
    # A PASS needs every unit shown within: an intersection-union test, each at alpha.
    pass_adj = pass_raw
    evidence = policy.pass_requires is PassRequires.EVIDENCE
    any_regression = np.zeros(runs, dtype=bool)
    any_inconclusive = np.zeros(runs, dtype=bool)
    for i, d in live.items():
        j = slots[i]
        if d.too_small:
            any_inconclusive |= True
            continue
        regressed = regression(rules[i], policy.alpha, rule_adj[:, j], d.drop, thresholds[i])
        if evidence:
            undecided = ~regressed & (pass_adj[:, j] >= policy.alpha)
        else:
            upper = np.where(d.reaches, np.inf, -np.inf)
            undecided = inconclusive(
                regressed, policy.alpha, change_adj[:, j], upper, thresholds[i]
            )
        any_regression |= regressed
        any_inconclusive |= undecided
    verdict[any_inconclusive] = Verdict.INCONCLUSIVE.value
    verdict[any_regression] = Verdict.REGRESSION.value
    return verdict


def _correct(pvalues_: np.ndarray, policy: Policy) -> np.ndarray:
    if Correction(policy.correction) is Correction.BONFERRONI:
        return np.minimum(1.0, pvalues_ * pvalues_.shape[1])
    return holm_rows(pvalues_)


def _point(
    groups: dict[str, Groups | None],
    names: Sequence[str],
    gated: Sequence[bool],
    target: int,
    drop: float,
    psi: float,
    policy: Policy,
    runs: int,
    rng: np.random.Generator,
) -> SelftestPoint:
    draws: list[_UnitDraws | None] = []
    rules, thresholds = [], []
    for i, name in enumerate(names):
        unit_policy = policy.for_unit(name)
        rule, threshold = Rule(unit_policy.rule or policy.rule), unit_policy.max_drop or 0.0
        rules.append(rule)
        thresholds.append(threshold)
        g = groups[name]
        if g is None:
            draws.append(None)
            continue
        b, c = draw(g, drop if i == target else 0.0, psi, runs, rng)
        draws.append(judge_counts(g, b, c, threshold, rule, policy))
    verdict = overall_verdicts(draws, gated, rules, thresholds, policy)
    return SelftestPoint(
        drop=drop,
        regression=float(np.mean(verdict == Verdict.REGRESSION.value)),
        inconclusive=float(np.mean(verdict == Verdict.INCONCLUSIVE.value)),
        passed=float(np.mean(verdict == Verdict.PASS.value)),
    )


def _mde(chances: Callable[[float], SelftestPoint], high: float, power: float) -> float | None:
    """Smallest drop (to 0.1 point, up to `high`) flagged as REGRESSION in `power` of runs."""
    low = 0.0
    if high <= 0 or chances(high).regression < power:
        return None
    while high - low > 0.001:
        mid = (low + high) / 2
        if chances(mid).regression >= power:
            high = mid
        else:
            low = mid
    return high
