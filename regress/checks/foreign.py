"""Two foreign runs gated with no model loaded: an lm-eval `--log_samples` run (or an Inspect
log) on each side, or a baseline imported from one against another run of the same harness.

The fixed check does the gate (regress.checks.fixed: a finished run is gated as it is). What
this module adds is what a rerun would otherwise guarantee. regress's own check renders the
baseline's prompts again and refuses a changed input before the model runs; here both sides
were rendered elsewhere, so the two runs' own records must show they asked the same thing:
the same tasks, shots and harness-wide prompt settings (refused otherwise, exit 2; the gate's
pairing refuses other documents or prompts). What the runs say about how they computed is
compared like a backend change: another model type (hf vs vllm) is refused unless allowed;
a changed model, revision or dtype is the candidate's change and named in the report; a
changed batch size can move floats (padding, kernel choice), so it is flagged, not refused.
Nothing could be rerun here, and the report says so.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from regress.checks.fixed import check
from regress.checks.steps import CheckOptions, CheckResult
from regress.core.errors import BadInput
from regress.core.fingerprint import SPEED_ONLY_PARAMS
from regress.core.manifest import Run
from regress.gate.results import Comparison
from regress.run.inspect_import import read_inspect_log
from regress.run.lm_eval_import import EVAL_SETTINGS, read_lm_eval_run

NO_RUNTIME_CHECK = (
    "no runtime check was possible: both sides are {sources} files, so neither model was run "
    "here; the hardware, kernels and library versions are the runs' own records, and any "
    "difference between them is part of what this gate measured"
)
INSPECT_SUFFIXES = (".eval", ".json")
"""An Inspect log file (binary `.eval` or JSON); a folder is lm-eval's output."""


def read_samples(path: Path, name: str) -> Run:
    """The run in `path`: an Inspect log file (`.eval`, `.json`) or lm-eval's --output_path."""
    path = Path(path)
    if path.is_file() and path.suffix in INSPECT_SUFFIXES:
        return read_inspect_log(path, name)
    if path.is_file():
        raise BadInput(f"{path}: not an Inspect log (.eval or .json) nor lm-eval's output folder")
    return read_lm_eval_run(path, name)


def is_foreign(run: Run) -> bool:
    """Whether `run` came from another harness's files (lm-eval, Inspect), not from regress."""
    return EVAL_SETTINGS in run.manifest.environment


def check_foreign(
    baseline: Run, candidate: Run, options: CheckOptions | None = None
) -> CheckResult:
    """Gate `candidate` against `baseline`, both read from a harness's files.

    Raises BadInput (one line) when the runs come from different harnesses, hold other
    tasks, shots or prompt settings, or ran on another model type without
    `allow_backend_change`.
    """
    options = options or CheckOptions()
    if not (is_foreign(baseline) and is_foreign(candidate)):
        raise BadInput("check_foreign gates two imported runs (lm-eval or Inspect) only")
    refused = refusals(baseline, candidate)
    if refused:
        raise BadInput(f"the two runs did not ask the same thing: {refused[0]}")
    flagged = setting_changes(baseline, candidate, options.allow_backend_change)
    result = check(baseline, candidate, options)
    sources = " and ".join(sorted({_source(baseline), _source(candidate)}))
    warnings = (NO_RUNTIME_CHECK.format(sources=sources), *flagged)
    comparison = result.comparison
    return CheckResult(
        comparison=_with_warnings(comparison, warnings),
        candidate=result.candidate,
        judgements=result.judgements,
    )


def refusals(baseline: Run, candidate: Run) -> list[str]:
    """Why the two runs cannot be paired as the same evaluation (empty when they can)."""
    old, new = baseline.manifest, candidate.manifest
    problems = []
    if _source(baseline) != _source(candidate):
        problems.append(f"baseline from {_source(baseline)}, candidate from {_source(candidate)}")
    if set(old.tasks) != set(new.tasks):
        only_old = ", ".join(sorted(set(old.tasks) - set(new.tasks))) or "-"
        only_new = ", ".join(sorted(set(new.tasks) - set(old.tasks))) or "-"
        problems.append(
            f"tasks differ (only in the baseline: {only_old}; only in the candidate: {only_new})"
        )
    for name in sorted(set(old.tasks) & set(new.tasks)):
        shots = old.tasks[name].num_fewshot, new.tasks[name].num_fewshot
        if shots[0] != shots[1]:
            problems.append(
                f"{name}: n-shot {shots[0]} in the baseline, {shots[1]} in the candidate"
            )
    ours = old.environment.get(EVAL_SETTINGS) or {}
    theirs = new.environment.get(EVAL_SETTINGS) or {}
    for key in sorted(set(ours) | set(theirs)):
        if ours.get(key) != theirs.get(key):
            problems.append(
                f"{key} {_show(ours.get(key))} in the baseline, {_show(theirs.get(key))} in "
                "the candidate"
            )
    return problems


def setting_changes(baseline: Run, candidate: Run, allow_backend_change: bool) -> list[str]:
    """One warning per way the two runs computed differently: model type (refused unless
    allowed), model, settings, harness and library versions, device."""
    old, new = baseline.manifest.backend, candidate.manifest.backend
    lines = []
    if old.name != new.name:
        if not allow_backend_change:
            raise BadInput(
                f"baseline ran on {old.name}, candidate on {new.name}: different runtimes "
                "compute different log-probs (pass --allow-backend-change to compare anyway)"
            )
        lines.append(
            f"candidate ran on {new.name}, the baseline on {old.name}: part of any difference "
            "is the runtime, not the model"
        )
    model = baseline.manifest.model.ref, candidate.manifest.model.ref
    if model[0] != model[1]:
        lines.append(f"model changed: {model[0]} -> {model[1]}")
    for key in sorted(set(old.params) | set(new.params)):
        before, after = old.params.get(key), new.params.get(key)
        if before == after or key in ("pretrained", "model"):
            continue  # the model's own name is the model line above
        if key in SPEED_ONLY_PARAMS:
            lines.append(
                f"{key} changed ({_show(before)} -> {_show(after)}): batching can move "
                "log-probs in their last digits (padding, kernel choice), so a few close "
                "answers may flip with no model change"
            )
        else:
            lines.append(f"{key} changed: {_show(before)} -> {_show(after)}")
    if old.version != new.version:
        lines.append(f"{old.name} version changed: {old.version} -> {new.version}")
    for lib in sorted(set(old.libraries) | set(new.libraries)):
        if old.libraries.get(lib) != new.libraries.get(lib):
            lines.append(
                f"{lib} version changed: {_show(old.libraries.get(lib))} -> "
                f"{_show(new.libraries.get(lib))}"
            )
    where = old.hardware.cpu.label(), new.hardware.cpu.label()
    gpus = baseline.manifest.environment.get("gpu"), candidate.manifest.environment.get("gpu")
    if where[0] != where[1] or gpus[0] != gpus[1]:
        lines.append(
            f"the runs computed on different hardware ({_device(where[0], gpus[0])} -> "
            f"{_device(where[1], gpus[1])}): part of any difference is hardware noise"
        )
    return lines


def _with_warnings(comparison: Comparison, warnings: tuple[str, ...]) -> Comparison:
    return replace(comparison, warnings=(*warnings, *comparison.warnings))


def _source(run: Run) -> str:
    return str(run.manifest.environment.get("source", "unknown"))


def _device(cpu: str, gpu: Any) -> str:
    return f"{cpu}, GPU {gpu}" if gpu else cpu


def _show(value: Any) -> str:
    return "unset" if value in (None, "", {}) else str(value)
