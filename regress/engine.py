"""Run tasks through a backend and turn the results into records.

All requests of a run go to the backend in one call per request kind, so the backend can
order them across tasks (shared prefixes, length batches); results are regrouped by example.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from regress.backends import dispatch
from regress.backends.base import Backend, Progress
from regress.errors import BadInput
from regress.manifest import TaskInfo
from regress.records import Record, Status
from regress.requests import (
    AnyResult,
    FailedResult,
    GenerateResult,
    LoglikelihoodResult,
    Request,
    request_hash,
)
from regress.tasks.base import DataSource, Example, Scored, Task, doc_hash


@dataclass(frozen=True)
class TaskSpec:
    """A task and what to evaluate of it."""

    task: Task
    num_fewshot: int | None = None
    """None: the task's default."""
    limit: int | None = None
    """First n documents."""
    doc_ids: tuple[int, ...] | None = None
    """An explicit subset (a suite's `docs:`), applied after `limit`."""


@dataclass(frozen=True)
class TaskRun:
    """One task's examples, raw results, records and aggregate metrics."""

    task: Task
    info: TaskInfo
    examples: list[Example]
    results: list[list[AnyResult]]
    scored: list[Scored | None]
    records: list[Record]
    metrics: dict[str, float]


def digest(parts: Sequence[str]) -> str:
    """sha256 over an ordered list of hashes: a task-level fingerprint."""
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


@dataclass(frozen=True)
class Shard:
    """Shard `index` (0-based) of `count`: a contiguous block of the suite's examples."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        """`i/n` with 0 <= i < n."""
        try:
            index, count = (int(x) for x in text.split("/"))
        except ValueError:
            raise BadInput(f"--shard: expected i/n such as 0/4, got {text!r}") from None
        if not 0 <= index < count:
            raise BadInput(f"--shard {text}: need 0 <= i < n")
        return cls(index, count)


def prepare(
    specs: Sequence[TaskSpec], source: DataSource, shard: Shard | None = None
) -> list[tuple[TaskSpec, list[Example]]]:
    """Load and render every task's examples (no model needed), keeping one shard's share.

    Shards are contiguous blocks of the suite in task order, so examples that share a
    few-shot prefix mostly land in the same shard.
    """
    prepared = []
    for spec in specs:
        examples = spec.task.examples(source, spec.num_fewshot, spec.limit)
        if spec.doc_ids is not None:
            wanted = set(spec.doc_ids)
            examples = [e for e in examples if e.doc_id in wanted]
        prepared.append((spec, examples))
    if shard is None:
        return prepared
    total = sum(len(examples) for _, examples in prepared)
    lo, hi = total * shard.index // shard.count, total * (shard.index + 1) // shard.count
    kept, offset = [], 0
    for spec, examples in prepared:
        kept.append((spec, examples[max(lo - offset, 0) : max(hi - offset, 0)]))
        offset += len(examples)
    return kept


def evaluate(
    specs: Sequence[TaskSpec],
    backend: Backend,
    source: DataSource,
    progress: Callable[[int, int, int], None] | None = None,
    run: Callable[[Sequence[Request], Progress | None], list[AnyResult]] | None = None,
    shard: Shard | None = None,
) -> list[TaskRun]:
    """Evaluate the tasks of `specs` on `backend`.

    `progress(done, total, n_examples)` counts requests; the examples total lets a progress
    bar show examples/s.

    `run` replaces the plain backend call (the result cache wraps it).
    """
    prepared = prepare(specs, source, shard)
    requests = [r for _, examples in prepared for e in examples for r in e.requests]
    n_examples = sum(len(examples) for _, examples in prepared)
    done = 0

    def tick(n: int) -> None:
        nonlocal done
        done += n
        if progress:
            progress(done, len(requests), n_examples)

    if progress:
        progress(0, len(requests), n_examples)
    answers = (run or (lambda reqs, p: dispatch(backend, reqs, p)))(requests, tick)
    runs, offset = [], 0
    for spec, examples in prepared:
        per_example = []
        for example in examples:
            per_example.append(answers[offset : offset + len(example.requests)])
            offset += len(example.requests)
        runs.append(_task_run(spec, examples, per_example))
    return runs


def _task_run(spec: TaskSpec, examples: list[Example], results: list[list[AnyResult]]) -> TaskRun:
    task = spec.task
    scored: list[Scored | None] = []
    records: list[Record] = []
    for example, answers in zip(examples, results, strict=True):
        outcome, record = _record(task, example, answers)
        scored.append(outcome)
        records.append(record)
    ok = [s for s in scored if s is not None]
    metrics = task.aggregate(ok) if ok else {}
    num_fewshot = task.effective_fewshot(spec.num_fewshot)
    info = TaskInfo(
        name=task.name,
        group=task.group,
        n=len(examples),
        num_fewshot=num_fewshot,
        metric=task.primary_metric,
        output_type=task.output_type,
        dataset_hash=digest([r.doc_hash for r in records]),
        prompt_hash=digest([r.prompt_hash for r in records]),
        limit=spec.limit,
        higher_is_better=task.higher_is_better.get(task.primary_metric, True),
    )
    return TaskRun(task, info, examples, results, scored, records, metrics)


def _record(task: Task, example: Example, answers: list[AnyResult]) -> tuple[Scored | None, Record]:
    failed = [a for a in answers if isinstance(a, FailedResult)]
    tokens = {
        "prompt": sum(getattr(a, "n_context_tokens", 0) for a in answers),
        "completion": sum(
            a.n_tokens for a in answers if isinstance(a, LoglikelihoodResult | GenerateResult)
        ),
    }
    base: dict[str, Any] = {
        "task": task.name,
        "doc_id": example.doc_id,
        "doc_hash": doc_hash(example.doc),
        "prompt_hash": digest([request_hash(r) for r in example.requests]),
        "target": example.target,
        "tokens": tokens,
    }
    if failed:
        first = failed[0]
        return None, Record(
            **base,
            pred=None,
            correct=None,
            metrics={},
            status=Status(first.status),
            error=first.message,
        )
    outcome = task.score(example, answers)  # type: ignore[arg-type]
    truncated = any(getattr(a, "truncated", False) for a in answers)
    return outcome, Record(
        **base,
        pred=outcome.pred,
        correct=outcome.correct,
        metrics=outcome.metrics,
        scores=outcome.scores,
        status=Status.TRUNCATED if truncated else Status.OK,
    )
