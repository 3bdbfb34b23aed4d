"""Judge every gated unit of a paired candidate and baseline (pairing: `regress.gate.pairing`).

Pairing is by (task, doc_id) with equal doc_hash. A gated unit is a task, or a group: every
task whose TaskInfo.group is set belongs to that group's unit (`mmlu_anatomy` to `mmlu`), and
the group's members are reported as subjects, not gated one by one.

A unit is one of three kinds, by what its records hold:
- accuracy: 0/1 `correct` (or a 0/1 metric the policy names): one-sided McNemar test
  against no drop, exact unconditional tests of a drop beyond and within max_drop
  (regress.stats.margin), Tango's interval for Δ as a description, flips listed;
- score: a per-example score in [0, 1] with `correct` None (TruthfulQA MC2): bootstrap-t
  tests of the mean, b and c count the examples that scored lower and higher;
- perplexity (loglikelihood_rolling tasks): sign-flip and bootstrap-t tests of the
  length-weighted corpus log-ratio (regress.stats.perplexity), the very quantity whose relative
  change max_relative_increase judges.

Each unit's rule (`margin` or `change`, regress.stats.decision) says which test decides a
REGRESSION; the policy's `pass_requires` whether a PASS needs its drop shown within the
threshold (the within-margin test) or only no REGRESSION and no INCONCLUSIVE by the no-drop
test. Every test
that can fail the gate is corrected in one family (`_judge_all`).

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
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np

from regress.core.errors import BadInput, ExitCode
from regress.core.manifest import Manifest, Run, TaskInfo
from regress.core.proxy_design import ProxyDesign
from regress.core.records import Record, Status
from regress.gate.failure_rates import FailureRate, failure_rates, generates, refusal_share
from regress.gate.format_pool import SUFFIX as POOLED
from regress.gate.format_pool import pooled
from regress.gate.format_spread import spread_changes
from regress.gate.golden_rules import GoldenItems, GoldenResult, judge_golden, settle
from regress.gate.judged import JudgedSummary, candidate_scores, judged_pairs, needs_judge
from regress.gate.pairing import Pair, pair_runs
from regress.gate.policy import Inconclusive, Metric, Policy, Requirement, UnitPolicy
from regress.gate.requirements import Latency, RequirementResult, measure, measure_latency
from regress.gate.requirements import settle as settle_requirement
from regress.gate.results import (
    MAX_FLIPS,
    Comparison,
    DropBounds,
    Fingerprint,
    Flip,
    ProxyEstimate,
    SubjectResult,
    UnitKind,
    UnitResult,
    Verdict,
)
from regress.gate.turns import turn_changes
from regress.run.judge import Judged, Outcome
from regress.stats import (
    DropTest,
    NormalShift,
    PairedCounts,
    PassRequires,
    RelativeIncrease,
    Rule,
    SequentialDesign,
    Side,
    StudentizedShift,
    accuracy_mde,
    accuracy_n,
    adjust_pvalues,
    bootstrap_t,
    choice_kl,
    corpus_shift,
    family_levels,
    inconclusive,
    mcnemar_pvalue,
    paired_diff_ci,
    paired_mean_test,
    pass_n,
    regression,
    shift_mde,
    shift_n,
    stratified_test,
    top1_agreement,
    weighted_mean,
)
from regress.tasks.judge_templates import Mode

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


@dataclass(frozen=True)
class Since:
    """The creep guard's pairing: the candidate matched with the policy's anchor baseline."""

    anchor: Run
    paired: Paired

    @property
    def label(self) -> str:
        return self.anchor.manifest.name


def pair_anchor(anchor: Run, candidate: Run, allow_mismatch: bool = False) -> Since:
    """Pair `candidate` with the anchor baseline, as `pair` does with the checked baseline.

    Raises BadInput (naming the anchor) for a proxy anchor, whose estimate needs its own
    sampled examples, or for examples that differ from the candidate's.
    """
    name = anchor.manifest.name
    if anchor.manifest.proxy is not None:
        raise BadInput(f"anchor {name!r} is a proxy: anchor the creep guard on a full baseline")
    try:
        return Since(anchor, pair(anchor, candidate, allow_mismatch))
    except BadInput as exc:
        raise BadInput(f"anchor {name!r}: {exc}") from exc


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
    look: int | None = None,
    since: Since | None = None,
    latency: Latency | None = None,
    judged: Judged | None = None,
) -> Comparison:
    """Every rule of the gate on one pairing, and the verdict that sees them all: each unit's
    test, the failure-class rates and the golden sets' rules.

    `look` (0-based) judges the pairing as that look of the policy's sequential design: every
    p-value becomes a repeated p-value and every bound a repeated confidence bound
    (regress.stats.spending), so the one alpha holds over all the looks together.

    `since` adds the creep guard: each gated accuracy or score unit is tested against the
    anchor too, by the margin rule at `policy.max_cumulative_drop`, in the same family.

    `latency` holds the candidate's bench timings for a `ttft_ms` decision gate.

    `judged` holds the policy judge's verdicts on this pairing: each judged unit is tested on
    them (regress.gate.judged); a unit only a judge can score and no judge scored is left out.
    """
    if policy.pool_formats:
        paired = _with_pooled(paired, policy)
    pairs, unpaired, tasks = paired.pairs, paired.unpaired, paired.tasks
    warnings = list(paired.warnings)
    design = baseline.manifest.proxy
    if design is not None and (unpaired or len(tasks) < len(baseline.manifest.tasks)):
        raise BadInput(
            f"{baseline.manifest.name} is a proxy of {design.parent}: its estimate needs every "
            f"sampled example paired, {unpaired} are not; rerun the candidate on the proxy"
        )
    units = paired.units
    summaries: dict[str, JudgedSummary] = {}
    if judged is not None and policy.judge is not None:
        pairs, summaries = judged_pairs(pairs, units, judged, policy.judge.min_consistency)
    extra = policy.judge.units if policy.judge is not None else ()
    for name in sorted(set(extra) - set(units)):
        warnings.append(f"the judge's units name '{name}', which is not in this suite")
    for name in sorted(needs_judge(units, extra) - set(summaries)):
        del units[name]
        warnings.append(f"unit {name}: only a judge can score it, and none did (docs/judge.md)")
    for name in sorted(set(policy.units) - set(units)):
        warnings.append(f"policy names unit '{name}', which is not in this suite")
    unit_policies = {name: policy.for_unit(name) for name in units}
    creep = _creep_policies(since, policy) if since is not None else {}
    k = max(1, sum(unit_policy.gate for unit_policy in unit_policies.values()) + len(creep))
    measured = [
        _measure(name, members, pairs, policy, unit_policies[name], k, design)
        for name, members in units.items()
    ]
    measured = [(_with_judge(unit, summaries.get(unit.name)), f, t) for unit, f, t in measured]
    creep_units = []
    if since is not None:
        for name, unit_policy in creep.items():
            members = since.paired.units[name]
            unit, _, test = _measure(name, members, since.paired.pairs, policy, unit_policy, k)
            named = replace(unit, name=f"{name} since {since.label}", since=since.label)
            creep_units.append((named, test))
        warnings += [f"anchor {since.label}: {w}" for w in since.paired.warnings]
    failures = _failure_rates(units, pairs, policy, unit_policies)
    golden = judge_golden(baseline, tasks, pairs, policy.max_relative_drop, golden_items)
    required = [
        measure_latency(r, latency or Latency())
        if r.metric is Metric.TTFT_MS
        else _quality(r, summaries, judged)
        if r.metric is Metric.QUALITY
        else _requirement(r, units, pairs, unit_policies)
        for r in policy.gates
    ]
    found = [unit for unit, _, _ in measured] + [unit for unit, _ in creep_units]
    nominal: Callable[[float], float] = lambda level: level  # noqa: E731
    sequential = policy.sequential
    if look is not None and sequential is not None:
        found, failures, golden = _repeated(sequential, look, found, failures, golden)
        nominal = lambda level: sequential.nominal_level(level, look)  # noqa: E731
    results, failures, golden, decided = _judge_all(
        found,
        [test for _, _, test in measured] + [test for _, test in creep_units],
        failures,
        golden,
        policy,
        nominal,
        required,
    )
    warnings += policy.notices
    for unit in results:
        rate = _error_rate(unit.baseline_failures, unit.n)
        if rate > policy.max_error_rate:
            warnings.append(
                f"{unit.name}: {rate:.1%} of the baseline's examples failed and count as wrong"
            )
    flips = sorted(
        (flip for _, unit_flips, _ in measured for flip in unit_flips),
        key=lambda f: (not f.regressed, f.task, f.doc_id),
    )
    verdict, exit_code = decide(results, failures, golden, policy, decided)
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
        requirements=decided,
        turns=tuple(
            change
            for name, members in units.items()
            for change in turn_changes(name, [p for task in members for p in pairs[task.name]])
        ),
        formats=spread_changes(
            {t.name: t for t in tasks},
            {name: [b for b, _ in ps] for name, ps in pairs.items()},
            {name: [c for _, c in ps] for name, ps in pairs.items()},
        ),
    )


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


def _with_pooled(paired: Paired, policy: Policy) -> Paired:
    """The pairing with a pooled unit for every unit in several prompt formats."""
    if policy.metric is not None:
        raise BadInput(
            "formats.pooled averages each example's primary outcome over its formats; it "
            f"cannot pair on metric {policy.metric!r}: drop one of the two policy keys"
        )
    tasks, pairs = pooled(paired.tasks, paired.pairs)
    every = sorted((*paired.tasks, *tasks), key=lambda t: t.name)
    return replace(paired, tasks=tuple(every), pairs={**paired.pairs, **pairs})


def _requirement(
    requirement: Requirement,
    units: dict[str, list[TaskInfo]],
    pairs: dict[str, list[Pair]],
    unit_policies: dict[str, UnitPolicy],
) -> RequirementResult:
    """A decision gate's raw tests on the candidate's examples of its unit (every gated
    accuracy or score unit when it names none): each example's value of the unit's metric,
    or its refusal share."""
    if requirement.unit is not None and requirement.unit not in units:
        return measure(requirement, None, f"the suite has no unit {requirement.unit!r}")
    # A pooled unit holds the same examples as its formats: counted once, in them.
    gated = [n for n in units if unit_policies[n].gate and not n.endswith(POOLED)]
    names = [requirement.unit] if requirement.unit else gated
    refusals = requirement.metric is Metric.REFUSAL_RATE
    values: list[float] = []
    generated = False
    for name in names:
        members = units[name]
        records = {t.name: [cand for _, cand in pairs[t.name]] for t in members}
        kind = unit_kind(name, members, records)
        if kind is UnitKind.PERPLEXITY:
            continue
        for task in members:
            metric = _metric_of(task, unit_policies[name], kind)
            for record in records[task.name]:
                generated = generated or "failure" in record.scores
                binary = kind is UnitKind.ACCURACY
                values.append(refusal_share(record) if refusals else _value(record, metric, binary))
    if refusals and not generated:
        return measure(requirement, None, "its examples are not generations: nothing to refuse")
    return measure(requirement, values, "")


def _quality(
    requirement: Requirement, summaries: dict[str, JudgedSummary], judged: Judged | None
) -> RequirementResult:
    """A `quality` gate's raw tests on the candidate's scores from the grading judge, in its
    unit (every graded unit when it names none). Not evaluated without a grading judge, or
    when the judge gave every answer one score: its mean would then say nothing."""
    graded = {name: s for name, s in summaries.items() if s.mode != Mode.PAIRWISE}
    if requirement.unit is not None and requirement.unit not in graded:
        why = f"no grading judge (judge.mode single or rubric) scored unit {requirement.unit!r}"
        return measure(requirement, None, why)
    names = [requirement.unit] if requirement.unit else sorted(graded)
    if judged is None or not names:
        why = "no unit was scored by a grading judge (judge.mode single or rubric)"
        return measure(requirement, None, why)
    for name in names:
        if not graded[name].decides:
            return measure(requirement, None, f"the judge gave every answer of {name} one score")
    return measure(
        requirement, candidate_scores([j for j in judged.judgements if j.unit in names]), ""
    )


def _creep_policies(since: Since, policy: Policy) -> dict[str, UnitPolicy]:
    """The creep guard's units: every gated accuracy or score unit the anchor pairs, held to
    the margin rule at max_cumulative_drop (a perplexity unit's budget is not an absolute
    drop, so it has none; a judged unit is judged against the checked baseline only)."""
    pairs = since.paired.pairs
    found = {}
    judged = needs_judge(since.paired.units, policy.judge.units if policy.judge else ())
    for name, members in since.paired.units.items():
        if name in judged:
            continue  # verdicts are made per pairing: the anchor's pairing was never judged
        own = policy.for_unit(name)
        records = {t.name: [base for base, _ in pairs[t.name]] for t in members}
        if own.gate and unit_kind(name, members, records) is not UnitKind.PERPLEXITY:
            found[name] = replace(own, max_drop=policy.max_cumulative_drop, rule=Rule.MARGIN)
    return found


def _failure_rates(
    units: dict[str, list[TaskInfo]],
    pairs: dict[str, list[Pair]],
    policy: Policy,
    unit_policies: dict[str, UnitPolicy],
) -> tuple[FailureRate, ...]:
    """Failure-class rates of the generation units, raw p-values (the gate corrects them)."""
    generating = {
        name: [pair for task in members for pair in pairs[task.name]]
        for name, members in units.items()
    }
    generating = {name: ps for name, ps in generating.items() if generates(ps)}
    found: list[FailureRate] = []
    for name, unit_pairs in generating.items():
        threshold = policy.max_failure_increase if unit_policies[name].gate else None
        found += failure_rates(name, unit_pairs, threshold)
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
            problem = hash_difference(
                info, (other.dataset_hash, other.prompt_hash), other.scoring_hash
            )
        if problem and not allow_mismatch:
            raise BadInput(f"{problem}; {MISMATCH_REFUSED}")
        if problem:
            warnings.append(f"{problem}; pairing identical documents only")
        if other is not None:
            tasks.append(info)
    for name in sorted(set(candidate.tasks) - set(baseline.tasks)):
        warnings.append(f"task {name}: only in the candidate run, not compared")
    return tasks


def hash_difference(base: TaskInfo, candidate: tuple[str, str], scoring: str | None) -> str:
    """How the candidate's (dataset hash, prompt hash) and scoring hash of a task differ from
    the baseline's ("" when they do not). A scoring hash either side lacks (a manifest written
    before it was recorded) is not compared."""
    for label, ours, theirs in (
        ("dataset", base.dataset_hash, candidate[0]),
        ("prompt", base.prompt_hash, candidate[1]),
    ):
        if ours != theirs:
            return (
                f"task {base.name}: {label} hash differs "
                f"(baseline {ours[:12]}, candidate {theirs[:12]})"
            )
    kept = base.scoring_hash
    if kept is not None and scoring is not None and kept != scoring:
        return (
            f"task {base.name}: scoring hash differs (baseline {kept[:12]}, candidate "
            f"{scoring[:12]}): how its answers are scored changed (metric_list, filter_list, "
            "metric options, target, or regress's scorer)"
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
) -> tuple[UnitResult, list[Flip], DropTest | None]:
    """A unit's measurements, flips and the test of its drop against any margin; `_judge`
    fills in its verdict and bounds afterwards (None: nothing paired to test).

    `k` is the number of gated units, which the MDE and the n that would decide are planned
    for. With a proxy's `design`, the unit's figures estimate the parent suite's.
    """
    kind = unit_kind(name, tasks, {t.name: [base for base, _ in pairs[t.name]] for t in tasks})
    if kind is UnitKind.PERPLEXITY:
        unit_pairs = [pair for task in tasks for pair in pairs[task.name]]
        unit, test = _measure_perplexity(name, tasks, unit_pairs, policy, unit_policy, k)
        return unit, [], test
    unit, flips, test = _measure_outcomes(name, tasks, pairs, policy, unit_policy, kind, k)
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
) -> tuple[UnitResult, list[Flip], DropTest | None]:
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
    stats, test = _outcome_stats(ours, theirs, (b, c), binary, unit_policy, policy, k)
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
) -> tuple[_Tests, DropTest | None]:
    """Δ, its interval, the p-values, the MDE and the plans of an accuracy or score unit, and
    the test of its drop against any margin.

    `k` is the number of gated units the MDE and the plans share alpha with (Bonferroni).
    """
    n, (b, c) = len(ours), flipped
    threshold, rule = unit_policy.max_drop or 0.0, unit_policy.rule or policy.rule
    alpha, plan_drop = policy.alpha / k, PLAN_FACTOR * threshold
    if not n:
        return _Tests(None, None, 1.0, 1.0, None, None, None, None, None), None
    test: DropTest
    if binary:
        discordance = (b + c) / n
        change_p = mcnemar_pvalue(b, c, policy.test)
        test = PairedCounts(b, c, n)
        delta, ci = (c - b) / n, paired_diff_ci(b, c, n, CI_ALPHA)
        mde = accuracy_mde(n, discordance, threshold, rule, alpha, policy.power)
        needed = accuracy_n(discordance, plan_drop, threshold, rule, alpha, policy.power)
        to_pass = pass_n(discordance, threshold, alpha, policy.power)
    else:
        mean = paired_mean_test(ours, theirs, margin=threshold, alpha=CI_ALPHA)
        change_p, delta, ci = mean.pvalue, mean.delta, mean.ci
        # The drop's studentized resamples are the mean's, mirrored (same seed, same draws).
        test = StudentizedShift(-mean.delta, mean.se, -bootstrap_t(theirs - ours))
        mde = shift_mde(mean.se, threshold, rule, alpha, policy.power)
        sd = mean.se * math.sqrt(n)
        needed = shift_n(sd, plan_drop, threshold, rule, alpha, policy.power)
        to_pass = shift_n(sd, 2 * threshold, threshold, Rule.MARGIN, alpha, policy.power)
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
        baseline_failures=_failures([base for base, _ in pairs]),
        candidate_failures=candidate_failures,
        error_rate=_error_rate(candidate_failures, len(pairs)),
    ), (shift if test.n else None)


def _in_scale(metric: str, perplexity: float) -> float:
    """A corpus perplexity in the metric's own scale (bits per byte = log2 byte perplexity)."""
    return math.log2(perplexity) if metric == "bits_per_byte" else perplexity


def _repeated(
    design: SequentialDesign,
    look: int,
    units: Sequence[UnitResult],
    failures: Sequence[FailureRate],
    golden: Sequence[GoldenResult],
) -> tuple[list[UnitResult], tuple[FailureRate, ...], tuple[GoldenResult, ...]]:
    """Every p-value of the gate's families as its repeated p-value at `look`."""

    def rep(p: float) -> float:
        return design.repeated_pvalue(p, look)

    units = [
        replace(
            u,
            pvalue=rep(u.pvalue),
            change_pvalue=rep(u.change_pvalue),
            pass_pvalue=None if u.pass_pvalue is None else rep(u.pass_pvalue),
        )
        for u in units
    ]
    return (
        units,
        tuple(replace(f, pvalue=rep(f.pvalue)) for f in failures),
        tuple(replace(g, pvalue=rep(g.pvalue)) for g in golden),
    )


def _judge_all(
    units: Sequence[UnitResult],
    tests: Sequence[DropTest | None],
    failures: Sequence[FailureRate],
    golden: Sequence[GoldenResult],
    policy: Policy,
    nominal: Callable[[float], float],
    required: Sequence[RequirementResult] = (),
) -> tuple[
    tuple[UnitResult, ...],
    tuple[FailureRate, ...],
    tuple[GoldenResult, ...],
    tuple[RequirementResult, ...],
]:
    """Correct every rule's p-values together, then give every unit, failure class and golden
    set its verdict, and each unit the bounds that agree with it.

    One alpha for the gate (docs/gate.md, "One alpha"): every test that can fail it (the gated
    units' rule tests, the gated failure-class rates and the golden sets' relative drops) is
    one family under `policy.correction`. A PASS that needs evidence has its own family, the
    gated units' within-margin tests: alpha bounds the chance of any false PASS as well.
    The no-drop tests of `no_evidence_of_harm` form the third, as before. `nominal` maps a
    family level to the level a bound is inverted at (a sequential look's nominal level).
    The decision gates' two tests (regress.gate.requirements) join the first two families.
    """
    gated = [i for i, unit in enumerate(units) if unit.gated]
    tested = [i for i, f in enumerate(failures) if f.threshold is not None]
    family = [units[i].pvalue for i in gated] + [failures[i].pvalue for i in tested]
    family += [g.pvalue for g in golden]
    failing = {i: r.fail_pvalue for i, r in enumerate(required) if r.fail_pvalue is not None}
    evaluated = list(failing)
    family += list(failing.values())
    adjusted = adjust_pvalues(family, policy.correction)
    levels = family_levels(family, policy.alpha, policy.correction)
    k = len(gated)
    unit_adj = dict(zip(gated, zip(adjusted[:k], levels[:k], strict=True), strict=True))
    failures = list(failures)
    for j, i in enumerate(tested, start=k):
        f = failures[i]
        failures[i] = replace(
            f,
            adjusted_pvalue=adjusted[j],
            regressed=f.increase > (f.threshold or 0.0) and adjusted[j] < policy.alpha,
        )
    start = k + len(tested)
    golden = [settle(g, adjusted[start + j], policy.alpha) for j, g in enumerate(golden)]
    fail_adj = dict(zip(evaluated, adjusted[start + len(golden) :], strict=True))
    pass_raw = [_or_one(units[i].pass_pvalue) for i in gated]
    pass_raw += [_or_one(required[i].pass_pvalue) for i in evaluated]
    pass_all = adjust_pvalues(pass_raw, policy.correction)
    pass_levels = family_levels(pass_raw, policy.alpha, policy.correction)
    pass_adj = dict(zip(gated, zip(pass_all[:k], pass_levels[:k], strict=True), strict=True))
    met_adj = dict(zip(evaluated, pass_all[k:], strict=True))
    evidence = policy.pass_requires is PassRequires.EVIDENCE
    required = [
        settle_requirement(r, fail_adj.get(i), met_adj.get(i), policy.alpha, evidence)
        for i, r in enumerate(required)
    ]
    change_p = adjust_pvalues([units[i].change_pvalue for i in gated], policy.correction)
    change_adj = dict(zip(gated, change_p, strict=True))
    judged = []
    for i, (unit, test) in enumerate(zip(units, tests, strict=True)):
        rule_adj, rule_level = unit_adj.get(i, (None, policy.alpha))
        passed_adj, pass_level = pass_adj.get(i, (None, policy.alpha))
        unit = replace(
            unit,
            adjusted_pvalue=rule_adj,
            change_adjusted_pvalue=change_adj.get(i),
            pass_adjusted_pvalue=passed_adj,
            bounds=_bounds(unit, test, nominal(rule_level), nominal(pass_level)),
        )
        verdict, reason = _judge(unit, policy)
        # The plans answer "how many examples would decide": only an undecided unit asks.
        if verdict is not Verdict.INCONCLUSIVE:
            unit = replace(unit, n_needed=None, plan_drop=None, n_to_pass=None)
        elif unit.n < policy.min_examples and unit.kind is not UnitKind.PERPLEXITY:
            unit = replace(
                unit,
                n_needed=max(policy.min_examples, unit.n_needed or 0),
                n_to_pass=max(policy.min_examples, unit.n_to_pass or 0),
            )
        if policy.pass_requires is PassRequires.NO_EVIDENCE_OF_HARM:
            unit = replace(unit, n_to_pass=None)
        judged.append(replace(unit, verdict=verdict, reason=reason))
    return tuple(judged), tuple(failures), tuple(golden), tuple(required)


def _failed(unit: UnitResult, policy: Policy) -> str:
    """Why a unit is an ERROR: its failed examples, the judge's failures named apart (a
    judge that fails every reply says nothing of the candidate's answers)."""
    limit = f"(max_error_rate {policy.max_error_rate:.1%})"
    judge = unit.candidate_failures.get(str(Outcome.JUDGE_ERROR), 0)
    if not judge:
        return f"{unit.error_rate:.1%} of the candidate's examples failed {limit}"
    total = unit.n + judge
    own = sum(
        count
        for status, count in unit.candidate_failures.items()
        if status not in (Outcome.JUDGE_ERROR, Status.TRUNCATED)
    )
    if not own:
        return (
            f"the judge failed on {judge / total:.1%} of the examples ({judge} of {total}) "
            f"{limit}: the candidate's answers went unjudged"
        )
    return (
        f"{unit.error_rate:.1%} of the examples failed {limit}: {own} of the candidate's, "
        f"{judge} of the judge's"
    )


def _bounds(
    unit: UnitResult, test: DropTest | None, rule_level: float, pass_level: float
) -> DropBounds | None:
    """The one-sided bounds at the levels the unit's tests were held to (see DropBounds)."""
    if test is None or unit.n == 0:
        return None
    return DropBounds(
        at_least=test.bound(rule_level, Side.BEYOND) if unit.rule is Rule.MARGIN else None,
        at_least_level=rule_level,
        at_most=test.bound(pass_level, Side.WITHIN),
        at_most_level=pass_level,
    )


def _judge(unit: UnitResult, policy: Policy) -> tuple[Verdict, str]:
    """The unit's verdict and the one line that says why."""
    if unit.error_rate > policy.max_error_rate:
        return Verdict.ERROR, _failed(unit, policy)
    perplexity = unit.kind is UnitKind.PERPLEXITY
    if unit.n == 0 or unit.delta is None or unit.ci is None:
        what = "document scored" if perplexity else "paired example"
        return Verdict.INCONCLUSIVE, f"no {what} on both sides"
    if not perplexity and unit.n < policy.min_examples:
        reason = f"only {unit.n} paired examples (min_examples {policy.min_examples})"
        return Verdict.INCONCLUSIVE, reason
    judged = unit.judged
    if judged is not None and not judged.decides:
        if judged.scores is not None:
            return Verdict.INCONCLUSIVE, (
                f"the judge gave every answer the same score ({judged.scores[0]:g}): it told "
                "no answer from another, so its scores decide nothing"
            )
        return Verdict.INCONCLUSIVE, (
            f"the judge named the same side in both orders on {judged.consistency:.0%} of "
            f"pairs (min_consistency {judged.min_consistency:.0%}): its verdicts decide nothing"
        )
    drop, upper = (unit.delta, unit.ci[1]) if perplexity else (-unit.delta, -unit.ci[0])
    rule_p = _adjusted(unit.pvalue, unit.adjusted_pvalue)
    change_p = _adjusted(unit.change_pvalue, unit.change_adjusted_pvalue)
    regressed = bool(regression(unit.rule, policy.alpha, rule_p, drop, unit.threshold))
    if regressed:
        return Verdict.REGRESSION, _regression_reason(unit, drop, rule_p, policy.alpha)
    if policy.pass_requires is PassRequires.EVIDENCE:
        pass_p = _adjusted(_or_one(unit.pass_pvalue), unit.pass_adjusted_pvalue)
        if pass_p < policy.alpha:
            return Verdict.PASS, _shown_within(unit)
        return Verdict.INCONCLUSIVE, _not_shown(unit)
    if inconclusive(regressed, policy.alpha, change_p, upper, unit.threshold):
        return Verdict.INCONCLUSIVE, (
            f"worse than the baseline ({_p_text(unit, change_p)} < alpha {policy.alpha}, "
            f"H0: no drop), but the 95% CI reaches a {_noun(unit)} of {_amount(unit, upper)} "
            f"> {_limit(unit)}"
        )
    return Verdict.PASS, _pass_reason(unit, drop, change_p, policy.alpha)


def _confidence(level: float, gated: bool) -> str:
    """How sure a one-sided bound is, and whether the family's correction set it."""
    sure = f"{(1 - level) * 100:.4g}%"
    return f"{sure} one-sided, adjusted" if gated else f"{sure} one-sided"


def _shown_within(unit: UnitResult) -> str:
    bounds = unit.bounds
    assert bounds is not None  # a PASS was tested, so it was bounded
    return (
        f"{_change(unit)}: the {_noun(unit)} is at most {_amount(unit, bounds.at_most)} "
        f"({_confidence(bounds.at_most_level, unit.gated)}), within {_limit(unit)}"
    )


def _not_shown(unit: UnitResult) -> str:
    bounds = unit.bounds
    reach = _amount(unit, bounds.at_most) if bounds else "unknown"
    level = f" ({_confidence(bounds.at_most_level, unit.gated)})" if bounds else ""
    needed = (
        f"; about {unit.n_to_pass:,} examples would show an unchanged model within it"
        if unit.n_to_pass
        else ""
    )
    return (
        f"{_change(unit)}: the {_noun(unit)} may be up to {reach}{level}, "
        f"not shown within {_limit(unit)}{needed}"
    )


def _or_one(pvalue: float | None) -> float:
    """A PASS test's p, or 1 (no evidence) for a unit that had none."""
    return 1.0 if pvalue is None else pvalue


def _adjusted(raw: float, adjusted: float | None) -> float:
    """The p a verdict uses: adjusted for gated units, the unit's own for ungated ones."""
    return raw if adjusted is None else adjusted


def _regression_reason(unit: UnitResult, drop: float, p: float, alpha: float) -> str:
    shown = f"{_noun(unit)} of {_amount(unit, drop)} > {_limit(unit)}"
    if unit.rule is Rule.MARGIN:
        bounds = unit.bounds
        if bounds is not None and bounds.at_least is not None:
            shown += (
                f": at least {_amount(unit, bounds.at_least)} "
                f"({_confidence(bounds.at_least_level, unit.gated)})"
            )
        return f"{shown}; {_p_text(unit, p)} < alpha {alpha} (H0: within {_limit(unit)})"
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
    budget = "max_cumulative_drop" if unit.since else "max_drop"
    return f"{budget} {_points(unit.threshold)}"


def _p_text(unit: UnitResult, p: float) -> str:
    return f"{'adj. ' if unit.gated else ''}p {p:.3g}"


def _points(fraction: float) -> str:
    return f"{fraction * 100:.1f} pts"


def decide(
    units: Sequence[UnitResult],
    failures: Sequence[FailureRate],
    golden: Sequence[GoldenResult],
    policy: Policy,
    required: Sequence[RequirementResult] = (),
) -> tuple[Verdict, ExitCode]:
    """The gate's one verdict, from every rule's outcome: ERROR when a gated unit's run
    failed; else REGRESSION when a gated unit regressed, a gated failure-class rate rose, a
    golden set failed or a decision gate was shown failing; else INCONCLUSIVE when a gated
    unit or a decision gate could not decide; else PASS."""
    verdicts = {unit.verdict for unit in units if unit.gated} | {r.verdict for r in required}
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
