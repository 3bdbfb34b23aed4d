"""The gate's use cases, `check` and `drift`, as functions the CLI only calls.

`check` gates a candidate against a stored baseline, on this machine's compute path.

The gate's premise is that the candidate is the only difference between the two runs. A
baseline stored on another CPU build (AVX-512 kernels where this machine has AVX2) breaks
that premise by itself: about 2% of answers move with the same model file. So when the
candidate's compute path differs from the baseline's only in its hardware path, the
baseline's pinned model (found by its recorded reference, checked by sha256) is rerun here
and the candidate is gated against that rerun; how far the rerun moved from the stored
records is reported apart, as hardware drift. The rerun goes through the result cache, keyed
by model sha256 and compute path, so a CI cache makes it free after the first run.

When the runtime version differs too, a rerun here would also carry the new runtime and hide
the very change a runtime-upgrade PR asks about; `auto` then gates against the stored
records and says so (`always` reruns anyway).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field, replace
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import Any

from regress.backends import BACKENDS
from regress.backends.models import file_sha256, resolve_model_path
from regress.core.errors import BadInput
from regress.core.fingerprint import hardware_differences
from regress.core.manifest import Run
from regress.core.records import Record
from regress.core.requests import GenerateRequest, LoglikelihoodRequest
from regress.gate.choice_calibration import compare_calibration
from regress.gate.compare import (
    MISMATCH_REFUSED,
    Paired,
    Since,
    compare,
    hash_difference,
    judge,
    pair,
    pair_anchor,
)
from regress.gate.drift import DriftReport, drift_report
from regress.gate.integrity import check_proxy
from regress.gate.judged import needs_judge
from regress.gate.noise import Cause, typical
from regress.gate.pairing import pair_runs
from regress.gate.policy import Policy
from regress.gate.requirements import Latency
from regress.gate.results import (
    CacheUse,
    Comparison,
    Fingerprint,
    Flip,
    HardwareAction,
    HardwareCheck,
    Repeatability,
)
from regress.run.engine import Prepared, TaskSpec, identity, prepare
from regress.run.judge import Answers, Judged, Judgement, judge_pairs
from regress.run.runner import Outcome, RunPlan, baseline_specs, execute, plan_rerun
from regress.tasks.base import DataSource, Example
from regress.tasks.catalog import BUILTIN, TaskCatalog, scoring_hash
from regress.tasks.conversation import (
    ConversationTask,
    judge_answer,
    judge_question,
    judged_turns,
    turn_answer,
    turn_question,
)
from regress.tasks.fewshot import FEWSHOT_DELIMITER
from regress.tasks.judge_templates import CHOICES, Mode
from regress.tasks.loaders import Doc

RunProgress = Callable[[str], AbstractContextManager[Callable[[int, int, int], None] | None]]
"""Given a label, a context yielding the engine's progress callback (or None)."""


class Rebaseline(StrEnum):
    """When `check` reruns the baseline's pinned model on this machine."""

    AUTO = "auto"
    """When the CPU build's kernels differ and the runtime version is the same."""
    ALWAYS = "always"
    """Whenever the baseline's model can be run here."""
    NEVER = "never"
    """Always gate against the stored records."""


@dataclass(frozen=True)
class CandidateModel:
    """A candidate to run: a model, on a backend (default: the baseline's), with settings."""

    model: str
    backend: str | None = None
    model_args: Mapping[str, Any] = field(default_factory=dict)
    """Overrides of the baseline's result-relevant settings, key by key."""


@dataclass(frozen=True)
class CheckOptions:
    """How to gate: the policy, where data and cached results live, and what may differ."""

    policy: Policy = field(default_factory=Policy)
    source: DataSource = field(default_factory=DataSource)
    cache_dir: Path | None = None
    """Result cache folder (resume, cached baseline reruns); None computes everything."""
    rebaseline: Rebaseline = Rebaseline.AUTO
    reference_model: str | None = None
    """Where the baseline's pinned model is now (default: the reference it recorded)."""
    allow_mismatch: bool = False
    """Pair identical documents only when dataset/prompt hashes differ, instead of refusing."""
    allow_backend_change: bool = False
    repeat_check: int = 0
    """Send this many random examples to the candidate again and report what changed."""
    command: str = ""
    tasks: TaskCatalog = BUILTIN
    """Where the baseline's task names are found: built in, task YAML, golden sets."""
    candidate_name: str | None = None
    """The candidate's label in the reports (default: its model file's name, or the served
    model's)."""
    anchor: Run | None = None
    """The policy's anchor baseline, loaded (the creep guard); needed when the policy names
    one."""
    ttft_ms: Mapping[str, tuple[float, ...]] | None = None
    """A bench file's timed requests by model file (sha256 -> each request's time to first
    token, ms; `check --bench`), for a `ttft_ms` decision gate; None: no bench file."""


@dataclass(frozen=True)
class CheckResult:
    """The gate's verdict and the runs behind it."""

    comparison: Comparison
    candidate: Run
    reference: Run | None = None
    """The baseline's model rerun on this machine, when the gate used one."""
    judgements: tuple[Judgement, ...] = ()
    """The policy judge's verdicts, one per judged example (`check --judgements FILE`)."""


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
        # Imported here: the sequential gate is built from this module's steps.
        from regress.checks.sequential import check_sequential

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
        judge_cache = _judge_cache(judged, options)
        result = replace(
            result,
            hardware=hardware,
            candidate=labelled(result, candidate, options),
            warnings=(
                *scoring_unchecked(baseline, candidate),
                *rejected_rows(judge_cache),
                *result.warnings,
            ),
            cache=judge_cache,
        )
        if options.policy.sequential is not None:
            once = "the policy's sequential design needs a run made by check: gated once, fixed"
            result = replace(result, warnings=(*result.warnings, once))
        return CheckResult(result, candidate, judgements=_judgements(judged))
    plan, warnings = candidate_plan(baseline, candidate, options)
    prepared = prepare(plan.specs, plan.source, plan.shard)
    if not options.allow_mismatch:
        refuse_changed_inputs(baseline, prepared)
    outcome = run_plan(plan, f"check {candidate.model}", progress, prepared)
    rerun, hardware, more = reference_rerun(baseline, outcome.run, options, progress)
    reference = rerun.run if rerun is not None else None
    result, judged = _compare(reference or baseline, outcome.run, options, progress)
    repeat = None
    if options.repeat_check:
        repeat = repeatability(outcome.run, plan, options.repeat_check, progress)
    uses = [cache_use("candidate", outcome)] + (
        [cache_use("baseline rerun", rerun)] if rerun is not None else []
    )
    uses += _judge_cache(judged, options)
    unchecked = scoring_unchecked(baseline, outcome.run)
    result = replace(
        result,
        candidate=labelled(result, outcome.run, options),
        flips=with_texts(result.flips, prepared),
        warnings=(*warnings, *more, *unchecked, *rejected_rows(uses), *result.warnings),
        hardware=hardware,
        repeatability=repeat,
        cache=tuple(uses),
    )
    return CheckResult(result, outcome.run, reference, _judgements(judged))


def _judgements(judged: Judged | None) -> tuple[Judgement, ...]:
    return judged.judgements if judged is not None else ()


def _judge_cache(judged: Judged | None, options: CheckOptions) -> tuple[CacheUse, ...]:
    """How many of the judge's verdicts the result cache replayed, and how many of its rows
    it refused (corrupt or failing their digest: computed again)."""
    if judged is None or options.cache_dir is None:
        return ()
    return (CacheUse("judge", True, judged.cached, judged.computed, judged.rejected),)


def rejected_rows(uses: Sequence[CacheUse]) -> list[str]:
    """A warning per run whose cached rows were refused: the cache folder was damaged or
    edited (a judge-cache edit once turned a PASS into a REGRESSION)."""
    return [
        f"{u.rejected} cached result(s) of the {u.run} failed their digest or were corrupt and "
        "were computed again: the cache folder was damaged or edited"
        for u in uses
        if u.rejected
    ]


def _candidate_label(run: Run) -> str:
    """What the reports call a candidate not given a name: its model file's name
    (`smollm2-q4_0.gguf`), or the served model's name for a server backend."""
    ref = run.manifest.model.ref
    if not ref:
        return run.manifest.name
    # A served model's name (`org/model`) is not a path.
    return ref if run.manifest.backend.name == "openai" else Path(ref).name or ref


def labelled(result: Comparison, candidate: Run, options: CheckOptions) -> Fingerprint:
    return replace(result.candidate, label=options.candidate_name or _candidate_label(candidate))


TEXT_CHARS = 500
"""Longest question or answer text kept in a flip: the JSON report stays small, and the
Markdown report shows less still."""


def with_texts(flips: tuple[Flip, ...], prepared: Prepared) -> tuple[Flip, ...]:
    """`flips` with the question and the answers' texts of the examples in `prepared` (the
    documents this check rendered); a flip whose example is not there keeps its indices."""
    examples = {(spec.task.name, e.doc_id): e for spec, found in prepared for e in found}
    return tuple(_texts(f, examples.get((f.task, f.doc_id))) for f in flips)


def _texts(flip: Flip, example: Example | None) -> Flip:
    if example is None:
        return flip
    return replace(
        flip,
        question=_cut(_question(example)),
        baseline_answer=_answer(example, flip.baseline_pred),
        candidate_answer=_answer(example, flip.candidate_pred),
        target_answer=_answer(example, flip.target),
    )


def _question(example: Example) -> str:
    """The document's question field when it has one (a BoolQ prompt opens with its passage),
    else the example's own prompt: the context after the last few-shot delimiter."""
    question = example.doc.get("question")
    if isinstance(question, str) and question.strip():
        return question
    request = example.requests[0] if example.requests else None
    if isinstance(request, GenerateRequest) and request.messages:
        return request.messages[-1][1]  # a conversation: its first turn's user message
    context = request.context if isinstance(request, LoglikelihoodRequest | GenerateRequest) else ""
    return context.rsplit(FEWSHOT_DELIMITER, 1)[-1]


def _answer(example: Example, pred: Any) -> str | None:
    """A choice index as its choice's text; None for anything else (a generation is already
    its text; a single-request task's 0/1 is no choice)."""
    requests = example.requests
    if isinstance(pred, bool) or not isinstance(pred, int) or len(requests) < 2:
        return None
    chosen = requests[pred] if 0 <= pred < len(requests) else None
    if not isinstance(chosen, LoglikelihoodRequest):
        return None
    text = chosen.continuation.strip()
    options = example.doc.get("choices")
    if isinstance(options, list) and len(options) == len(requests):
        option = options[pred]
        # MMLU scores the letter (" B"): its option's text is what a reader needs.
        if isinstance(option, str) and option.strip() != text:
            return _cut(f"{text}. {option}")
    return _cut(text)


def _cut(text: str) -> str:
    return text if len(text) <= TEXT_CHARS else text[: TEXT_CHARS - 1] + "…"


def cache_use(run: str, outcome: Outcome) -> CacheUse:
    return CacheUse(
        run, outcome.cache_enabled, outcome.cached, outcome.computed, outcome.cache_rejected
    )


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
        question = judge_question(example.doc) if talk else _question(example)
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


def candidate_plan(
    baseline: Run, candidate: CandidateModel, options: CheckOptions
) -> tuple[RunPlan, list[str]]:
    """The plan that reruns the baseline's examples on the candidate, and warnings about it.

    Refuses (BadInput) a backend other than the baseline's unless `allow_backend_change`.
    """
    ours = baseline.manifest.backend.name
    if candidate.backend is None and ours not in BACKENDS:
        raise BadInput(
            f"baseline {baseline.manifest.name!r} came from {ours}: choose the candidate's "
            "backend (and allow the backend change)"
        )
    chosen = candidate.backend or ours
    warnings = []
    if chosen != ours:
        if not options.allow_backend_change:
            raise BadInput(
                f"baseline {baseline.manifest.name!r} ran on {ours}, candidate on {chosen}: "
                "cross-backend log-probs differ (pass --allow-backend-change to compare anyway)"
            )
        warnings.append(
            f"candidate backend {chosen} differs from the baseline's {ours}: part of any "
            "difference is backend noise, not the model"
        )
    plan = plan_rerun(
        baseline,
        candidate.model,
        chosen,
        model_args=candidate.model_args,
        source=options.source,
        name="candidate",
        cache_dir=options.cache_dir,
        command=options.command,
        tasks=options.tasks,
    )
    return plan, warnings


def refuse_changed_inputs(baseline: Run, prepared: Prepared) -> None:
    """BadInput before any model loads when a task's documents, prompts or scoring are no
    longer the baseline's (the comparison would refuse the same, after the whole run)."""
    for spec, examples in prepared:
        info = baseline.manifest.tasks.get(spec.task.name)
        if info is None:
            continue
        problem = hash_difference(info, identity(spec, examples), scoring_hash(spec.task))
        if problem:
            raise BadInput(f"{problem}; {MISMATCH_REFUSED}")


def scoring_unchecked(baseline: Run, candidate: Run) -> list[str]:
    """A warning naming the paired tasks whose scoring could not be compared: a manifest
    written before the scoring hash was recorded (the committed `baselines/main`, an lm-eval
    import) has none, and a change to how answers are scored then passes unseen."""
    ours, theirs = baseline.manifest.tasks, candidate.manifest.tasks
    names = [
        name
        for name in sorted(ours)
        if name in theirs and None in (ours[name].scoring_hash, theirs[name].scoring_hash)
    ]
    if not names:
        return []
    if all(ours[n].scoring_hash is None for n in names):
        side = "baseline"
    elif all(theirs[n].scoring_hash is None for n in names):
        side = "candidate run"
    else:
        side = "baseline or the candidate run"
    listed = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    noun = "task" if len(names) == 1 else "tasks"
    return [
        f"scoring not checked for {len(names)} {noun} ({listed}): the {side} stores no "
        "scoring hash (written before regress recorded one, or imported from lm-eval), so a "
        "change to how answers are scored would pass unseen"
    ]


def run_plan(
    plan: RunPlan, label: str, progress: RunProgress, prepared: Prepared | None = None
) -> Outcome:
    with progress(label) as tick:
        return execute(plan, tick, prepared)


def reference_rerun(
    baseline: Run, candidate: Run, options: CheckOptions, progress: RunProgress
) -> tuple[Outcome | None, HardwareCheck, list[str]]:
    """Rerun the baseline's model here when the policy above says so; else say why not."""
    old, new = baseline.manifest.backend, candidate.manifest.backend
    differences = tuple(hardware_differences(old, new))
    kernels_differ = old.hardware.kernels != new.hardware.kernels
    note = typical(Cause.HARDWARE) if kernels_differ else ""
    if options.rebaseline is Rebaseline.NEVER or (
        options.rebaseline is Rebaseline.AUTO and not kernels_differ
    ):
        action = HardwareAction.STORED if kernels_differ else HardwareAction.NONE
        warnings = [_stored_warning(note)] if kernels_differ else []
        return None, HardwareCheck(differences, action, typical=note), warnings
    same_runtime = (old.name, old.version, old.libraries) == (new.name, new.version, new.libraries)
    why_not = ""
    if old.name not in BACKENDS or old.name == "openai":
        why_not = f"the baseline ran on {old.name}, which cannot be rerun here"
    elif options.rebaseline is Rebaseline.AUTO and not same_runtime:
        why_not = (
            "the runtime version differs too, and a rerun here would hide that change "
            "(--rebaseline always reruns anyway)"
        )
    else:
        why_not = _pinned_model_problem(baseline, options.reference_model)
    if why_not:
        warning = f"baseline not rerun here: {why_not}; gated against the stored records"
        stored = HardwareCheck(differences, HardwareAction.STORED, typical=note)
        return None, stored, [warning] + ([_stored_warning(note)] if kernels_differ else [])
    plan = plan_rerun(
        baseline,
        options.reference_model or baseline.manifest.model.ref,
        old.name,
        source=options.source,
        name=f"{baseline.manifest.name} (rerun here)",
        cache_dir=options.cache_dir,
        command=options.command,
        tasks=options.tasks,
    )
    rerun = run_plan(plan, f"rerun baseline {baseline.manifest.name}", progress)
    moved = compare(baseline, rerun.run, options.policy)
    paired = [unit for unit in moved.units if unit.n]
    weighted = [(u.kl_divergence, u.n) for u in paired if u.kl_divergence is not None]
    kl = sum(k * n for k, n in weighted) / sum(n for _, n in weighted) if weighted else None
    hardware = HardwareCheck(
        differences,
        HardwareAction.RERAN,
        stored=Fingerprint.of(baseline.manifest),
        n=sum(u.n for u in paired),
        flips=moved.n_flips,
        kl_divergence=kl,
        typical=note,
    )
    return rerun, hardware, []


def _pinned_model_problem(baseline: Run, where: str | None) -> str:
    """Why the baseline's pinned model cannot be rerun here ('' when it can)."""
    pinned = baseline.manifest.model
    ref = where or pinned.ref
    try:
        path = resolve_model_path(ref)
    except BadInput as exc:
        return f"its model is not available ({exc}; --reference-model names where it is)"
    if path.is_file() and pinned.sha256 and file_sha256(path) != pinned.sha256:
        return f"{path} is not the pinned file (sha256 differs from {pinned.sha256[:12]})"
    return ""


def _stored_warning(note: str) -> str:
    return (
        "the baseline was computed on other CPU kernels: part of any difference is "
        f"hardware noise, not the model ({note})"
    )


@dataclass(frozen=True)
class DriftOptions:
    """How to rerun a pinned baseline for a drift check."""

    policy: Policy = field(default_factory=Policy)
    source: DataSource = field(default_factory=DataSource)
    max_age: timedelta = timedelta(days=30)
    """Warn when the baseline is older than this."""
    model: str | None = None
    """Where the pinned model file is now (default: the reference it recorded)."""
    model_args: Mapping[str, Any] = field(default_factory=dict)
    """Settings to override, to see whether they move results."""
    command: str = ""
    tasks: TaskCatalog = BUILTIN
    """Where the baseline's task names are found: built in, task YAML, golden sets."""


def check_drift(
    baseline: Run, options: DriftOptions | None = None, progress: RunProgress | None = None
) -> DriftReport:
    """Rerun `baseline`'s pinned model with today's runtime (no result cache) and judge the
    movement against the noise of what changed (see `regress.gate.drift.drift_report`)."""
    options = options or DriftOptions()
    progress = progress or (lambda label: nullcontext(None))
    plan = plan_rerun(
        baseline,
        options.model or baseline.manifest.model.ref,
        baseline.manifest.backend.name,
        model_args=options.model_args,
        source=options.source,
        name="drift",
        command=options.command,
        tasks=options.tasks,
    )
    current = run_plan(plan, f"drift {baseline.manifest.name}", progress).run
    return drift_report(baseline, current, options.policy, options.max_age)


def repeatability(candidate: Run, plan: RunPlan, n: int, progress: RunProgress) -> Repeatability:
    """Send `n` random examples again (no cache) and count answers that came back different."""
    examples = [(task, r.doc_id) for task, records in candidate.records.items() for r in records]
    chosen = set(random.Random(0).sample(examples, min(n, len(examples))))
    specs = []
    for spec in plan.specs:
        ids = tuple(i for i in spec.doc_ids or () if (spec.task.name, i) in chosen)
        if ids:
            specs.append(TaskSpec(spec.task, spec.num_fewshot, spec.limit, ids))
    again = run_plan(
        replace(plan, specs=tuple(specs), cache_dir=None, name="repeat"),
        f"repeat {len(chosen)} examples",
        progress,
    ).run
    tasks = [candidate.manifest.tasks[name] for name in again.manifest.tasks]
    changed, largest = 0, 0.0
    for pairs in pair_runs(candidate, again, tasks).pairs.values():
        for first, second in pairs:
            changed += first.pred != second.pred or first.status != second.status
            ours, theirs = first.scores.get("loglik") or [], second.scores.get("loglik") or []
            if len(ours) == len(theirs):
                deltas = [abs(a - b) for a, b in zip(ours, theirs, strict=True)]
                largest = max([largest, *deltas])
    return Repeatability(n=len(chosen), changed=changed, max_abs_logprob_delta=largest)
