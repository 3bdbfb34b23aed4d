"""Judge every gated unit of a paired candidate and baseline (pairing: `regress.pairing`).

Pairing is by (task, doc_id) with equal doc_hash. A gated unit is a task, or a group: every
task whose TaskInfo.group is set belongs to that group's unit (`mmlu_anatomy` to `mmlu`), and
the group's members are reported as subjects, not gated one by one.

A unit is one of three kinds, by what its records hold:
- accuracy: 0/1 `correct` (or a 0/1 metric the policy names): one-sided McNemar test,
  Tango's interval for Δ, flips listed;
- score: a per-example score in [0, 1] with `correct` None (TruthfulQA MC2): paired t test
  on the mean, b and c count the examples that scored lower and higher;
- perplexity (loglikelihood_rolling tasks): Wilcoxon signed-rank test on per-document
  log-likelihood per word or byte, and the relative change of the corpus perplexity.

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
from dataclasses import replace

import numpy as np

from regress.comparison import (
    MAX_FLIPS,
    Comparison,
    Fingerprint,
    Flip,
    SubjectResult,
    UnitKind,
    UnitResult,
    Verdict,
)
from regress.errors import BadInput, ExitCode
from regress.manifest import Manifest, Run, TaskInfo
from regress.pairing import Pair, pair_runs
from regress.policy import Inconclusive, Policy
from regress.records import Record, Status
from regress.stats import (
    adjust_pvalues,
    choice_kl,
    connor_n,
    mcnemar_pvalue,
    paired_diff_ci,
    paired_mean_n,
    paired_mean_test,
    paired_relative_test,
    top1_agreement,
)

CI_ALPHA = 0.05
"""The confidence interval of Δ is always a 95% interval, whatever the policy's alpha."""
PERPLEXITY_WEIGHTS = {"word_perplexity": "n_words", "byte_perplexity": "n_bytes"}
"""Per-document metric holding each perplexity's denominator (bits_per_byte uses bytes too)."""
ROLLING = "loglikelihood_rolling"


def compare(
    baseline: Run, candidate: Run, policy: Policy, allow_mismatch: bool = False
) -> Comparison:
    """Pair `candidate` with `baseline`, test every unit and give the verdict and exit code.

    Raises BadInput when a baseline task is missing from the candidate or its dataset or
    prompt hash differs, unless `allow_mismatch` (then only identical documents are paired,
    with a warning).
    """
    warnings: list[str] = []
    tasks = _compatible_tasks(baseline.manifest, candidate.manifest, allow_mismatch, warnings)
    if not tasks:
        raise BadInput("nothing to compare: the baseline and the candidate share no task")
    pairing = pair_runs(baseline, candidate, tasks)
    pairs, unpaired = pairing.pairs, pairing.unpaired
    warnings.extend(pairing.warnings)
    units = _units(tasks)
    for name in sorted(set(policy.units) - set(units)):
        warnings.append(f"policy names unit '{name}', which is not in this suite")
    k = max(1, sum(policy.for_unit(name).gate for name in units))
    measured = [_measure(name, members, pairs, policy, k) for name, members in units.items()]
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
    verdict, exit_code = _overall(results, policy)
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
    )


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
            problem = _hash_difference(info, other)
        if problem and not allow_mismatch:
            raise BadInput(f"{problem}; --allow-mismatch pairs identical documents only")
        if problem:
            warnings.append(f"{problem}; pairing identical documents only")
        if other is not None:
            tasks.append(info)
    for name in sorted(set(candidate.tasks) - set(baseline.tasks)):
        warnings.append(f"task {name}: only in the candidate run, not compared")
    return tasks


def _hash_difference(base: TaskInfo, cand: TaskInfo) -> str:
    for label, ours, theirs in (
        ("dataset", base.dataset_hash, cand.dataset_hash),
        ("prompt", base.prompt_hash, cand.prompt_hash),
    ):
        if ours != theirs:
            return (
                f"task {base.name}: {label} hash differs "
                f"(baseline {ours[:12]}, candidate {theirs[:12]})"
            )
    return ""


def _units(tasks: Sequence[TaskInfo]) -> dict[str, list[TaskInfo]]:
    units: dict[str, list[TaskInfo]] = defaultdict(list)
    for task in tasks:
        units[task.group or task.name].append(task)
    return dict(sorted(units.items()))


def _kind(name: str, tasks: Sequence[TaskInfo], pairs: dict[str, list[Pair]]) -> UnitKind:
    kinds = set()
    for task in tasks:
        if task.output_type == ROLLING:
            kinds.add(UnitKind.PERPLEXITY)
        elif any(base.ok and base.correct is None for base, _ in pairs[task.name]):
            kinds.add(UnitKind.SCORE)
        else:
            kinds.add(UnitKind.ACCURACY)
    if len(kinds) > 1:
        raise BadInput(f"unit {name}: mixes {' and '.join(sorted(kinds))} tasks; gate them apart")
    return kinds.pop()


def _metric_of(task: TaskInfo, policy: Policy, kind: UnitKind) -> str | None:
    """The metric a task pairs on; None means the record's 0/1 `correct`."""
    override = policy.for_unit(task.group or task.name).metric
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
    name: str, tasks: Sequence[TaskInfo], pairs: dict[str, list[Pair]], policy: Policy, k: int
) -> tuple[UnitResult, list[Flip]]:
    """A unit's measurements and flips; `_judge` fills in its verdict afterwards.

    `k` is the number of gated units, which the n that would decide is planned for.
    """
    kind = _kind(name, tasks, pairs)
    if kind is UnitKind.PERPLEXITY:
        unit_pairs = [pair for task in tasks for pair in pairs[task.name]]
        return _measure_perplexity(name, tasks, unit_pairs, policy), []
    return _measure_outcomes(name, tasks, pairs, policy, kind, k)


def _measure_outcomes(
    name: str,
    tasks: Sequence[TaskInfo],
    pairs: dict[str, list[Pair]],
    policy: Policy,
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
        metric = _metric_of(task, policy, kind)
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
    unit_policy = policy.for_unit(name)
    threshold = unit_policy.max_drop or 0.0
    k = k if unit_policy.gate else 1
    if binary:
        delta, ci = (c - b) / n if n else None, paired_diff_ci(b, c, n, CI_ALPHA)
        pvalue = mcnemar_pvalue(b, c, policy.test)
        needed = _connor_needed(n, b, c, threshold, policy, k)
    else:
        test = paired_mean_test(ours, theirs, CI_ALPHA)
        delta, ci, pvalue = test.delta if n else None, test.ci, test.pvalue
        needed = None
        if n and -test.delta > threshold:
            needed = paired_mean_n(test.sd, -test.delta, policy.alpha, policy.power, units=k)
    unit_pairs = [pair for task in tasks for pair in pairs[task.name]]
    kl, agreement = _choice_shift(unit_pairs)
    candidate_failures = _failures([cand for _, cand in unit_pairs])
    unit = UnitResult(
        name=name,
        kind=kind,
        metric=", ".join(sorted({_metric_of(t, policy, kind) or t.metric for t in tasks})),
        tasks=tuple(task.name for task in tasks),
        gated=unit_policy.gate,
        n=n,
        baseline=float(ours.mean()) if n else None,
        candidate=float(theirs.mean()) if n else None,
        delta=delta,
        ci=ci if n else None,
        b=b,
        c=c,
        discordance=(b + c) / n if n else None,
        pvalue=pvalue,
        adjusted_pvalue=None,
        threshold=threshold,
        verdict=Verdict.PASS,
        reason="",
        n_needed=needed,
        kl_divergence=kl,
        top1_agreement=agreement,
        baseline_failures=_failures([base for base, _ in unit_pairs]),
        candidate_failures=candidate_failures,
        error_rate=_error_rate(candidate_failures, n),
        subjects=tuple(subjects) if len(tasks) > 1 or tasks[0].group is not None else (),
    )
    return unit, flips


def _connor_needed(n: int, b: int, c: int, threshold: float, policy: Policy, k: int) -> int | None:
    """Connor's n at the observed discordance and drop, when the drop exceeds max_drop."""
    if not n or (b - c) / n <= threshold:
        return None
    return connor_n((b + c) / n, (b - c) / n, policy.alpha, policy.power, units=k)


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


def _choice_shift(pairs: Sequence[Pair]) -> tuple[float | None, float | None]:
    """Mean KL divergence and top-1 agreement over examples both sides scored per choice."""
    by_width: dict[int, tuple[list[list[float]], list[list[float]]]] = defaultdict(lambda: ([], []))
    for base, cand in pairs:
        ours, theirs = base.scores.get("loglik"), cand.scores.get("loglik")
        if base.ok and cand.ok and ours and theirs and len(ours) == len(theirs):
            by_width[len(ours)][0].append(ours)
            by_width[len(ours)][1].append(theirs)
    if not by_width:
        return None, None
    # Stack examples with the same number of choices so each width is one numpy call.
    kls, agree = [], []
    for ours, theirs in by_width.values():
        base_arr, cand_arr = np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float)
        kls.append(choice_kl(base_arr, cand_arr))
        agree.append(top1_agreement(base_arr, cand_arr))
    return float(np.concatenate(kls).mean()), float(np.concatenate(agree).mean())


def _measure_perplexity(
    name: str, tasks: Sequence[TaskInfo], pairs: Sequence[Pair], policy: Policy
) -> UnitResult:
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
    test = paired_relative_test(
        [base.metrics["loglik"] for base, _ in scored],
        [cand.metrics["loglik"] for _, cand in scored],
        [base.metrics[weight_key] for base, _ in scored],
    )
    baseline = candidate = delta = None
    if test.n:
        baseline, candidate = _in_scale(metric, test.baseline), _in_scale(metric, test.candidate)
        delta = candidate / baseline - 1
    candidate_failures = _failures([cand for _, cand in pairs])
    unit_policy = policy.for_unit(name)
    return UnitResult(
        name=name,
        kind=UnitKind.PERPLEXITY,
        metric=metric,
        tasks=tuple(task.name for task in tasks),
        gated=unit_policy.gate,
        n=test.n,
        baseline=baseline,
        candidate=candidate,
        delta=delta,
        ci=None,
        b=None,
        c=None,
        discordance=None,
        pvalue=test.pvalue,
        adjusted_pvalue=None,
        threshold=unit_policy.max_relative_increase or 0.0,
        verdict=Verdict.PASS,
        reason="",
        n_needed=None,
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
    """Correct the gated units' p-values together, then give every unit its verdict."""
    gated = [i for i, unit in enumerate(units) if unit.gated]
    pvalues = adjust_pvalues([units[i].pvalue for i in gated], policy.correction)
    adjusted = dict(zip(gated, pvalues, strict=True))
    return tuple(_judge(unit, adjusted.get(i), policy) for i, unit in enumerate(units))


def _judge(unit: UnitResult, adjusted: float | None, policy: Policy) -> UnitResult:
    """Fill in the unit's verdict from its measurements, adjusted p and the policy."""
    p = unit.pvalue if adjusted is None else adjusted
    n_needed = None
    if unit.error_rate > policy.max_error_rate:
        verdict = Verdict.ERROR
        reason = (
            f"{unit.error_rate:.1%} of the candidate's examples failed "
            f"(max_error_rate {policy.max_error_rate:.1%})"
        )
    elif unit.kind is UnitKind.PERPLEXITY:
        verdict, reason = _judge_perplexity(unit, p, policy)
    else:
        verdict, reason, n_needed = _judge_outcomes(unit, p, policy)
    return replace(
        unit, adjusted_pvalue=adjusted, verdict=verdict, reason=reason, n_needed=n_needed
    )


def _judge_outcomes(unit: UnitResult, p: float, policy: Policy) -> tuple[Verdict, str, int | None]:
    """Accuracy and score units; `unit.n_needed` holds the plan made when measuring."""
    drop = -(unit.delta or 0.0)
    if unit.n < policy.min_examples:
        reason = f"only {unit.n} paired examples (min_examples {policy.min_examples})"
        return Verdict.INCONCLUSIVE, reason, max(policy.min_examples, unit.n_needed or 0)
    limit = f"max_drop {_points(unit.threshold)}"
    if drop <= unit.threshold:
        return Verdict.PASS, f"Δ {_points(-drop, signed=True)}, within {limit}", None
    shown = f"drop of {_points(drop)} > {limit}"
    p_text = f"{'adj. ' if unit.gated else ''}p {p:.3g}"
    if p < policy.alpha:
        return Verdict.REGRESSION, f"{shown} and {p_text} < alpha {policy.alpha}", None
    return Verdict.INCONCLUSIVE, f"{shown} but {p_text} >= alpha {policy.alpha}", unit.n_needed


def _judge_perplexity(unit: UnitResult, p: float, policy: Policy) -> tuple[Verdict, str]:
    if unit.n == 0 or unit.delta is None:
        return Verdict.INCONCLUSIVE, "no document scored on both sides"
    p_text = f"{'adj. ' if unit.gated else ''}p {p:.3g}"
    shown = f"{unit.metric} {unit.delta:+.2%}"
    limit = f"max_relative_increase {unit.threshold:.2%}"
    if unit.delta <= unit.threshold:
        return Verdict.PASS, f"{shown}, within {limit}"
    if p < policy.alpha:
        return Verdict.REGRESSION, f"{shown} > {limit} and {p_text} < alpha {policy.alpha}"
    return Verdict.INCONCLUSIVE, f"{shown} > {limit} but {p_text} >= alpha {policy.alpha}"


def _points(fraction: float, signed: bool = False) -> str:
    return f"{fraction * 100:{'+' if signed else ''}.1f} pts"


def _overall(units: Sequence[UnitResult], policy: Policy) -> tuple[Verdict, ExitCode]:
    """The comparison's verdict: the worst gated unit's, ERROR before REGRESSION."""
    verdicts = {unit.verdict for unit in units if unit.gated}
    if Verdict.ERROR in verdicts:
        return Verdict.ERROR, ExitCode.RUN_FAILED
    if Verdict.REGRESSION in verdicts:
        return Verdict.REGRESSION, ExitCode.REGRESSION
    if Verdict.INCONCLUSIVE in verdicts:
        failing = policy.inconclusive == Inconclusive.FAIL
        return Verdict.INCONCLUSIVE, ExitCode.REGRESSION if failing else ExitCode.OK
    return Verdict.PASS, ExitCode.OK
