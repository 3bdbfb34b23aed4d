"""What every check of a candidate does, fixed or sequential: plan the candidate's run,
refuse changed inputs, rerun the baseline's model where the hardware differs, run, and
finish (label the candidate, attach texts, warnings, caches and repeatability).

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

import difflib
import random
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from regress.backends import BACKENDS
from regress.backends.models import pinned_file_problem, resolve_model_path
from regress.core.errors import BadInput
from regress.core.fingerprint import hardware_differences
from regress.core.judgements import Judged, Judgement
from regress.core.manifest import Run
from regress.core.requests import GenerateRequest, LoglikelihoodRequest
from regress.gate.compare import compare
from regress.gate.noise import Cause, typical
from regress.gate.pairing import MISMATCH_REFUSED, hash_difference, pair_runs, units_of
from regress.gate.policy import Policy
from regress.gate.results import (
    CacheUse,
    Comparison,
    Fingerprint,
    Flip,
    HardwareAction,
    HardwareCheck,
    Repeatability,
)
from regress.run.engine import Prepared, TaskSpec, identity
from regress.run.runner import Outcome, RunPlan, execute, plan_rerun
from regress.tasks.base import DataSource, Example
from regress.tasks.catalog import BUILTIN, TaskCatalog, scoring_hash
from regress.tasks.fewshot import FEWSHOT_DELIMITER

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
    max_looks: int | None = None
    """A sequential check's budget: take at most this many looks now (`check --max-looks`);
    the saved run continues with `check --continue RUN`. None: every look."""
    resume: Run | None = None
    """A sequential check's saved run to continue (`check --continue RUN`): its looks are
    replayed from its records, the next ones run."""


@dataclass(frozen=True)
class CheckResult:
    """The gate's verdict and the runs behind it."""

    comparison: Comparison
    candidate: Run
    reference: Run | None = None
    """The baseline's model rerun on this machine, when the gate used one."""
    judgements: tuple[Judgement, ...] = ()
    """The policy judge's verdicts, one per judged example (`check --judgements FILE`)."""


def judge_cache(judged: Judged | None, options: CheckOptions) -> tuple[CacheUse, ...]:
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
        question=_cut(question_text(example)),
        baseline_answer=_answer(example, flip.baseline_pred),
        candidate_answer=_answer(example, flip.candidate_pred),
        target_answer=_answer(example, flip.target),
    )


def question_text(example: Example) -> str:
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


def refuse_unit_typos(baseline: Run, policy: Policy) -> None:
    """BadInput, before any model loads, for a policy unit that is not one of the baseline's
    but spells one nearly (`arc-easy` for `arc_easy`): its limits would silently not apply.
    A name far from every unit stays a report warning, as a policy shared by several suites
    names units some of them lack."""
    units = sorted(units_of(list(baseline.manifest.tasks.values())))
    for name in sorted(set(policy.units) - set(units)):
        near = difflib.get_close_matches(name, units, n=1, cutoff=0.8)
        if near:
            raise BadInput(
                f"the policy names unit {name!r}, which is not in baseline "
                f"{baseline.manifest.name!r}: did you mean {near[0]!r}?"
            )


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
    reran = HardwareCheck(differences, HardwareAction.RERAN, typical=note)
    return rerun, rerun_drift(baseline, rerun.run, options.policy, reran), []


def rerun_drift(baseline: Run, rerun: Run, policy: Policy, check: HardwareCheck) -> HardwareCheck:
    """`check` with how far `rerun`, the baseline's model run again, moved from the stored
    baseline: the examples paired, those whose right/wrong outcome changed (counted as the
    gate counts flips) and the mean KL over the choices."""
    moved = compare(baseline, rerun, policy)
    paired = [unit for unit in moved.units if unit.n]
    weighted = [(u.kl_divergence, u.n) for u in paired if u.kl_divergence is not None]
    kl = sum(k * n for k, n in weighted) / sum(n for _, n in weighted) if weighted else None
    return replace(
        check,
        stored=Fingerprint.of(baseline.manifest),
        n=sum(u.n for u in paired),
        flips=moved.n_flips,
        kl_divergence=kl,
    )


def _pinned_model_problem(baseline: Run, where: str | None) -> str:
    """Why the baseline's pinned model cannot be rerun here ('' when it can)."""
    pinned = baseline.manifest.model
    ref = where or pinned.ref
    try:
        path = resolve_model_path(ref)
    except BadInput as exc:
        return f"its model is not available ({exc}; --reference-model names where it is)"
    problem = pinned_file_problem(path, pinned.sha256)
    return f"{path} is not the pinned file ({problem})" if problem else ""


def _stored_warning(note: str) -> str:
    return (
        "the baseline was computed on other CPU kernels: part of any difference is "
        f"hardware noise, not the model ({note})"
    )


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


@dataclass(frozen=True)
class CandidateRun:
    """What a check ran, for `finish`: the candidate's run and how it was made."""

    baseline: Run
    run: Run
    plan: RunPlan
    prepared: Prepared
    """The documents the check rendered (their texts go into the flips)."""
    hardware: HardwareCheck
    uses: tuple[CacheUse, ...]
    """The result cache's use by the candidate's run and the baseline rerun."""
    warnings: tuple[str, ...] = ()
    reference: Run | None = None
    """The baseline's model rerun here, when the gate used one."""
    judged: Judged | None = None


def finish(
    result: Comparison, ran: CandidateRun, options: CheckOptions, progress: RunProgress
) -> CheckResult:
    """The end every check of a model shares, fixed or sequential: the candidate's label and
    the flips' texts, the warnings (the run's, unchecked scoring, refused cache rows, the
    gate's own), the hardware check, the caches and, when asked, the repeatability probe."""
    repeat = None
    if options.repeat_check:
        repeat = repeatability(ran.run, ran.plan, options.repeat_check, progress)
    uses = (*ran.uses, *judge_cache(ran.judged, options))
    warnings = (
        *ran.warnings,
        *scoring_unchecked(ran.baseline, ran.run),
        *rejected_rows(uses),
        *result.warnings,
    )
    result = replace(
        result,
        candidate=labelled(result, ran.run, options),
        flips=with_texts(result.flips, ran.prepared),
        warnings=warnings,
        hardware=ran.hardware,
        repeatability=repeat,
        cache=uses,
    )
    judgements = ran.judged.judgements if ran.judged is not None else ()
    return CheckResult(result, ran.run, ran.reference, judgements)
