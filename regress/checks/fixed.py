"""The fixed-sample check: every example of the baseline on the candidate, then one gate.

A policy with a sequential design is dispatched to regress.checks.sequential; a finished run
(`check --candidate-run`) is gated as it is."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import replace

from regress.checks import interleaved
from regress.checks.sequential import check_sequential
from regress.checks.steps import (
    CandidateModel,
    CandidateRun,
    CheckOptions,
    CheckResult,
    RunProgress,
    cache_use,
    candidate_plan,
    finish,
    judge_cache,
    labelled,
    question_text,
    reference_rerun,
    refuse_changed_inputs,
    refuse_unit_typos,
    rejected_rows,
    run_plan,
    scoring_unchecked,
)
from regress.core.errors import BadInput
from regress.core.fingerprint import hardware_differences
from regress.core.judgements import Judged
from regress.core.manifest import Run
from regress.core.records import Record
from regress.gate.choice_calibration import compare_calibration
from regress.gate.compare import judge
from regress.gate.creep import Since, pair_anchor
from regress.gate.integrity import check_proxy
from regress.gate.judged import needs_judge
from regress.gate.noise import Cause, typical
from regress.gate.pairing import Paired, pair
from regress.gate.requirements import Latency
from regress.gate.results import (
    Comparison,
    HardwareAction,
    HardwareCheck,
)
from regress.run.engine import prepare
from regress.run.judge import Answers, judge_pairs
from regress.run.runner import Outcome, baseline_specs
from regress.tasks.base import Example
from regress.tasks.catalog import TaskCatalog
from regress.tasks.conversation import (
    ConversationTask,
    judge_answer,
    judge_question,
    judged_turns,
    turn_answer,
    turn_question,
)
from regress.tasks.judge_templates import CHOICES, Mode
from regress.tasks.loaders import Doc


def check(
    baseline: Run,
    candidate: CandidateModel | Run,
    options: CheckOptions | None = None,
    progress: RunProgress | None = None,
) -> CheckResult:
    """Gate `candidate` (a model to run, or a finished run) against `baseline`.

    Raises BadInput for an incompatible baseline or a refused backend change, RunFailed when
    a model will not load.
    """
    options = options or CheckOptions()
    progress = progress or (lambda label: nullcontext(None))
    check_proxy(baseline)
    refuse_unit_typos(baseline, options.policy)
    if options.policy.anchor is not None and options.anchor is None:
        raise BadInput(
            f"the policy's anchor {options.policy.anchor!r} was not loaded: pass its run as "
            "CheckOptions.anchor"
        )
    if options.policy.sequential is not None and options.policy.judge is not None:
        raise BadInput("a judged gate cannot be sequential yet: drop one of the two policy keys")
    if options.policy.judge is not None:
        # The judge's model and template are found now, not after the candidate has run.
        options.policy.judge.identity()
        _check_turn_scale(options.policy.judge.loaded_template().mode, baseline, options.tasks)
    if options.policy.sequential is not None and not isinstance(candidate, Run):
        return check_sequential(baseline, candidate, options, progress)
    if isinstance(candidate, Run):
        result, judged = _compare(baseline, candidate, options, progress)
        differences = tuple(
            hardware_differences(baseline.manifest.backend, candidate.manifest.backend)
        )
        kernels_differ = baseline.manifest.backend.hardware.kernels != (
            candidate.manifest.backend.hardware.kernels
        )
        action = HardwareAction.STORED if kernels_differ else HardwareAction.NONE
        hardware = HardwareCheck(
            differences, action, typical=typical(Cause.HARDWARE) if kernels_differ else ""
        )
        # A stored run comes without its documents: its flips keep their indices.
        uses = judge_cache(judged, options)
        result = replace(
            result,
            hardware=hardware,
            candidate=labelled(result, candidate, options),
            warnings=(
                *scoring_unchecked(baseline, candidate),
                *rejected_rows(uses),
                *result.warnings,
            ),
            cache=uses,
        )
        if options.policy.sequential is not None:
            once = "the policy's sequential design needs a run made by check: gated once, fixed"
            result = replace(result, warnings=(*result.warnings, once))
        judgements = judged.judgements if judged is not None else ()
        return CheckResult(result, candidate, judgements=judgements)
    plan, warnings = candidate_plan(baseline, candidate, options)
    prepared = prepare(plan.specs, plan.source, plan.shard)
    if not options.allow_mismatch:
        refuse_changed_inputs(baseline, prepared)
    # On a batch-dependent server the baseline's model runs beside the candidate instead.
    both, more = interleaved.on_server(baseline, plan, prepared, options, progress)
    rerun: Outcome | None
    if both is not None:
        outcome, rerun, hardware = both.candidate, both.reference, both.hardware
    else:
        outcome = run_plan(plan, f"check {candidate.model}", progress, prepared)
        rerun, hardware, rerun_warnings = reference_rerun(baseline, outcome.run, options, progress)
        more += rerun_warnings
    reference = rerun.run if rerun is not None else None
    result, judged = _compare(reference or baseline, outcome.run, options, progress)
    uses = (cache_use("candidate", outcome),) + (
        (cache_use("baseline rerun", rerun),) if rerun is not None else ()
    )
    ran = CandidateRun(
        baseline, outcome.run, plan, prepared, hardware, uses, (*warnings, *more), reference, judged
    )
    return finish(result, ran, options, progress)


def _compare(
    baseline: Run, candidate: Run, options: CheckOptions, progress: RunProgress
) -> tuple[Comparison, Judged | None]:
    """The gate on one pairing (golden sets named from the catalog), with the multiple-choice
    calibration (reported only) from the same pairs, and the judge's work when the policy has
    a judge."""
    paired = pair(baseline, candidate, options.allow_mismatch)
    judged = _judge_pairs(baseline, paired, options, progress)
    since = None
    if options.anchor is not None:
        since = pair_anchor(options.anchor, candidate, options.allow_mismatch)
    result = judge(
        baseline,
        candidate,
        paired,
        options.policy,
        options.tasks.golden_items(),
        since=since,
        latency=candidate_latency(options.ttft_ms, candidate),
        judged=judged,
    )
    if since is not None:
        result = replace(result, warnings=(*result.warnings, *_anchor_hardware(since, candidate)))
    # A proxy oversamples the examples its reference was unsure of: an unweighted ECE of its
    # sample would describe that sample, not the suite, so none is reported there.
    if baseline.manifest.proxy is not None:
        return result, judged
    return replace(result, calibration=compare_calibration(paired.units, paired.pairs)), judged


def _judge_pairs(
    baseline: Run, paired: Paired, options: CheckOptions, progress: RunProgress
) -> Judged | None:
    """The policy judge's verdicts on every paired example of the units it judges (None
    without a judge or a unit to judge). The questions are rendered again from the baseline's
    tasks, since a stored run keeps no text but the answers."""
    spec = options.policy.judge
    if spec is None:
        return None
    units = paired.units
    chosen = needs_judge(units, spec.units)
    tasks = {t.name: name for name, members in units.items() if name in chosen for t in members}
    if not tasks:
        return None
    specs = [s for s in baseline_specs(baseline, options.tasks) if s.task.name in tasks]
    examples = {
        (spec_.task.name, e.doc_id): e
        for spec_, found in prepare(specs, options.source)
        for e in found
    }
    template = spec.loaded_template()
    items = [
        answers
        for task in sorted(tasks)
        for base, cand in paired.pairs[task]
        for answers in _answers(tasks[task], base, cand, examples.get((task, base.doc_id)))
    ]
    how = "in both orders" if template.mode == "pairwise" else "one answer at a time"
    noun = "turns" if items and all(item.turn is not None for item in items) else "examples"
    with progress(f"judge {len(items)} {noun} {how}") as tick:
        bar = (lambda done, total: tick(done, total, len(items))) if tick else None
        return judge_pairs(spec, items, options.cache_dir, bar)


def _check_turn_scale(mode: Mode, baseline: Run, catalog: TaskCatalog) -> None:
    """A judged conversation turn passes at its `min` score: only a grading judge gives one,
    and a `min` above its scale's top could never pass."""
    known = [name for name in sorted(baseline.manifest.tasks) if catalog.has(name)]
    for task in catalog.get(known):
        if not isinstance(task, ConversationTask) or not task.judged:
            continue
        if mode is Mode.PAIRWISE:
            raise BadInput(
                f"{task.name} has turns checked by the judge: they need a grading judge (set "
                "judge.template to single or rubric, or a file with judge.mode single or rubric)"
            )
        top = int(CHOICES[mode][-1])
        for item in task.items:
            for turn, check in judged_turns(item):
                low = check["min"]
                if low > top:
                    raise BadInput(
                        f"{task.name} item {item['id']!r} turn {turn + 1}: judge min {low:g} "
                        f"is above the {mode} scale's top ({top})"
                    )


def _answers(unit: str, base: Record, cand: Record, example: Example | None) -> list[Answers]:
    """What to judge of one example: its question, reference and both sides' answers; for a
    conversation with judged turns, each judged turn on its own."""
    reference = example.doc.get("reference") if example is not None else None
    failed = [
        f"the {side}'s run failed ({r.status})"
        for side, r in (("baseline", base), ("candidate", cand))
        if not r.ok
    ]
    # A conversation is judged whole: every user turn, and each side's reply to each.
    talk = example is not None and isinstance(example.doc.get("turns"), list)
    if example is None:
        question = ""
    elif talk and (turns := judged_turns(example.doc)):
        return [_turn_answers(unit, base, cand, example.doc, t, c, failed) for t, c in turns]
    else:
        question = judge_question(example.doc) if talk else question_text(example)
    return [
        Answers(
            task=base.task,
            doc_id=base.doc_id,
            unit=unit,
            question=question,
            reference=reference if isinstance(reference, str) else None,
            baseline=_text(base, talk),
            candidate=_text(cand, talk),
            failed="; ".join(failed),
        )
    ]


def _turn_answers(
    unit: str, base: Record, cand: Record, item: Doc, turn: int, check: Doc, failed: list[str]
) -> Answers:
    """One judged turn of a conversation (its judge `check`): the conversation up to it, and
    each side's reply with the history that side saw."""

    def answer(record: Record) -> str | None:
        if not record.ok or not isinstance(record.pred, list):
            return None
        return turn_answer(item, [str(reply) for reply in record.pred], turn)

    return Answers(
        task=base.task,
        doc_id=base.doc_id,
        unit=unit,
        question=turn_question(item, turn),
        reference=check.get("reference"),
        baseline=answer(base),
        candidate=answer(cand),
        failed="; ".join(failed),
        turn=turn + 1,
        min_score=float(check["min"]),
    )


def _text(record: Record, conversation: bool) -> str | None:
    """The answer a judge reads: the record's text (a conversation's replies, turn by turn);
    None when its example failed."""
    if not record.ok:
        return None
    if conversation and isinstance(record.pred, list):
        return judge_answer([str(reply) for reply in record.pred])
    return record.pred if isinstance(record.pred, str) else str(record.pred)


def candidate_latency(ttft_ms: Mapping[str, tuple[float, ...]] | None, candidate: Run) -> Latency:
    """The candidate's request timings in a bench file (by its model file's sha256), or why
    there are none."""
    if ttft_ms is None:
        return Latency()
    sha = candidate.manifest.model.sha256
    if not sha or sha not in ttft_ms:
        return Latency(missing="the bench file has no model with the candidate's sha256")
    if not ttft_ms[sha]:
        return Latency(missing="the bench file timed no request of the candidate")
    return Latency(ttft_ms[sha])


def _anchor_hardware(since: Since, candidate: Run) -> list[str]:
    """A warning when the anchor's records come from another CPU build than the candidate's:
    the anchor is not rerun here, so its creep row carries that build's noise as well."""
    theirs, ours = since.anchor.manifest.backend.hardware, candidate.manifest.backend.hardware
    if theirs.kernels == ours.kernels:
        return []
    return [
        f"anchor {since.label} was stored on another CPU build ({theirs.kernels} vs "
        f"{ours.kernels}): {typical(Cause.HARDWARE)}; its creep row includes that noise"
    ]
