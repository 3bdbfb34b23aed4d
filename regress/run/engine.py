"""Run tasks through a backend and turn the results into records.

All requests of a run go to the backend in one call per request kind, so the backend can
order them across tasks (shared prefixes, length batches); results are regrouped by example.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from regress.backends import dispatch
from regress.backends.base import Backend, Progress
from regress.core.errors import BadInput
from regress.core.hashes import digest
from regress.core.manifest import TaskInfo
from regress.core.records import Record, Status
from regress.core.requests import (
    AnyResult,
    FailedResult,
    GenerateRequest,
    GenerateResult,
    LoglikelihoodResult,
    Request,
    request_hash,
)
from regress.run.conversation import conversation_outcome, converse
from regress.run.failures import FailureClass, Generation, classify, failure_summary
from regress.run.generation import GenerationSettings, read_answer
from regress.run.passk import majority, repeat_aggregate, sample_metrics
from regress.tasks.base import DataSource, Example, Scored, Task, doc_hash
from regress.tasks.catalog import scoring_hash
from regress.tasks.conversation import ConversationTask
from regress.tasks.open_answers import JUDGED


@dataclass(frozen=True)
class TaskSpec:
    """A task and what to evaluate of it."""

    task: Task
    num_fewshot: int | None = None
    """None: the task's default."""
    limit: int | float | None = None
    """First n documents, or a fraction of them (0 < x < 1: the first ceil(x * n), as lm-eval
    counts; the run records the whole number it came to)."""
    doc_ids: tuple[int, ...] | None = None
    """An explicit subset (a suite's `docs:`), applied after `limit`."""
    generation: GenerationSettings = field(default_factory=GenerationSettings)
    """Sampling overrides, repeats and thinking for a generate_until task."""


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

    def bounds(self, total: int) -> tuple[int, int]:
        """The half-open range of a suite's `total` examples this shard runs."""
        return total * self.index // self.count, total * (self.index + 1) // self.count

    def keep(self, prepared: Prepared) -> Prepared:
        """This shard's share of every task's rendered examples, in suite order."""
        lo, hi = self.bounds(sum(len(examples) for _, examples in prepared))
        kept, offset = [], 0
        for spec, examples in prepared:
            kept.append((spec, examples[max(lo - offset, 0) : max(hi - offset, 0)]))
            offset += len(examples)
        return kept


Prepared = list[tuple[TaskSpec, list[Example]]]
"""Every task's rendered examples, in suite order (`prepare`)."""


def prepare(specs: Sequence[TaskSpec], source: DataSource, shard: Shard | None = None) -> Prepared:
    """Load and render every task's examples (no model needed), keeping one shard's share.

    Shards are contiguous blocks of the suite in task order, so examples that share a
    few-shot prefix mostly land in the same shard.
    """
    prepared = []
    for spec in specs:
        task = spec.task
        if isinstance(task, ConversationTask) and task.judged and spec.generation.repeats > 1:
            # The judge grades one reply per turn; samples of a turn would need a rule of their own.
            raise BadInput(f"{task.name}: a conversation set with judged turns cannot be repeated")
        if isinstance(spec.limit, float):
            examples = spec.task.examples(source, spec.num_fewshot)
            count = math.ceil(len(examples) * spec.limit)
            spec = replace(spec, limit=count)
            examples = examples[:count]
        else:
            examples = spec.task.examples(source, spec.num_fewshot, spec.limit)
        if spec.doc_ids is not None:
            wanted = set(spec.doc_ids)
            examples = [e for e in examples if e.doc_id in wanted]
        prepared.append((spec, examples))
    return prepared if shard is None else shard.keep(prepared)


def evaluate(
    specs: Sequence[TaskSpec],
    backend: Backend,
    source: DataSource,
    progress: Callable[[int, int, int], None] | None = None,
    run: Callable[[Sequence[Request], Progress | None], list[AnyResult]] | None = None,
    shard: Shard | None = None,
    prepared: Prepared | None = None,
) -> list[TaskRun]:
    """Evaluate the tasks of `specs` on `backend`.

    `progress(done, total, n_examples)` counts requests; the examples total lets a progress
    bar show examples/s.

    `run` replaces the plain backend call (the result cache wraps it). `prepared` is
    `prepare(specs, source, shard)` when the caller has it already.
    """
    if prepared is None:
        prepared = prepare(specs, source, shard)
    sent = [[_sent(spec, e) for e in examples] for spec, examples in prepared]
    requests = [r for per_task in sent for rs in per_task for r in rs]
    n_examples = sum(len(examples) for _, examples in prepared)
    done = 0

    def tick(n: int) -> None:
        nonlocal done
        done += n
        if progress:
            progress(done, len(requests), n_examples)

    if progress:
        progress(0, len(requests), n_examples)
    send = run or (lambda reqs, p: dispatch(backend, reqs, p))
    # Every prompt known in advance goes in one call; conversations follow, turn by turn.
    talks = [isinstance(spec.task, ConversationTask) for spec, _ in prepared]
    known = [
        r for t, per_task in zip(talks, sent, strict=True) if not t for rs in per_task for r in rs
    ]
    answers = iter(send(known, tick) if known else [])
    conversations = [
        (spec.task, e, spec.generation)
        for (spec, examples), t in zip(prepared, talks, strict=True)
        if t
        for e in examples
    ]
    said = iter(converse(conversations, lambda reqs: send(reqs, tick), tick))  # type: ignore[arg-type]
    counter = getattr(backend, "count_tokens", None)
    runs = []
    for (spec, examples), per_task, t in zip(prepared, sent, talks, strict=True):
        if t:
            per_example = [next(said) for _ in examples]
        else:
            per_example = [[next(answers) for _ in rs] for rs in per_task]
        runs.append(_task_run(spec, examples, per_example, counter))
    return runs


def _generates(example: Example) -> bool:
    """Whether every request of the example generates (a golden set mixes in choice items)."""
    return all(isinstance(r, GenerateRequest) for r in example.requests)


def _sent(spec: TaskSpec, example: Example) -> tuple[Request, ...]:
    """What goes to the backend for one example: a generation's requests with the run's
    overrides, repeated (all of sample 0, then all of sample 1, ...)."""
    if not _generates(example):
        return example.requests
    per_request = [spec.generation.samples(r) for r in example.requests]  # type: ignore[arg-type]
    return tuple(samples[j] for j in range(spec.generation.repeats) for samples in per_request)


def _task_run(
    spec: TaskSpec,
    examples: list[Example],
    results: list[list[AnyResult]],
    counter: Callable[[str], int] | None = None,
) -> TaskRun:
    task = spec.task
    scored: list[Scored | None] = []
    records: list[Record] = []
    generates = task.output_type == "generate_until"
    for example, answers in zip(examples, results, strict=True):
        if isinstance(task, ConversationTask):
            outcome, record = _conversation_record(spec, example, answers, counter)
        elif _generates(example):
            outcome, record = _generation_record(spec, example, answers, counter)
        else:
            outcome, record = _record(task, example, answers)
        scored.append(outcome)
        records.append(record)
    ok = [s for s in scored if s is not None]
    repeated = generates and spec.generation.repeats > 1
    metrics = task.aggregate(ok) if ok and not repeated else {}
    if ok and repeated:
        scored_records = [r for r in records if r.ok]
        outcomes = np.array([r.outcomes for r in scored_records])
        metrics = repeat_aggregate([r.metrics for r in scored_records], outcomes)
    if generates:
        # Only a judge scores a `judged` task: there is no accuracy to split by truncation.
        scored_by_task = not repeated and task.primary_metric != JUDGED
        metrics |= failure_summary(records, task.primary_metric if scored_by_task else None)
    num_fewshot = task.effective_fewshot(spec.num_fewshot)
    dataset_hash, prompt_hash = identity(spec, examples)
    assert not isinstance(spec.limit, float), "prepare() turns a fraction into a count"
    info = TaskInfo(
        name=task.name,
        group=task.group,
        n=len(examples),
        num_fewshot=num_fewshot,
        metric="pass@1" if repeated else task.primary_metric,
        output_type=task.output_type,
        dataset_hash=dataset_hash,
        prompt_hash=prompt_hash,
        limit=spec.limit,
        higher_is_better=True if repeated else task.higher_is_better.get(task.primary_metric, True),
        generation=None
        if spec.generation.is_default or not generates
        else spec.generation.to_dict(),
        scoring_hash=scoring_hash(task),
    )
    return TaskRun(task, info, examples, results, scored, records, metrics)


def identity(spec: TaskSpec, examples: Sequence[Example]) -> tuple[str, str]:
    """A task's (dataset hash, prompt hash) over `examples`, known before any model runs:
    the digests of each example's document and of its requests as sent."""
    return (
        digest([doc_hash(e.doc) for e in examples]),
        digest([_prompt_hash(_sent(spec, e)) for e in examples]),
    )


def _prompt_hash(sent: Sequence[Request]) -> str:
    return digest([request_hash(r) for r in sent])


def _base(
    task: Task, example: Example, answers: list[AnyResult], sent: tuple[Request, ...]
) -> dict[str, Any]:
    """The record fields every kind of example has."""
    tokens = {
        "prompt": sum(getattr(a, "n_context_tokens", 0) for a in answers),
        "completion": sum(
            a.n_tokens for a in answers if isinstance(a, LoglikelihoodResult | GenerateResult)
        ),
    }
    return {
        "task": task.name,
        "doc_id": example.doc_id,
        "doc_hash": doc_hash(example.doc),
        "prompt_hash": _prompt_hash(sent),
        "target": example.target,
        "tokens": tokens,
    }


def _failed(base: dict[str, Any], answers: list[AnyResult]) -> Record | None:
    """The record of an example the backend could not answer, or None."""
    failed = [a for a in answers if isinstance(a, FailedResult)]
    if not failed:
        return None
    return Record(
        **base,
        pred=None,
        correct=None,
        metrics={},
        scores={},
        status=Status(failed[0].status),
        error=failed[0].message,
    )


def _record(task: Task, example: Example, answers: list[AnyResult]) -> tuple[Scored | None, Record]:
    base = _base(task, example, answers, example.requests)
    failed = _failed(base, answers)
    if failed:
        return None, failed
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


def _generation_record(
    spec: TaskSpec,
    example: Example,
    answers: list[AnyResult],
    counter: Callable[[str], int] | None,
) -> tuple[Scored | None, Record]:
    """A generate_until example: each sample read (thinking split off), scored by the task,
    and given a failure class; repeated samples become pass@k and maj@k.

    The record's `scores` keep, per generation, why it ended (`finish`) and its failure
    class (`failure`); with repeats, also each sample's `correct` and `pred`. A sample that
    ran past the reasoning cap counts as wrong: a budget would have cut it off.
    """
    settings, task = spec.generation, spec.task
    base = _base(task, example, answers, _sent(spec, example))
    failed = _failed(base, answers)
    if failed:
        return None, failed
    m = len(example.requests)
    empty = counter("") if counter else 0
    samples: list[Scored] = []
    finishes: list[str] = []
    failures: list[str] = []
    reasoning: int | None = 0
    generated = [a for a in answers if isinstance(a, GenerateResult)]
    assert len(generated) == len(answers)  # a failed request returned above
    for j in range(settings.repeats):
        group = generated[j * m : (j + 1) * m]
        reads = [
            read_answer(a.text, r.until, settings)  # type: ignore[union-attr]
            for a, r in zip(group, example.requests, strict=True)
        ]
        cleaned = [replace(a, text=read.answer) for a, read in zip(group, reads, strict=True)]
        outcome = task.score(example, cleaned)
        classes = []
        for answer, read in zip(group, reads, strict=True):
            assert isinstance(answer, GenerateResult)
            thought = (counter(read.thinking) - empty if counter else None) if read.thinking else 0
            reasoning = None if reasoning is None or thought is None else reasoning + thought
            generation = Generation(read, answer.finish, answer.n_tokens, thought, outcome.pred)
            classes.append(
                classify(generation, settings.reasoning_cap, settings.output_cap, settings.refusals)
            )
            finishes.append(answer.finish)
        failures += [str(c) for c in classes]
        if FailureClass.REASONING_CAP in classes and outcome.correct:
            metrics = {**outcome.metrics, task.primary_metric: 0.0}
            outcome = replace(outcome, correct=0, metrics=metrics)
        samples.append(outcome)
    if reasoning is not None and (settings.think_end_token or reasoning):
        base["tokens"]["reasoning"] = reasoning
    truncated = any(getattr(a, "truncated", False) for a in answers)
    status = Status.TRUNCATED if truncated else Status.OK
    extra = {"finish": finishes, "failure": failures}
    if settings.repeats == 1:
        [outcome] = samples
        record = Record(
            **base,
            pred=outcome.pred,
            correct=outcome.correct,
            metrics=outcome.metrics,
            scores={**outcome.scores, **extra},
            status=status,
        )
        return outcome, record
    correct = [int(s.correct or 0) for s in samples]
    preds = [_hashable(s.pred) for s in samples]
    voted = majority(preds)
    voted_right = bool(correct[preds.index(voted)])
    metrics = sample_metrics(correct, voted_right)
    outcome = Scored(pred=voted, correct=None, metrics=metrics)
    record = Record(
        **base,
        pred=voted,
        correct=None,
        metrics=metrics,
        scores={**extra, "correct": correct, "pred": [s.pred for s in samples]},
        status=status,
    )
    return outcome, record


def _conversation_record(
    spec: TaskSpec,
    example: Example,
    answers: list[AnyResult],
    counter: Callable[[str], int] | None,
) -> tuple[Scored | None, Record]:
    """A conversation: its turns judged per sample (`regress.run.conversation`)."""
    base = _base(spec.task, example, answers, _sent(spec, example))
    failed = _failed(base, answers)
    if failed:
        return None, failed
    task = spec.task
    assert isinstance(task, ConversationTask)
    said = conversation_outcome(task, example, answers, spec.generation, counter)
    truncated = any(getattr(a, "truncated", False) for a in answers)
    record = Record(
        **base,
        pred=said.pred,
        correct=said.correct,
        metrics=said.metrics,
        scores=said.scores,
        status=Status.TRUNCATED if truncated else Status.OK,
    )
    return said.scored, record


def _hashable(pred: Any) -> Any:
    """A prediction as a vote: lists (several extracted answers) become tuples."""
    return tuple(pred) if isinstance(pred, list) else pred
