"""The sequential gate: run the candidate in looks and stop each unit once it has decided.

The candidate runs the baseline's examples in a seeded random order, task by task (so each
look holds the same share of every task of a unit), and the gate judges what it has after
each look of the policy's design (regress.stats.spending): p-values become repeated p-values
and bounds repeated confidence bounds, so alpha holds over all the looks together.

- A unit shown beyond its margin (REGRESSION), within it (PASS) or failing (ERROR) keeps that
  verdict and draws no more examples.
- A REGRESSION anywhere decides the gate: the run stops there.
- The run stops when every gated unit has decided, or at the last look (all examples).

Golden sets are short and every must-pass item counts, so they run whole at the first look.
Stopping never rejects anything, so stopping early cannot raise a false alarm; it only gives
up the power the remaining examples would have added, and the report says where it stopped.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import replace

from regress.checks.continuation import continuation_state, looks_taken, refuse_other_model
from regress.checks.interleaved import batch_dependent
from regress.checks.plan import no_early_stop
from regress.checks.steps import (
    CandidateModel,
    CandidateRun,
    CheckOptions,
    CheckResult,
    Rebaseline,
    RunProgress,
    cache_use,
    candidate_plan,
    finish,
    reference_rerun,
    refuse_changed_inputs,
    run_plan,
)
from regress.core.errors import BadInput
from regress.core.manifest import Run
from regress.core.records import Record
from regress.gate.compare import judge, verdict_of
from regress.gate.golden_rules import is_golden
from regress.gate.pairing import pair
from regress.gate.policy import Policy
from regress.gate.results import (
    CacheUse,
    Comparison,
    Look,
    SequentialRun,
    UnitKind,
    UnitResult,
    Verdict,
)
from regress.gate.unit_verdicts import verdict_of as unit_verdict
from regress.run.engine import Prepared, prepare
from regress.run.runner import Outcome
from regress.stats import SequentialDesign, cut, median_unbiased_drift

SETTLED = (Verdict.REGRESSION, Verdict.PASS, Verdict.ERROR)


def run_order(prepared: Prepared, design: SequentialDesign) -> dict[str, list[int]]:
    """Per task, its doc_ids in the order the candidate runs them: a seeded shuffle, the
    same for every run of the same design."""
    order = {}
    for spec, examples in prepared:
        ids = [e.doc_id for e in examples]
        # One stream per task, so adding a task does not reorder the others.
        random.Random(f"{design.seed}:{spec.task.name}").shuffle(ids)
        order[spec.task.name] = ids
    return order


def check_sequential(
    baseline: Run,
    candidate: CandidateModel,
    options: CheckOptions,
    progress: RunProgress,
) -> CheckResult:
    """Gate `candidate` against `baseline` look by look under `options.policy.sequential`."""
    design = options.policy.sequential
    assert design is not None  # the caller dispatches here only with a design
    if baseline.manifest.proxy is not None:
        raise BadInput(
            f"{baseline.manifest.name} is a proxy: its estimate needs every sampled example, "
            "so it cannot stop early (remove `sequential` from the policy)"
        )
    if options.anchor is not None or options.policy.gates:
        # Their tests would stop with the units they guard; not designed yet.
        what, key = (
            ("the creep guard does", "anchor")
            if options.anchor is not None
            else ("decision gates do", "gates")
        )
        raise BadInput(
            f"{what} not run under a sequential design yet: remove `sequential` or `{key}` "
            "from the policy"
        )
    plan, warnings = candidate_plan(baseline, candidate, options)
    if options.rebaseline is not Rebaseline.NEVER and batch_dependent(plan):
        # Its looks would each need the baseline's chunk beside the candidate's: not built.
        raise BadInput(
            "the candidate's server answers differently by batch: a sequential gate cannot "
            "interleave the baseline's rerun there yet (drop `sequential` from the policy, or "
            "pass --rebaseline never to gate against the stored records)"
        )
    costly = no_early_stop(baseline, options.policy)
    if costly is not None:
        warnings = [*warnings, costly]
    prepared = prepare(plan.specs, plan.source, plan.shard)
    if not options.allow_mismatch:
        refuse_changed_inputs(baseline, prepared)
    order = run_order(prepared, design)
    resume = options.resume
    replayed = 0 if resume is None else looks_taken(resume, baseline, options.policy)
    budget = len(design.looks) if options.max_looks is None else replayed + options.max_looks
    golden = {name for name, records in baseline.records.items() if records and is_golden(records)}
    unit_of = {name: info.group or name for name, info in baseline.manifest.tasks.items()}
    seen: dict[str, int] = dict.fromkeys(order, 0)
    records: dict[str, list[Record]] = {name: [] for name in order}
    decided: dict[str, tuple[int, UnitResult]] = {}
    taken: list[Look] = []
    outcomes: list[Outcome] = []
    last: Comparison | None = None
    reference: Outcome | None = None
    hardware = more = None
    stopped = "the last look"
    open_ = False
    for k, fraction in enumerate(design.looks):
        chunk = _chunk(prepared, order, seen, fraction, golden, decided, unit_of)
        if chunk:
            if resume is not None and k < replayed:
                outcome = _replay(resume, chunk)
            else:
                outcome = run_plan(
                    replace(plan, specs=tuple(spec for spec, _ in chunk)),
                    f"check {candidate.model} (look {k + 1}/{len(design.looks)})",
                    progress,
                    chunk,
                )
                if resume is not None:
                    refuse_other_model(resume, outcome.run.manifest.model.sha256)
            outcomes.append(outcome)
            for name, found in outcome.run.records.items():
                records[name].extend(found)
            for spec, examples in chunk:
                seen[spec.task.name] += len(examples)
            if reference is None and hardware is None:
                reference, hardware, more = reference_rerun(
                    baseline, outcome.run, options, progress
                )
        head = outcomes[-1].run.manifest
        shown = {name: {r.doc_id for r in found} for name, found in records.items() if found}
        base = reference.run if reference is not None else baseline
        base_now = _restrict(base, shown)
        cand_now = Run(
            manifest=replace(
                head,
                tasks={n: replace(base.manifest.tasks[n], n=len(ids)) for n, ids in shown.items()},
                sequential=design.to_dict(),
            ),
            records={n: sorted(records[n], key=lambda r: r.doc_id) for n in shown},
        )
        paired = pair(base_now, cand_now, options.allow_mismatch)
        last = judge(
            base_now, cand_now, paired, options.policy, options.tasks.golden_items(), look=k
        )
        newly = []
        for unit in last.units:
            if unit.gated and unit.name not in decided and unit.verdict in SETTLED:
                decided[unit.name] = (k, unit)
                newly.append(unit.name)
        taken.append(Look(fraction, sum(u.n for u in last.units), tuple(newly)))
        gated = {u.name for u in last.units if u.gated}
        failed = [decided[u][1].verdict for u in newly if decided[u][1].verdict is not Verdict.PASS]
        if last.verdict is Verdict.REGRESSION or failed:
            what = "an ERROR" if Verdict.ERROR in failed else "a REGRESSION"
            stopped = f"{what} at look {k + 1}"
            break
        if gated and gated <= set(decided):
            stopped = f"every gated unit decided by look {k + 1}"
            break
        if k + 1 >= budget and k + 1 < len(design.looks):
            stopped = (
                f"the budget of --max-looks {options.max_looks}, at look {k + 1}: continue with "
                "`regress check --continue RUN`"
            )
            open_ = True
            break
    assert last is not None and hardware is not None
    units = tuple(
        decided[u.name][1] if u.name in decided else _undecided(u, options.policy)
        for u in last.units
    )
    if (
        not open_
        and len(taken) == len(design.looks)
        and any(u.gated and u.name not in decided for u in units)
    ):
        stopped = (
            "the last look, every example of the pool used and its alpha spent: a new check "
            "needs examples this one did not see"
        )
    verdict, exit_code = verdict_of(replace(last, units=units))
    total = sum(len(examples) for _, examples in prepared)
    level = options.policy.alpha / max(1, sum(u.gated for u in units))
    state = continuation_state(
        baseline,
        options.policy,
        cand_now.manifest.model.sha256,
        len(taken),
        open_,
    )
    cand_now = replace(cand_now, manifest=replace(cand_now.manifest, sequential=state))
    summary = SequentialRun(
        looks=design.looks,
        spending=design.spending,
        seed=design.seed,
        taken=tuple(taken),
        examples_run=sum(seen.values()),
        examples_total=total,
        decided_at={
            u.name: (decided[u.name][0] if u.name in decided else len(taken) - 1) + 1
            for u in units
            if u.gated
        },
        stopped=stopped,
        adjusted_delta=_adjusted(decided, prepared, unit_of, design, level),
    )
    uses = (
        CacheUse(
            "candidate",
            outcomes[0].cache_enabled,
            sum(o.cached for o in outcomes),
            sum(o.computed for o in outcomes),
            sum(o.cache_rejected for o in outcomes),
        ),
    ) + ((cache_use("baseline rerun", reference),) if reference is not None else ())
    ran = CandidateRun(
        baseline,
        cand_now,
        plan,
        prepared,
        hardware,
        uses,
        (*warnings, *(more or ())),
        reference.run if reference is not None else None,
    )
    decided_result = replace(
        last, verdict=verdict, exit_code=exit_code, units=units, sequential=summary
    )
    return finish(decided_result, ran, options, progress)


def _undecided(unit: UnitResult, policy: Policy) -> UnitResult:
    """A unit the check left open, without the fixed design's "about N examples would decide":
    read on a superset of these examples, a second test would spend alpha twice. More of
    this pool is the check's next look (`check --continue`, said where it stopped)."""
    plain = replace(unit, n_needed=None, n_to_pass=None)
    verdict, reason = unit_verdict(plain, policy)
    return replace(plain, reason=reason) if verdict is unit.verdict else plain


def _chunk(
    prepared: Prepared,
    order: Mapping[str, Sequence[int]],
    seen: Mapping[str, int],
    fraction: float,
    golden: set[str],
    decided: Mapping[str, object],
    unit_of: Mapping[str, str],
) -> Prepared:
    """The examples the next look adds: each undecided task's next share (golden sets whole)."""
    chunk = []
    for spec, examples in prepared:
        name = spec.task.name
        if unit_of.get(name, name) in decided:
            continue
        ids = order[name]
        upto = len(ids) if name in golden else cut(len(ids), fraction)
        wanted = set(ids[seen[name] : upto])
        if wanted:
            found = [e for e in examples if e.doc_id in wanted]
            ids_now = tuple(sorted(wanted))
            chunk.append((replace(spec, doc_ids=ids_now), found))
    return chunk


def _adjusted(
    decided: Mapping[str, tuple[int, UnitResult]],
    prepared: Prepared,
    unit_of: Mapping[str, str],
    design: SequentialDesign,
    alpha: float,
) -> dict[str, float]:
    """The median-unbiased Δ of every accuracy unit settled before the last look."""
    sizes: dict[str, int] = {}
    for spec, examples in prepared:
        name = unit_of.get(spec.task.name, spec.task.name)
        sizes[name] = sizes.get(name, 0) + len(examples)
    found = {}
    for name, (look, unit) in decided.items():
        if look < len(design.looks) - 1:
            delta = _median_unbiased(unit, design, alpha, look, sizes.get(name, 0))
            if delta is not None:
                found[name] = delta
    return found


def _median_unbiased(
    unit: UnitResult, design: SequentialDesign, alpha: float, look: int, total: int
) -> float | None:
    """The median-unbiased Δ of an accuracy unit settled at `look`, from the normal
    approximation of its margin test's statistic; None where it has none."""
    n = unit.n
    if unit.kind is not UnitKind.ACCURACY or unit.b is None or unit.c is None or not n * total:
        return None
    drop = (unit.b - unit.c) / n
    spread = (unit.b + unit.c) / n - drop * drop
    if spread <= 0:
        return None
    se = math.sqrt(spread / n)
    theta = median_unbiased_drift(design, alpha, look, (drop - unit.threshold) / se)
    return -(unit.threshold + theta * se * math.sqrt(n / total))


def _restrict(run: Run, shown: Mapping[str, set[int]]) -> Run:
    """`run` with only the examples in `shown` (per task); each task's n counts them."""
    tasks = {n: replace(run.manifest.tasks[n], n=len(ids)) for n, ids in shown.items()}
    return Run(
        manifest=replace(run.manifest, tasks=tasks),
        records={
            n: [r for r in run.records.get(n, []) if r.doc_id in ids] for n, ids in shown.items()
        },
    )


def _replay(resume: Run, chunk: Prepared) -> Outcome:
    """A look a continued check already took: its examples' records, read from `resume`."""
    records = {}
    for spec, _ in chunk:
        name = spec.task.name
        wanted = set(spec.doc_ids or ())
        found = [r for r in resume.records.get(name, []) if r.doc_id in wanted]
        if len(found) != len(wanted):
            raise BadInput(
                f"cannot continue {resume.manifest.name}: it lacks examples of {name} its "
                "looks ran (not a run of this check)"
            )
        records[name] = found
    return Outcome(Run(manifest=resume.manifest, records=records), [], 0.0)
