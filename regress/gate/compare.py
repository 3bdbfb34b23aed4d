"""Judge every gated unit of a paired candidate and baseline (pairing: `regress.gate.pairing`).

Pairing is by (task, doc_id) with equal doc_hash. A gated unit is a task, or a group: every
task whose TaskInfo.group is set belongs to that group's unit (`mmlu_anatomy` to `mmlu`), and
the group's members are reported as subjects, not gated one by one.

A unit is one of three kinds, by what its records hold:
- accuracy: 0/1 `correct` (or a 0/1 metric the policy names): one-sided McNemar test
  against no drop, Tango's score test against a drop of max_drop, Tango's interval for Δ,
  flips listed;
- score: a per-example score in [0, 1] with `correct` None (TruthfulQA MC2): bootstrap-t
  tests of the mean, b and c count the examples that scored lower and higher;
- perplexity (loglikelihood_rolling tasks): sign-flip tests of the length-weighted corpus
  log-ratio, the very quantity whose relative change max_relative_increase judges.

Each unit's rule (`margin` or `change`, regress.gate.rules) says which test decides a REGRESSION;
the no-drop test always decides whether a unit that did not regress is INCONCLUSIVE.

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
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np

from regress.core.errors import BadInput, ExitCode
from regress.core.manifest import Manifest, Run, TaskInfo
from regress.core.proxy_design import ProxyDesign
from regress.core.records import Record, Status
from regress.gate.failure_rates import FailureRate, failure_rates, generates
from regress.gate.golden_rules import GoldenItems, GoldenResult, judge_golden
from regress.gate.pairing import Pair, pair_runs
from regress.gate.policy import Inconclusive, Policy, UnitPolicy
from regress.gate.power import accuracy_mde, accuracy_n, shift_mde, shift_n
from regress.gate.results import (
    MAX_FLIPS,
    Comparison,
    Fingerprint,
    Flip,
    ProxyEstimate,
    SubjectResult,
    UnitKind,
    UnitResult,
    Verdict,
)
from regress.gate.rules import Rule, inconclusive, regression
from regress.gate.stats import (
    adjust_pvalues,
    choice_kl,
    corpus_ratio_test,
    margin_pvalue,
    mcnemar_pvalue,
    paired_diff_ci,
    paired_mean_test,
    top1_agreement,
)
from regress.gate.stratified import stratified_test, weighted_mean
from regress.run.failures import FAILURES

CI_ALPHA = 0.05
"""The confidence interval of Δ is always a 95% interval, whatever the policy's alpha."""
PLAN_FACTOR = 2
"""The n that would decide is planned for a true drop of twice the unit's threshold: a drop
worth catching, stated in advance rather than read off the data (an observed drop that made a
unit stand out overstates the true one)."""
PERPLEXITY_WEIGHTS = {"word_perplexity": "n_words", "byte_perplexity": "n_bytes"}
"""Per-document metric holding each perplexity's denominator (bits_per_byte uses bytes too)."""
ROLLING = "loglikelihood_rolling"
MISMATCH_REFUSED = "--allow-mismatch pairs identical documents only"


@dataclass(frozen=True)
class Paired:
    """A candidate run matched with its baseline once, example by example, for every rule."""

    tasks: tuple[TaskInfo, ...]
    """The baseline's tasks that pair, in name order."""
    pairs: dict[str, list[Pair]]
    """Per task name: (baseline, candidate) records, in the baseline's doc_id order."""
    unpaired: int
    warnings: tuple[str, ...]

    @property
    def units(self) -> dict[str, list[TaskInfo]]:
        """The gated units of the paired tasks."""
        return units_of(self.tasks)


def pair(baseline: Run, candidate: Run, allow_mismatch: bool = False) -> Paired:
    """Pair `candidate` with `baseline` for the gate.

    Raises BadInput when a baseline task is missing from the candidate or its dataset or
    prompt hash differs, unless `allow_mismatch` (then only identical documents are paired,
    with a warning).
    """
    warnings: list[str] = []
    tasks = _compatible_tasks(baseline.manifest, candidate.manifest, allow_mismatch, warnings)
    if not tasks:
        raise BadInput("nothing to compare: the baseline and the candidate share no task")
    pairing = pair_runs(baseline, candidate, tasks)
    return Paired(
        tasks=tuple(tasks),
        pairs=pairing.pairs,
        unpaired=pairing.unpaired,
        warnings=(*warnings, *pairing.warnings),
    )


def compare(
    baseline: Run,
    candidate: Run,
    policy: Policy,
    allow_mismatch: bool = False,
    golden_items: GoldenItems | None = None,
) -> Comparison:
    """Pair `candidate` with `baseline`, test every unit and give the verdict and exit code
    (`pair`, then `judge`); `golden_items` names the golden sets' items in reports."""
    paired = pair(baseline, candidate, allow_mismatch)
    return judge(baseline, candidate, paired, policy, golden_items)


def judge(
    baseline: Run,
    candidate: Run,
    paired: Paired,
    policy: Policy,
    golden_items: GoldenItems | None = None,
) -> Comparison:
    """Every rule of the gate on one pairing, and the verdict that sees them all: each unit's
    test, the failure-class rates and the golden sets' rules."""
    pairs, unpaired, tasks = paired.pairs, paired.unpaired, paired.tasks
    warnings = list(paired.warnings)
    design = baseline.manifest.proxy
    if design is not None and (unpaired or len(tasks) < len(baseline.manifest.tasks)):
        raise BadInput(
            f"{baseline.manifest.name} is a proxy of {design.parent}: its estimate needs every "
            f"sampled example paired, {unpaired} are not; rerun the candidate on the proxy"
        )
    units = paired.units
    for name in sorted(set(policy.units) - set(units)):
        warnings.append(f"policy names unit '{name}', which is not in this suite")
    unit_policies = {name: policy.for_unit(name) for name in units}
    k = max(1, sum(unit_policy.gate for unit_policy in unit_policies.values()))
    measured = [
        _measure(name, members, pairs, policy, unit_policies[name], k, design)
        for name, members in units.items()
    ]
    results = _judge_all([unit for unit, _ in measured], policy)
    for unit in results:
        rate = _error_rate(unit.baseline_failures, unit.n)
        if rate > policy.max_error_rate:
            warnings.append(
                f"{unit.name}: {rate:.1%} of the baseline's examples failed and count as wrong"
            )
    flips = sorted(
        (flip for _, unit_flips in measured for flip in unit_flips),
        key=lambda f: (not f.regressed, f.task, f.doc_id),
    )
    failures = _failure_rates(units, pairs, policy, unit_policies)
    golden = judge_golden(baseline, tasks, pairs, policy.max_relative_drop, golden_items)
    verdict, exit_code = decide(results, failures, golden, policy)
    return Comparison(
        verdict=verdict,
        exit_code=exit_code,
        units=results,
        flips=tuple(flips[:MAX_FLIPS]),
        n_flips=len(flips),
        unpaired=unpaired,
        warnings=tuple(warnings),
        baseline=Fingerprint.of(baseline.manifest),
        candidate=Fingerprint.of(candidate.manifest),
        policy=policy,
        suite=baseline.manifest.suite_name,
        command=candidate.manifest.command,
        failures=failures,
        golden=golden,
    )


def _failure_rates(
    units: dict[str, list[TaskInfo]],
    pairs: dict[str, list[Pair]],
    policy: Policy,
    unit_policies: dict[str, UnitPolicy],
) -> tuple[FailureRate, ...]:
    """Failure-class rates of the generation units; gated ones share one Bonferroni."""
    generating = {
        name: [pair for task in members for pair in pairs[task.name]]
        for name, members in units.items()
    }
    generating = {name: ps for name, ps in generating.items() if generates(ps)}
    gated = [name for name in generating if unit_policies[name].gate]
    n_tests = max(1, len(gated) * len(FAILURES))
    found: list[FailureRate] = []
    for name, unit_pairs in generating.items():
        threshold = policy.max_failure_increase if name in gated else None
        found += failure_rates(name, unit_pairs, threshold, policy.alpha, n_tests)
    return tuple(found)


def _compatible_tasks(
    baseline: Manifest, candidate: Manifest, allow_mismatch: bool, warnings: list[str]
) -> list[TaskInfo]:
    """The baseline's tasks that can be paired, in name order; refuse incompatible ones."""
    tasks = []
    for name in sorted(baseline.tasks):
        info, other = baseline.tasks[name], candidate.tasks.get(name)
        if other is None:
            problem = f"task {name}: in the baseline but not in the candidate run"
        else:
            problem = hash_difference(info, (other.dataset_hash, other.prompt_hash))
        if problem and not allow_mismatch:
            raise BadInput(f"{problem}; {MISMATCH_REFUSED}")
        if problem:
            warnings.append(f"{problem}; pairing identical documents only")
        if other is not None:
            tasks.append(info)
    for name in sorted(set(candidate.tasks) - set(baseline.tasks)):
        warnings.append(f"task {name}: only in the candidate run, not compared")
    return tasks


def hash_difference(base: TaskInfo, candidate: tuple[str, str]) -> str:
    """How the candidate's (dataset hash, prompt hash) of a task differ from the baseline's
    ("" when they do not)."""
    for label, ours, theirs in (
        ("dataset", base.dataset_hash, candidate[0]),
        ("prompt", base.prompt_hash, candidate[1]),
    ):
        if ours != theirs:
            return (
                f"task {base.name}: {label} hash differs "
                f"(baseline {ours[:12]}, candidate {theirs[:12]})"
            )
    return ""


def units_of(tasks: Sequence[TaskInfo]) -> dict[str, list[TaskInfo]]:
    """The gated units of these tasks, by name: a task alone, or its group's members."""
    units: dict[str, list[TaskInfo]] = defaultdict(list)
    for task in tasks:
        units[task.group or task.name].append(task)
    return dict(sorted(units.items()))


def unit_kind(name: str, tasks: Sequence[TaskInfo], records: dict[str, list[Record]]) -> UnitKind:
    """What a unit pairs, from its tasks and the baseline's records of them."""
    kinds = set()
    for task in tasks:
        if task.output_type == ROLLING:
            kinds.add(UnitKind.PERPLEXITY)
        elif any(base.ok and base.correct is None for base in records.get(task.name, [])):
            kinds.add(UnitKind.SCORE)
        else:
            kinds.add(UnitKind.ACCURACY)
    if len(kinds) > 1:
        raise BadInput(f"unit {name}: mixes {' and '.join(sorted(kinds))} tasks; gate them apart")
    return kinds.pop()


def _metric_of(task: TaskInfo, unit_policy: UnitPolicy, kind: UnitKind) -> str | None:
    """The metric a task of the unit pairs on; None means the record's 0/1 `correct`."""
    override = unit_policy.metric
    if kind is UnitKind.SCORE:
        return override or task.metric
    return None if override in (None, task.metric) else override


def _value(record: Record, metric: str | None, binary: bool) -> float:
    """The example's outcome; a failed example is wrong (see the module docstring)."""
    if not record.ok:
        return 0.0
    value = record.correct if metric is None else record.metrics.get(metric)
    if not isinstance(value, int | float) or (binary and value not in (0, 1)):
        expected = "not 0/1" if binary else "not a number"
        raise BadInput(
            f"task {record.task} doc {record.doc_id}: {metric or 'correct'} is {value!r}, "
            f"{expected}; the policy can name another metric for this unit"
        )
    return float(value)


def _failures(records: Sequence[Record]) -> dict[str, int]:
    counts = Counter(str(r.status) for r in records if r.status != Status.OK)
    return dict(sorted(counts.items()))


def _error_rate(failures: dict[str, int], n: int) -> float:
    """Share of n examples that failed outright (truncated prompts were still scored)."""
    failed = sum(k for status, k in failures.items() if status != Status.TRUNCATED)
    return failed / n if n else 0.0


def _measure(
    name: str,
    tasks: Sequence[TaskInfo],
    pairs: dict[str, list[Pair]],
    policy: Policy,
    unit_policy: UnitPolicy,
    k: int,
    design: ProxyDesign | None = None,
) -> tuple[UnitResult, list[Flip]]:
    """A unit's measurements and flips; `_judge` fills in its verdict afterwards.

    `k` is the number of gated units, which the MDE and the n that would decide are planned
    for. With a proxy's `design`, the unit's figures estimate the parent suite's.
    """
    kind = unit_kind(name, tasks, {t.name: [base for base, _ in pairs[t.name]] for t in tasks})
    if kind is UnitKind.PERPLEXITY:
        unit_pairs = [pair for task in tasks for pair in pairs[task.name]]
        return _measure_perplexity(name, tasks, unit_pairs, policy, unit_policy, k), []
    unit, flips = _measure_outcomes(name, tasks, pairs, policy, unit_policy, kind, k)
    if design is not None:
        unit = _as_proxy_estimate(unit, tasks, pairs, policy, unit_policy, k, design)
    return unit, flips


def _measure_outcomes(
    name: str,
    tasks: Sequence[TaskInfo],
    pairs: dict[str, list[Pair]],
    policy: Policy,
    unit_policy: UnitPolicy,
    kind: UnitKind,
    k: int,
) -> tuple[UnitResult, list[Flip]]:
    """Accuracy and score units: per-example outcomes paired, by task and for the unit."""
    binary = kind is UnitKind.ACCURACY
    subjects: list[SubjectResult] = []
    flips: list[Flip] = []
    all_before: list[float] = []
    all_after: list[float] = []
    for task in tasks:
        metric = _metric_of(task, unit_policy, kind)
        before = [_value(base, metric, binary) for base, _ in pairs[task.name]]
        after = [_value(cand, metric, binary) for _, cand in pairs[task.name]]
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
    stats = _outcome_stats(ours, theirs, (b, c), binary, unit_policy, policy, k)
    unit_pairs = [pair for task in tasks for pair in pairs[task.name]]
    kl, agreement = _choice_shift(unit_pairs)
    candidate_failures = _failures([cand for _, cand in unit_pairs])
    unit = UnitResult(
        name=name,
        kind=kind,
        metric=", ".join(sorted({_metric_of(t, unit_policy, kind) or t.metric for t in tasks})),
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
        baseline_failures=_failures([base for base, _ in unit_pairs]),
        candidate_failures=candidate_failures,
        error_rate=_error_rate(candidate_failures, n),
        subjects=tuple(subjects) if len(tasks) > 1 or tasks[0].group is not None else (),
        **asdict(stats),
    )
    return unit, flips


@dataclass(frozen=True)
class _Tests:
    """What `_outcome_stats` measures; the UnitResult fields of the same names."""

    delta: float | None
    ci: tuple[float, float] | None
    pvalue: float
    change_pvalue: float
    mde: float | None
    n_needed: int | None
    plan_drop: float | None


def _outcome_stats(
    ours: np.ndarray,
    theirs: np.ndarray,
    flipped: tuple[int, int],
    binary: bool,
    unit_policy: UnitPolicy,
    policy: Policy,
    k: int,
) -> _Tests:
    """Δ, its interval, both p-values, the MDE and the plan of an accuracy or score unit.

    `k` is the number of gated units the MDE and the plan share alpha with (Bonferroni).
    """
    n, (b, c) = len(ours), flipped
    threshold, rule = unit_policy.max_drop or 0.0, unit_policy.rule or policy.rule
    alpha, plan_drop = policy.alpha / k, PLAN_FACTOR * threshold
    if not n:
        return _Tests(None, None, 1.0, 1.0, None, None, None)
    if binary:
        discordance = (b + c) / n
        change_p = mcnemar_pvalue(b, c, policy.test)
        margin_p = margin_pvalue(b, c, n, threshold)
        delta, ci = (c - b) / n, paired_diff_ci(b, c, n, CI_ALPHA)
        mde = accuracy_mde(n, discordance, threshold, rule, alpha, policy.power)
        needed = accuracy_n(discordance, plan_drop, threshold, rule, alpha, policy.power)
    else:
        test = paired_mean_test(ours, theirs, margin=threshold, alpha=CI_ALPHA)
        change_p, margin_p, delta, ci = test.pvalue, test.margin_pvalue, test.delta, test.ci
        mde = shift_mde(test.se, threshold, rule, alpha, policy.power)
        sd = test.se * math.sqrt(n)
        needed = shift_n(sd, plan_drop, threshold, rule, alpha, policy.power)
    return _Tests(
        delta=delta,
        ci=ci,
        pvalue=margin_p if rule is Rule.MARGIN else change_p,
        change_pvalue=change_p,
        mde=mde,
        n_needed=needed,
        plan_drop=plan_drop if needed else None,
    )


def _as_proxy_estimate(
    unit: UnitResult,
    tasks: Sequence[TaskInfo],
    pairs: dict[str, list[Pair]],
    policy: Policy,
    unit_policy: UnitPolicy,
    k: int,
    design: ProxyDesign,
) -> UnitResult:
    """Replace a proxy unit's sample figures by stratified estimates of the parent suite."""
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
            x, y = _value(base, None, True), _value(cand, None, True)
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
    return replace(
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
        mde=shift_mde(test.se, unit.threshold, rule, alpha, policy.power),
        n_needed=None,
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
    kls, agree, mass = [], [], []
    for ours, theirs, weight in by_width.values():
        base_arr, cand_arr = np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float)
        kls.append(choice_kl(base_arr, cand_arr))
        agree.append(top1_agreement(base_arr, cand_arr))
        mass.append(np.asarray(weight))
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
) -> UnitResult:
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
    test = corpus_ratio_test(
        [base.metrics["loglik"] for base, _ in scored],
        [cand.metrics["loglik"] for _, cand in scored],
        [base.metrics[weight_key] for base, _ in scored],
        margin=threshold,
        alpha=CI_ALPHA,
    )
    baseline = candidate = delta = mde = None
    if test.n:
        baseline, candidate = _in_scale(metric, test.baseline), _in_scale(metric, test.candidate)
        delta = test.relative_change
        alpha = policy.alpha / (k if unit_policy.gate else 1)
        mde = math.expm1(shift_mde(test.se, math.log1p(threshold), rule, alpha, policy.power))
    candidate_failures = _failures([cand for _, cand in pairs])
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
        pvalue=test.margin_pvalue if rule is Rule.MARGIN else test.pvalue,
        adjusted_pvalue=None,
        change_pvalue=test.pvalue,
        change_adjusted_pvalue=None,
        threshold=threshold,
        verdict=Verdict.PASS,
        reason="",
        mde=mde,
        n_needed=None,
        plan_drop=None,
        kl_divergence=None,
        top1_agreement=None,
        baseline_failures=_failures([base for base, _ in pairs]),
        candidate_failures=candidate_failures,
        error_rate=_error_rate(candidate_failures, len(pairs)),
    )


def _in_scale(metric: str, perplexity: float) -> float:
    """A corpus perplexity in the metric's own scale (bits per byte = log2 byte perplexity)."""
    return math.log2(perplexity) if metric == "bits_per_byte" else perplexity


def _judge_all(units: Sequence[UnitResult], policy: Policy) -> tuple[UnitResult, ...]:
    """Correct the gated units' p-values together, then give every unit its verdict.

    Two families, each corrected over the gated units: the rules' p-values (which decide a
    REGRESSION) and the no-drop p-values (which decide INCONCLUSIVE).
    """
    gated = [i for i, unit in enumerate(units) if unit.gated]
    rule_p = adjust_pvalues([units[i].pvalue for i in gated], policy.correction)
    change_p = adjust_pvalues([units[i].change_pvalue for i in gated], policy.correction)
    adjusted = dict(zip(gated, zip(rule_p, change_p, strict=True), strict=True))
    judged = []
    for i, unit in enumerate(units):
        rule_adj, change_adj = adjusted.get(i, (None, None))
        unit = replace(unit, adjusted_pvalue=rule_adj, change_adjusted_pvalue=change_adj)
        verdict, reason = _judge(unit, policy)
        # The plan answers "how many examples would decide": only an undecided unit asks.
        if verdict is not Verdict.INCONCLUSIVE:
            unit = replace(unit, n_needed=None, plan_drop=None)
        elif unit.n < policy.min_examples and unit.kind is not UnitKind.PERPLEXITY:
            unit = replace(unit, n_needed=max(policy.min_examples, unit.n_needed or 0))
        judged.append(replace(unit, verdict=verdict, reason=reason))
    return tuple(judged)


def _judge(unit: UnitResult, policy: Policy) -> tuple[Verdict, str]:
    """The unit's verdict and the one line that says why."""
    if unit.error_rate > policy.max_error_rate:
        return Verdict.ERROR, (
            f"{unit.error_rate:.1%} of the candidate's examples failed "
            f"(max_error_rate {policy.max_error_rate:.1%})"
        )
    perplexity = unit.kind is UnitKind.PERPLEXITY
    if unit.n == 0 or unit.delta is None or unit.ci is None:
        what = "document scored" if perplexity else "paired example"
        return Verdict.INCONCLUSIVE, f"no {what} on both sides"
    if not perplexity and unit.n < policy.min_examples:
        reason = f"only {unit.n} paired examples (min_examples {policy.min_examples})"
        return Verdict.INCONCLUSIVE, reason
    drop, upper = (unit.delta, unit.ci[1]) if perplexity else (-unit.delta, -unit.ci[0])
    rule_p = _adjusted(unit.pvalue, unit.adjusted_pvalue)
    change_p = _adjusted(unit.change_pvalue, unit.change_adjusted_pvalue)
    regressed = bool(regression(unit.rule, policy.alpha, rule_p, drop, unit.threshold))
    if regressed:
        return Verdict.REGRESSION, _regression_reason(unit, drop, rule_p, policy.alpha)
    if inconclusive(regressed, policy.alpha, change_p, upper, unit.threshold):
        return Verdict.INCONCLUSIVE, (
            f"worse than the baseline ({_p_text(unit, change_p)} < alpha {policy.alpha}, "
            f"H0: no drop), but the 95% CI reaches a {_noun(unit)} of {_amount(unit, upper)} "
            f"> {_limit(unit)}"
        )
    return Verdict.PASS, _pass_reason(unit, drop, change_p, policy.alpha)


def _adjusted(raw: float, adjusted: float | None) -> float:
    """The p a verdict uses: adjusted for gated units, the unit's own for ungated ones."""
    return raw if adjusted is None else adjusted


def _regression_reason(unit: UnitResult, drop: float, p: float, alpha: float) -> str:
    shown = f"{_noun(unit)} of {_amount(unit, drop)} > {_limit(unit)}"
    if unit.rule is Rule.MARGIN:
        return f"{shown}: {_p_text(unit, p)} < alpha {alpha} (H0: within {_limit(unit)})"
    return f"{shown} and {_p_text(unit, p)} < alpha {alpha} (H0: no drop)"


def _pass_reason(unit: UnitResult, drop: float, change_p: float, alpha: float) -> str:
    if change_p < alpha:
        return f"worse than the baseline, but within {_limit(unit)} (95% CI)"
    if drop <= unit.threshold:
        return f"{_change(unit)}, within {_limit(unit)}"
    return (
        f"{_noun(unit)} of {_amount(unit, drop)} > {_limit(unit)} is not significant "
        f"({_p_text(unit, change_p)} >= alpha {alpha}, H0: no drop)"
    )


def _change(unit: UnitResult) -> str:
    """The observed change as the tables show it: Δ in points, or the metric's change."""
    if unit.kind is UnitKind.PERPLEXITY:
        return f"{unit.metric} {unit.delta or 0.0:+.2%}"
    return f"Δ {(unit.delta or 0.0) * 100:+.1f} pts"


def _noun(unit: UnitResult) -> str:
    return f"{unit.metric} increase" if unit.kind is UnitKind.PERPLEXITY else "drop"


def _amount(unit: UnitResult, value: float) -> str:
    """A drop (points) or a relative increase (percent), as the unit's threshold is written."""
    if unit.kind is UnitKind.PERPLEXITY:
        return f"{value:+.2%}"
    return _points(value)


def _limit(unit: UnitResult) -> str:
    if unit.kind is UnitKind.PERPLEXITY:
        return f"max_relative_increase {unit.threshold:.2%}"
    return f"max_drop {_points(unit.threshold)}"


def _p_text(unit: UnitResult, p: float) -> str:
    return f"{'adj. ' if unit.gated else ''}p {p:.3g}"


def _points(fraction: float) -> str:
    return f"{fraction * 100:.1f} pts"


def decide(
    units: Sequence[UnitResult],
    failures: Sequence[FailureRate],
    golden: Sequence[GoldenResult],
    policy: Policy,
) -> tuple[Verdict, ExitCode]:
    """The gate's one verdict, from every rule's outcome: ERROR when a gated unit's run
    failed; else REGRESSION when a gated unit regressed, a gated failure-class rate rose or
    a golden set failed; else INCONCLUSIVE when a gated unit could not decide; else PASS."""
    verdicts = {unit.verdict for unit in units if unit.gated}
    if Verdict.ERROR in verdicts:
        return Verdict.ERROR, ExitCode.RUN_FAILED
    if (
        Verdict.REGRESSION in verdicts
        or any(f.regressed for f in failures)
        or any(g.failed for g in golden)
    ):
        return Verdict.REGRESSION, ExitCode.REGRESSION
    if Verdict.INCONCLUSIVE in verdicts:
        failing = policy.inconclusive == Inconclusive.FAIL
        return Verdict.INCONCLUSIVE, ExitCode.REGRESSION if failing else ExitCode.OK
    return Verdict.PASS, ExitCode.OK
