"""The units' rule: each gated unit's paired outcomes measured, tested and decided.

A unit is one of three kinds, by what its records hold (`unit_kind`):
- accuracy: 0/1 `correct` (or a 0/1 metric the policy names): one-sided McNemar test
  against no drop, exact unconditional tests of a drop beyond and within max_drop
  (regress.stats.margin), Tango's interval for Δ as a description, flips listed;
- score: a per-example score in [0, 1] with `correct` None (TruthfulQA MC2): bootstrap-t
  tests of the mean, b and c count the examples that scored lower and higher;
  a multiple-choice unit with `estimand: p_gold` pairs the gold choice's probability the
  same way, tested by betting (regress.stats.BoundedDrop): its values are bounded, so the
  test holds alpha under any skew;
- perplexity (loglikelihood_rolling tasks): sign-flip and bootstrap-t tests of the
  length-weighted corpus log-ratio (regress.stats.perplexity), the very quantity whose relative
  change max_relative_increase judges.

Each unit's rule (`margin` or `change`, regress.stats.decision) says which test decides a
REGRESSION; the policy's `pass_requires` whether a PASS needs its drop shown within the
threshold (the within-margin test) or only no REGRESSION and no INCONCLUSIVE by the no-drop
test. With a proxy baseline, a unit's figures are stratified estimates of the parent suite's.

How failed examples count (status error, timeout or refused; a truncated prompt was still
scored and counts as it was scored):
- accuracy and score units: a failed example is wrong (scores 0) on the side that failed. A
  candidate failure where the baseline was right is therefore a regression (b), exactly as a
  wrong answer is, and a baseline failure the candidate answers is an improvement (c).
  Separately, a unit whose candidate failed on more than `max_error_rate` of its examples is
  an ERROR (exit 3): its accuracy would measure the runtime, not the model.
- perplexity units: a document that failed on either side has no log-likelihood to compare;
  it is left out of the test and counted in the failures and the error rate.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Self

import numpy as np

from regress.core.errors import BadInput
from regress.core.judgements import Outcome
from regress.core.manifest import TaskInfo
from regress.core.proxy_design import ProxyDesign
from regress.core.records import Record, Status
from regress.gate.betting_order import betting_order, record_key
from regress.gate.judged import JudgedSummary
from regress.gate.outcomes import (
    UnitKind,
    gold_probability,
    metric_of,
    outcome_value,
    unit_kind,
)
from regress.gate.pairing import Pair
from regress.gate.policy import Estimand, Policy, UnitPolicy
from regress.gate.results import (
    Flip,
    ProxyEstimate,
    SubjectResult,
    UnitResult,
    Verdict,
)
from regress.gate.rule import Context, Corrected, Family, Test
from regress.gate.unit_verdicts import bounds, or_one, verdict_of
from regress.gate.verdict import worst
from regress.stats import (
    CI_ALPHA,
    BoundedDrop,
    Direction,
    DropTest,
    NormalShift,
    PairedCounts,
    PassRequires,
    RelativeIncrease,
    Rule,
    Side,
    StudentizedShift,
    accuracy_mde,
    accuracy_n,
    betting_n,
    bootstrap_t,
    bounded_mean_interval,
    choice_kl,
    corpus_shift,
    mcnemar_pvalue,
    paired_diff_ci,
    paired_mean_test,
    pass_n,
    shift_mde,
    shift_n,
    stratified_test,
    top1_agreement,
    weighted_mean,
)

PLAN_FACTOR = 2
"""The n that would decide is planned for a true drop of twice the unit's threshold: a drop
worth catching, stated in advance rather than read off the data (an observed drop that made a
unit stand out overstates the true one)."""
PERPLEXITY_WEIGHTS = {"word_perplexity": "n_words", "byte_perplexity": "n_bytes"}
"""Per-document metric holding each perplexity's denominator (bits_per_byte uses bytes too)."""


def failure_counts(records: Sequence[Record]) -> dict[str, int]:
    counts = Counter(str(r.status) for r in records if r.status != Status.OK)
    return dict(sorted(counts.items()))


def error_rate(failures: dict[str, int], n: int) -> float:
    """Share of n examples that failed outright (truncated prompts were still scored)."""
    failed = sum(k for status, k in failures.items() if status != Status.TRUNCATED)
    return failed / n if n else 0.0


def measure_unit(
    name: str,
    tasks: Sequence[TaskInfo],
    pairs: dict[str, list[Pair]],
    policy: Policy,
    unit_policy: UnitPolicy,
    k: int,
    design: ProxyDesign | None = None,
    plans: bool = True,
) -> tuple[UnitResult, list[Flip], DropTest | None]:
    """A unit's measurements, flips and the test of its drop against any margin; `_judge`
    fills in its verdict and bounds afterwards (None: nothing paired to test).

    `k` is the number of gated units, which the MDE and the n that would decide are planned
    for. With a proxy's `design`, the unit's figures estimate the parent suite's. Without
    `plans`, an accuracy or score unit plans no n to decide (`n_needed`, `n_to_pass` None).
    """
    kind = unit_kind(name, tasks, {t.name: [base for base, _ in pairs[t.name]] for t in tasks})
    if kind is UnitKind.PERPLEXITY:
        unit_pairs = [pair for task in tasks for pair in pairs[task.name]]
        unit, test = _measure_perplexity(name, tasks, unit_pairs, policy, unit_policy, k)
        return unit, [], test
    if design is not None and unit_policy.estimand is Estimand.P_GOLD:
        raise BadInput(f"unit {name}: estimand p_gold needs a full baseline, not a proxy's")
    unit, flips, test = _measure_outcomes(name, tasks, pairs, policy, unit_policy, kind, k, plans)
    if design is not None:
        unit, test = _as_proxy_estimate(unit, tasks, pairs, policy, unit_policy, k, design)
    return unit, flips, test


def _measure_outcomes(
    name: str,
    tasks: Sequence[TaskInfo],
    pairs: dict[str, list[Pair]],
    policy: Policy,
    unit_policy: UnitPolicy,
    kind: UnitKind,
    k: int,
    plans: bool,
) -> tuple[UnitResult, list[Flip], DropTest | None]:
    """Accuracy and score units: per-example outcomes paired, by task and for the unit."""
    p_gold = unit_policy.estimand is Estimand.P_GOLD
    if p_gold and kind is not UnitKind.ACCURACY:
        raise BadInput(f"unit {name}: estimand p_gold needs multiple-choice tasks, not {kind}")
    if p_gold:
        kind = UnitKind.SCORE
    binary = kind is UnitKind.ACCURACY
    subjects: list[SubjectResult] = []
    flips: list[Flip] = []
    all_before: list[float] = []
    all_after: list[float] = []
    for task in tasks:
        metric = metric_of(task, unit_policy, kind)
        if p_gold:
            before = [gold_probability(base) for base, _ in pairs[task.name]]
            after = [gold_probability(cand) for _, cand in pairs[task.name]]
        else:
            before = [outcome_value(base, metric, binary) for base, _ in pairs[task.name]]
            after = [outcome_value(cand, metric, binary) for _, cand in pairs[task.name]]
        if binary:
            flips += [
                _flip(base, cand, regressed=x > y)
                for (base, cand), x, y in zip(pairs[task.name], before, after, strict=True)
                if x != y
            ]
        if before:
            subjects.append(_subject(task.name, before, after))
        all_before += before
        all_after += after
    ours, theirs = np.asarray(all_before), np.asarray(all_after)
    n, b, c = len(ours), int(np.sum(theirs < ours)), int(np.sum(theirs > ours))
    k = k if unit_policy.gate else 1
    unit_pairs = [pair for task in tasks for pair in pairs[task.name]]
    if p_gold:  # tested by betting: in the order the examples fix (gate/betting_order.py)
        order = betting_order([record_key(base) for base, _ in unit_pairs])
        ours, theirs = ours[order], theirs[order]
    stats, test = _outcome_stats(
        ours, theirs, (b, c), binary, unit_policy, policy, k, p_gold, plans
    )
    kl, agreement = _choice_shift(unit_pairs)
    candidate_failures = failure_counts([cand for _, cand in unit_pairs])
    unit = UnitResult(
        name=name,
        kind=kind,
        metric=(
            str(Estimand.P_GOLD)
            if p_gold
            else ", ".join(sorted({metric_of(t, unit_policy, kind) or t.metric for t in tasks}))
        ),
        tasks=tuple(task.name for task in tasks),
        gated=unit_policy.gate,
        rule=unit_policy.rule or policy.rule,
        n=n,
        baseline=float(ours.mean()) if n else None,
        candidate=float(theirs.mean()) if n else None,
        b=b,
        c=c,
        discordance=(b + c) / n if n else None,
        adjusted_pvalue=None,
        change_adjusted_pvalue=None,
        threshold=unit_policy.max_drop or 0.0,
        verdict=Verdict.PASS,
        reason="",
        kl_divergence=kl,
        top1_agreement=agreement,
        baseline_failures=failure_counts([base for base, _ in unit_pairs]),
        candidate_failures=candidate_failures,
        error_rate=error_rate(candidate_failures, n),
        subjects=tuple(subjects) if len(tasks) > 1 or tasks[0].group is not None else (),
        **asdict(stats),
    )
    return unit, flips, test


@dataclass(frozen=True)
class _Tests:
    """What `_outcome_stats` measures; the UnitResult fields of the same names."""

    delta: float | None
    ci: tuple[float, float] | None
    pvalue: float
    change_pvalue: float
    pass_pvalue: float | None
    mde: float | None
    n_needed: int | None
    n_to_pass: int | None
    plan_drop: float | None


def _outcome_stats(
    ours: np.ndarray,
    theirs: np.ndarray,
    flipped: tuple[int, int],
    binary: bool,
    unit_policy: UnitPolicy,
    policy: Policy,
    k: int,
    bounded: bool = False,
    plans: bool = True,
) -> tuple[_Tests, DropTest | None]:
    """Δ, its interval, the p-values, the MDE and the plans of an accuracy or score unit, and
    the test of its drop against any margin.

    `k` is the number of gated units the MDE and the n to detect a drop share alpha with
    (Bonferroni); the n to PASS does not, as each unit's PASS test runs at the full alpha.
    `bounded` tests the scores by betting (p_gold) instead of the bootstrap-t, and plans the
    n to decide by resampling that test (its MDE stays the normal approximation's). Without
    `plans` no n to decide is planned (the betting test's plan costs seconds).
    """
    n, (b, c) = len(ours), flipped
    threshold, rule = unit_policy.max_drop or 0.0, unit_policy.rule or policy.rule
    alpha, plan_drop = policy.alpha / k, PLAN_FACTOR * threshold
    # The PASS test is part of an intersection-union test, at the full alpha (gate/family.py).
    pass_alpha = policy.alpha
    if not n:
        return _Tests(None, None, 1.0, 1.0, None, None, None, None, None), None
    test: DropTest
    needed = to_pass = None
    if binary:
        discordance = (b + c) / n
        change_p = mcnemar_pvalue(b, c, policy.test)
        test = PairedCounts(b, c, n)
        delta, ci = (c - b) / n, paired_diff_ci(b, c, n, CI_ALPHA)
        mde = accuracy_mde(n, discordance, threshold, rule, alpha, policy.power)
        if plans:
            needed = accuracy_n(discordance, plan_drop, threshold, rule, alpha, policy.power)
            to_pass = pass_n(discordance, threshold, pass_alpha, policy.power)
    elif bounded:
        drops = ours - theirs
        test = BoundedDrop(drops)
        delta = float(np.mean(-drops))
        change_p = test.pvalue(0.0, Side.BEYOND)
        ci = bounded_mean_interval(-drops, 1 - CI_ALPHA, -1.0, 1.0)
        se = float(np.std(drops, ddof=1) / math.sqrt(n)) if n > 1 else 0.0
        mde = shift_mde(se, threshold, rule, alpha, policy.power)
        # The n to decide is the betting test's own, by resampling these drops moved to the
        # planned drop (or to none): a normal plan misses the floor its capped stakes set.
        beyond = threshold if rule is Rule.MARGIN else 0.0
        if plans:
            power = policy.power
            needed = betting_n(drops, plan_drop, beyond, Direction.ABOVE, alpha, power, -1, 1)
            to_pass = betting_n(drops, 0.0, threshold, Direction.BELOW, pass_alpha, power, -1, 1)
    else:
        mean = paired_mean_test(ours, theirs, margin=threshold, alpha=CI_ALPHA)
        change_p, delta, ci = mean.pvalue, mean.delta, mean.ci
        # The drop's studentized resamples are the mean's, mirrored (same seed, same draws).
        test = StudentizedShift(-mean.delta, mean.se, -bootstrap_t(theirs - ours))
        mde = shift_mde(mean.se, threshold, rule, alpha, policy.power)
        sd = mean.se * math.sqrt(n)
        if plans:
            needed = shift_n(sd, plan_drop, threshold, rule, alpha, policy.power)
            to_pass = shift_n(sd, 2 * threshold, threshold, Rule.MARGIN, pass_alpha, policy.power)
    margin_p = test.pvalue(threshold, Side.BEYOND)
    return _Tests(
        delta=delta,
        ci=ci,
        pvalue=margin_p if rule is Rule.MARGIN else change_p,
        change_pvalue=change_p,
        pass_pvalue=test.pvalue(threshold, Side.WITHIN),
        mde=mde,
        n_needed=needed,
        n_to_pass=to_pass,
        plan_drop=plan_drop if needed else None,
    ), test


def _as_proxy_estimate(
    unit: UnitResult,
    tasks: Sequence[TaskInfo],
    pairs: dict[str, list[Pair]],
    policy: Policy,
    unit_policy: UnitPolicy,
    k: int,
    design: ProxyDesign,
) -> tuple[UnitResult, DropTest]:
    """Replace a proxy unit's sample figures by stratified estimates of the parent suite, and
    its test by the normal test of the stratified estimate."""
    if unit.kind is not UnitKind.ACCURACY or unit.metric != ", ".join(
        sorted({t.metric for t in tasks})
    ):
        raise BadInput(f"unit {unit.name}: a proxy estimates right/wrong accuracy only")
    strata = design.unit_strata(unit.name)
    where = {(task, doc): h for h, task, doc in design.members(unit.name)}
    counts = np.zeros((4, len(strata)))  # regressions, improvements, baseline right, cand right
    unit_pairs, weights = [], []
    for task in tasks:
        for base, cand in pairs[task.name]:
            key = (task.name, base.doc_id)
            if key not in where:
                raise BadInput(f"task {task.name} doc {base.doc_id}: not in the proxy's design")
            stratum = strata[where[key]]
            x, y = outcome_value(base, None, True), outcome_value(cand, None, True)
            counts[:, where[key]] += (x > y, y > x, x, y)
            unit_pairs.append((base, cand))
            weights.append(1 / stratum.inclusion_probability)
    population = np.array([s.population for s in strata])
    sampled = np.array([s.sampled for s in strata])
    if int(sampled.sum()) != unit.n:
        raise BadInput(f"unit {unit.name}: {unit.n} paired of the {int(sampled.sum())} sampled")
    test = stratified_test(population, sampled, counts[0], counts[1], unit.threshold, CI_ALPHA)
    alpha = policy.alpha / (k if unit_policy.gate else 1)
    rule = unit.rule
    kl, agreement = _choice_shift(unit_pairs, weights)
    shift = NormalShift(-test.delta, test.se)
    unit = replace(
        unit,
        discordance=weighted_mean(population, sampled, counts[0] + counts[1]),
        kl_divergence=kl,
        top1_agreement=agreement,
        baseline=weighted_mean(population, sampled, counts[2]),
        candidate=weighted_mean(population, sampled, counts[3]),
        delta=test.delta,
        ci=test.ci,
        pvalue=test.margin_pvalue if rule is Rule.MARGIN else test.change_pvalue,
        change_pvalue=test.change_pvalue,
        pass_pvalue=shift.pvalue(unit.threshold, Side.WITHIN),
        mde=shift_mde(test.se, unit.threshold, rule, alpha, policy.power),
        n_needed=None,
        n_to_pass=None,
        plan_drop=None,
        proxy=ProxyEstimate(
            parent=design.parent,
            population=int(population.sum()),
            strata=len(strata),
            ci_design=test.ci_design,
            se=test.se,
            se_full=test.se_full,
        ),
    )
    return unit, shift


def _subject(task: str, before: Sequence[float], after: Sequence[float]) -> SubjectResult:
    n = len(before)
    return SubjectResult(
        task=task,
        n=n,
        baseline=sum(before) / n,
        candidate=sum(after) / n,
        delta=(sum(after) - sum(before)) / n,
        b=sum(x > y for x, y in zip(before, after, strict=True)),
        c=sum(y > x for x, y in zip(before, after, strict=True)),
    )


def _flip(base: Record, cand: Record, regressed: bool) -> Flip:
    return Flip(
        task=base.task,
        doc_id=base.doc_id,
        baseline_pred=base.pred,
        candidate_pred=cand.pred,
        target=base.target,
        regressed=regressed,
        candidate_status=str(cand.status),
    )


def _choice_shift(
    pairs: Sequence[Pair], weights: Sequence[float] | None = None
) -> tuple[float | None, float | None]:
    """Mean KL divergence and top-1 agreement over examples both sides scored per choice.

    `weights` (one per pair) weigh each example, as a proxy's 1 / inclusion probability does.
    """
    weights = [1.0] * len(pairs) if weights is None else weights
    by_width: dict[int, tuple[list[list[float]], list[list[float]], list[float]]] = defaultdict(
        lambda: ([], [], [])
    )
    for (base, cand), weight in zip(pairs, weights, strict=True):
        ours, theirs = base.scores.get("loglik"), cand.scores.get("loglik")
        if base.ok and cand.ok and ours and theirs and len(ours) == len(theirs):
            by_width[len(ours)][0].append(ours)
            by_width[len(ours)][1].append(theirs)
            by_width[len(ours)][2].append(weight)
    if not by_width:
        return None, None
    # Stack examples with the same number of choices so each width is one numpy call.
    kls: list[np.ndarray] = []
    agree: list[np.ndarray] = []
    mass: list[np.ndarray] = []
    for ours, theirs, of_width in by_width.values():
        base_arr, cand_arr = np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float)
        kls.append(choice_kl(base_arr, cand_arr))
        agree.append(top1_agreement(base_arr, cand_arr))
        mass.append(np.asarray(of_width))
    w = np.concatenate(mass)
    return (
        float(np.average(np.concatenate(kls), weights=w)),
        float(np.average(np.concatenate(agree), weights=w)),
    )


def _measure_perplexity(
    name: str,
    tasks: Sequence[TaskInfo],
    pairs: Sequence[Pair],
    policy: Policy,
    unit_policy: UnitPolicy,
    k: int,
) -> tuple[UnitResult, DropTest | None]:
    """A perplexity unit: the corpus metric of documents scored on both sides, tested."""
    own = policy.units.get(name)
    metrics = {(own.metric if own else None) or task.metric for task in tasks}
    if len(metrics) > 1:
        raise BadInput(f"unit {name}: its tasks use different metrics {sorted(metrics)}")
    metric = metrics.pop()
    weight_key = PERPLEXITY_WEIGHTS.get("byte_perplexity" if metric == "bits_per_byte" else metric)
    if weight_key is None:
        known = ", ".join([*PERPLEXITY_WEIGHTS, "bits_per_byte"])
        raise BadInput(f"unit {name}: unknown perplexity metric '{metric}' (known: {known})")
    scored = [(base, cand) for base, cand in pairs if base.ok and cand.ok]
    # The document's size is the same on both sides: the baseline's is used.
    for base, cand in scored:
        for record, keys in ((base, ("loglik", weight_key)), (cand, ("loglik",))):
            missing = [key for key in keys if key not in record.metrics]
            if missing:
                raise BadInput(f"task {record.task} doc {record.doc_id}: no {missing[0]} metric")
    threshold, rule = unit_policy.max_relative_increase or 0.0, unit_policy.rule or policy.rule
    log_shift = corpus_shift(
        [base.metrics["loglik"] for base, _ in scored],
        [cand.metrics["loglik"] for _, cand in scored],
        [base.metrics[weight_key] for base, _ in scored],
    )
    test = log_shift.summary(threshold, CI_ALPHA)
    baseline = candidate = delta = mde = None
    shift = RelativeIncrease(log_shift)
    if test.n:
        baseline, candidate = _in_scale(metric, test.baseline), _in_scale(metric, test.candidate)
        delta = test.relative_change
        alpha = policy.alpha / (k if unit_policy.gate else 1)
        mde = math.expm1(shift_mde(test.se, math.log1p(threshold), rule, alpha, policy.power))
    candidate_failures = failure_counts([cand for _, cand in pairs])
    return UnitResult(
        name=name,
        kind=UnitKind.PERPLEXITY,
        metric=metric,
        tasks=tuple(task.name for task in tasks),
        gated=unit_policy.gate,
        rule=rule,
        n=test.n,
        baseline=baseline,
        candidate=candidate,
        delta=delta,
        ci=test.ci if test.n else None,
        b=None,
        c=None,
        discordance=None,
        pvalue=shift.pvalue(threshold, Side.BEYOND) if rule is Rule.MARGIN else test.pvalue,
        adjusted_pvalue=None,
        change_pvalue=test.pvalue,
        pass_pvalue=shift.pvalue(threshold, Side.WITHIN),
        change_adjusted_pvalue=None,
        threshold=threshold,
        verdict=Verdict.PASS,
        reason="",
        mde=mde,
        n_needed=None,
        plan_drop=None,
        kl_divergence=None,
        top1_agreement=None,
        baseline_failures=failure_counts([base for base, _ in pairs]),
        candidate_failures=candidate_failures,
        error_rate=error_rate(candidate_failures, len(pairs)),
    ), (shift if test.n else None)


def _in_scale(metric: str, perplexity: float) -> float:
    """A corpus perplexity in the metric's own scale (bits per byte = log2 byte perplexity)."""
    return math.log2(perplexity) if metric == "bits_per_byte" else perplexity


@dataclass(frozen=True)
class Units:
    """The units' rule: every unit measured (gated or reported), its drop tests, the flips."""

    units: tuple[UnitResult, ...]
    drops: tuple[DropTest | None, ...]
    """Each unit's test of its drop against any margin, which its bounds invert."""
    flips: tuple[Flip, ...] = ()

    def tests(self) -> tuple[Test, ...]:
        """Each gated unit's rule test, within-margin test and no-drop test."""
        found: list[Test] = []
        for unit in self.units:
            if unit.gated:
                found += [
                    Test(Family.FAIL, unit.pvalue),
                    Test(Family.PASS, or_one(unit.pass_pvalue)),
                    Test(Family.CHANGE, unit.change_pvalue),
                ]
        return tuple(found)

    def repeated(self, at_look: Callable[[float], float]) -> Self:
        """Every unit's p-values as repeated p-values."""
        return replace(
            self,
            units=tuple(
                replace(
                    u,
                    pvalue=at_look(u.pvalue),
                    change_pvalue=at_look(u.change_pvalue),
                    pass_pvalue=None if u.pass_pvalue is None else at_look(u.pass_pvalue),
                )
                for u in self.units
            ),
        )

    def settled(
        self, corrected: Sequence[Corrected], policy: Policy, nominal: Callable[[float], float]
    ) -> Self:
        """Each unit with its corrected p-values, the bounds that agree with them, its
        verdict, and the plans only an undecided unit asks for."""
        given = iter(corrected)
        decided = []
        for unit, test in zip(self.units, self.drops, strict=True):
            if unit.gated:
                failing, passing, change = next(given), next(given), next(given)
                unit = replace(
                    unit,
                    adjusted_pvalue=failing.pvalue,
                    change_adjusted_pvalue=change.pvalue,
                    pass_adjusted_pvalue=passing.pvalue,
                )
                levels = (failing.level, passing.level)
            else:
                levels = (policy.alpha, policy.alpha)
            unit = replace(unit, bounds=bounds(unit, test, *map(nominal, levels)))
            decided.append(_planned(unit, policy))
        return replace(self, units=tuple(decided))

    def verdict(self) -> Verdict | None:
        """The worst verdict of a gated unit."""
        return worst([unit.verdict for unit in self.units if unit.gated])


def measure(context: Context, judged: Mapping[str, JudgedSummary]) -> Units:
    """Every unit of the pairing measured; `judged` holds the judge's summary of each judged
    unit."""
    units, drops, flips = [], [], []
    for name, members in context.units.items():
        unit, unit_flips, test = measure_unit(
            name,
            members,
            context.pairs,
            context.policy,
            context.unit_policies[name],
            context.k,
            context.design,
            context.plans,
        )
        units.append(_with_judge(unit, judged.get(name)))
        drops.append(test)
        flips += unit_flips
    flips.sort(key=lambda f: (not f.regressed, f.task, f.doc_id))
    return Units(tuple(units), tuple(drops), tuple(flips))


def _planned(unit: UnitResult, policy: Policy) -> UnitResult:
    """The unit with its verdict, and the one plan ("the examples that would decide") only an
    undecided unit asks: to detect a drop of twice its limit when the drop seen is already
    beyond the limit, the unit is too small or no evidence is asked for a PASS (`n_needed`);
    else to show an unchanged model within the limit (`n_to_pass`). The report's headline,
    notes and the unit's reason all give that one number."""
    verdict, _ = verdict_of(unit, policy)
    if verdict is not Verdict.INCONCLUSIVE:
        unit = replace(unit, n_needed=None, plan_drop=None, n_to_pass=None)
    else:
        too_few = unit.n < policy.min_examples and unit.kind is not UnitKind.PERPLEXITY
        if too_few:
            unit = replace(unit, n_needed=max(policy.min_examples, unit.n_needed or 0))
        drop = unit.delta if unit.kind is UnitKind.PERPLEXITY else -(unit.delta or 0.0)
        detect = (
            too_few
            or (drop or 0.0) > unit.threshold
            or policy.pass_requires is PassRequires.NO_EVIDENCE_OF_HARM
        )
        if detect:
            unit = replace(unit, n_to_pass=None)
        else:
            unit = replace(unit, n_needed=None, plan_drop=None)
    verdict, reason = verdict_of(unit, policy)
    return replace(unit, verdict=verdict, reason=reason)


def _with_judge(unit: UnitResult, summary: JudgedSummary | None) -> UnitResult:
    """A judged unit's result: its summary, and its judge errors among its failures."""
    if summary is None:
        return unit
    errors = summary.judge_errors
    judge_failed = {str(Outcome.JUDGE_ERROR): errors} if errors else {}
    failures = {**unit.candidate_failures, **judge_failed}
    failed = unit.error_rate * unit.n + errors
    return replace(
        unit,
        metric=(
            f"conversation pass (turns judged {summary.mode})"
            if summary.per_turn
            else "judge pairwise: share preferred"
            if summary.mode == "pairwise"
            else f"judge {summary.mode}: score (0-1)"
        ),
        judged=summary,
        candidate_failures=dict(sorted(failures.items())),
        error_rate=failed / (unit.n + errors) if unit.n + errors else 0.0,
    )
