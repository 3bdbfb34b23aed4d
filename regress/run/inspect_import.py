"""Read an Inspect (inspect-ai) evaluation log as a regress `Run`.

The log is read with inspect-ai's own reader (`inspect_ai.log.read_eval_log`), so both of its
formats (`.eval`, `.json`) and its future schema changes are its to handle; inspect-ai is
imported only here, when a log is read (the `inspect` extra).

One log holds one task. Each sample becomes one record, keyed by its id: its doc hash covers
the id, input and target, its prompt hash the input, so two logs pair exactly where they
asked the same question. Inspect's epochs are repeats of one sample: a record keeps its
epochs' scores in epoch order (`scores["correct"]`, paired epoch by epoch with the other
log's) and, with more than one epoch, their mean as the metric the gate pairs (a per-sample
score, never epochs counted as separate samples). A score is read with inspect-ai's
`value_to_float` (C 1, I 0, P 0.5, numbers as they are), from the first scorer unless one is
named. The model name, its base URL and arguments, and the generation config make the
fingerprint; the solver plan, epochs and task arguments must match between two logs (they
change what was asked); the scorers are the task's scoring hash.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from regress import __version__
from regress.core.errors import BadInput
from regress.core.fingerprint import HardwarePath, RuntimeFingerprint
from regress.core.hashes import digest, scoring_digest, task_hashes
from regress.core.manifest import Manifest, ModelInfo, Run, TaskInfo
from regress.core.records import Record, Status
from regress.run.lm_eval_import import EVAL_SETTINGS
from regress.tasks.base import doc_hash

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalSample

METRIC = "score"
"""The metric name of an imported sample's score (its epochs' mean)."""


def read_inspect_log(path: Path, name: str, scorer: str | None = None) -> Run:
    """The Inspect log at `path` as a regress Run named `name`, scored by `scorer` (default:
    the log's first scorer). BadInput for a file inspect-ai cannot read, a log that did not
    finish, or one without samples or that scorer."""
    try:
        from inspect_ai.log import read_eval_log
    except ImportError as exc:
        raise BadInput(
            f"{path}: reading Inspect logs needs inspect-ai (pip install 'regress-gate[inspect]')"
        ) from exc
    path = Path(path)
    if not path.is_file():
        raise BadInput(f"{path}: no such Inspect log")
    try:
        log = read_eval_log(str(path))
    except Exception as exc:  # inspect-ai raises many kinds for a file that is not a log
        raise BadInput(f"{path}: not an Inspect log inspect-ai can read ({exc})") from exc
    if log.status != "success":
        raise BadInput(f"{path}: the evaluation's status is {log.status}, not success")
    if not log.samples:
        raise BadInput(f"{path}: the log holds no samples (run inspect with log_samples)")
    chosen = _scorer(log, scorer, path)
    task = log.eval.task
    records = _records(task, log.samples, chosen, path)
    epochs = log.eval.config.epochs or 1
    dataset_hash, prompt_hash = task_hashes(records)
    info = TaskInfo(
        name=task,
        group=None,
        n=len(records),
        num_fewshot=0,
        metric=METRIC,
        output_type="generate_until",
        dataset_hash=dataset_hash,
        prompt_hash=prompt_hash,
        scoring_hash=scoring_digest(
            {"family": "inspect", "scorer": chosen, "scorers": _dump(log.eval.scorers)}
        ),
    )
    return Run(manifest=_manifest(name, path, log, info, epochs), records={task: records})


def _scorer(log: EvalLog, wanted: str | None, path: Path) -> str:
    names: list[str] = [s.name for s in log.eval.scorers or []]
    if not names:
        raise BadInput(f"{path}: the log names no scorer")
    if wanted is None:
        return names[0]
    if wanted not in names:
        raise BadInput(f"{path}: no scorer {wanted!r} (the log has: {', '.join(names)})")
    return wanted


def _records(task: str, samples: Sequence[EvalSample], scorer: str, path: Path) -> list[Record]:
    by_id: dict[int | str, list[EvalSample]] = {}
    for sample in samples:
        by_id.setdefault(sample.id, []).append(sample)
    ids = _doc_ids(list(by_id))
    records = []
    for sample_id, epochs in by_id.items():
        epochs = sorted(epochs, key=lambda s: s.epoch)
        if len({s.epoch for s in epochs}) != len(epochs):
            raise BadInput(f"{path}: sample {sample_id!r} repeats an epoch")
        records.append(_record(task, ids[sample_id], sample_id, epochs, scorer, path))
    return sorted(records, key=lambda r: r.doc_id)


def _doc_ids(ids: list[int | str]) -> dict[int | str, int]:
    """Integer ids as they are; otherwise each id's rank in text order. The doc hash holds
    the id itself, so a log whose ids rank differently pairs nothing by mistake."""
    if all(isinstance(i, int) and i >= 0 for i in ids):
        return {i: int(i) for i in ids}
    return {i: rank for rank, i in enumerate(sorted(ids, key=str))}


def _record(
    task: str, doc_id: int, sample_id: int | str, epochs: list[EvalSample], scorer: str, path: Path
) -> Record:
    from inspect_ai.scorer import value_to_float

    first = epochs[0]
    question = _dump(first.input)
    errors = [s.error.message for s in epochs if s.error is not None]
    values = []
    for sample in epochs:
        score = (sample.scores or {}).get(scorer)
        if score is None:
            if sample.error is not None:
                continue
            raise BadInput(f"{path}: sample {sample_id!r} epoch {sample.epoch} has no {scorer}")
        values.append(value_to_float()(score.value))
    binary = len(epochs) == 1 and bool(values) and values[0] in (0.0, 1.0)
    mean = sum(values) / len(values) if values else 0.0
    return Record(
        task=task,
        doc_id=doc_id,
        doc_hash=doc_hash({"id": sample_id, "input": question, "target": first.target}),
        prompt_hash=digest([json.dumps(question, sort_keys=True, ensure_ascii=False)]),
        target=first.target,
        pred=first.output.completion if first.output is not None else None,
        correct=int(values[0]) if binary else None,
        metrics={METRIC: mean},
        scores={"correct": values, "epoch": [s.epoch for s in epochs]},
        status=Status.ERROR if errors and not values else Status.OK,
        error="; ".join(errors) or None,
    )


def _manifest(name: str, path: Path, log: EvalLog, task: TaskInfo, epochs: int) -> Manifest:
    spec = log.eval
    generation = _dump(spec.model_generate_config)
    params = {**_dump(spec.model_args), **generation}
    provider, _, model = spec.model.partition("/")
    packages = dict(spec.packages or {})
    return Manifest(
        name=name,
        created=_created(spec.created),
        regress_version=__version__,
        model=ModelInfo(ref=model or spec.model, sha256=""),
        backend=RuntimeFingerprint(
            name=f"inspect:{provider}",
            version=packages.pop("inspect_ai", ""),
            params=params,
            libraries=packages,
            # The provider computed the answers; the log does not say on which kernels.
            hardware=HardwarePath(kernels="unknown"),
        ),
        suite_name="inspect",
        tasks={task.name: task},
        environment={
            "source": "inspect",
            "log_file": str(path),
            # Where the model was served, not how: a port is no setting of the model's.
            "base_url": spec.model_base_url or "",
            EVAL_SETTINGS: {
                "plan": _dump(log.plan.steps) if log.plan is not None else [],
                "system_message": generation.get("system_message"),
                "epochs": epochs,
                "task_version": spec.task_version,
                "task_args": _dump(spec.task_args),
            },
        },
        command=f"inspect eval {spec.task_file or spec.task} --model {spec.model}",
    )


def _dump(value: Any) -> Any:
    """A pydantic object (or a list or dict of them) as plain JSON values, unset fields left
    out, so two logs compare by what they set."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, list):
        return [_dump(v) for v in value]
    if isinstance(value, dict):
        return {k: _dump(v) for k, v in value.items()}
    return value


def _created(value: Any) -> str:
    """Inspect's creation time (ISO text) as regress's UTC timestamp; now when unreadable."""
    try:
        when = datetime.fromisoformat(str(value)).astimezone(UTC)
    except ValueError:
        when = datetime.now(UTC)
    return when.isoformat(timespec="seconds")


__all__ = ["METRIC", "read_inspect_log"]
