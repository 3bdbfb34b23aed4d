"""How a run holds a conversation: turn by turn, each turn's prompt holding the replies before it.

A conversation's turn t can only be asked once turn t - 1 is answered, so conversations run in
rounds: round t sends turn t of every conversation (and of every repeated sample of it, each
its own trajectory with seed + j) in one batch, through the same cached backend call as any
request. A turn's request carries the whole history in its messages, so its cache key and
result depend on every earlier reply. A turn the backend fails stops that trajectory: the
failure stands for its later turns, and the conversation becomes a failed record, never a
wrong answer.

A turn that fails its check after an earlier checked turn failed is `propagated` rather than
`answered` or `no_answer`: the failure may be the earlier one carried forward, not a fresh one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from regress.core.requests import AnyResult, FailedResult, GenerateResult, Request
from regress.run.failures import FailureClass, Generation, classify
from regress.run.generation import GenerationSettings, read_answer
from regress.run.passk import pass_at_k, pass_hat_k
from regress.tasks.base import Example, Scored
from regress.tasks.conversation import ConversationTask

Send = Callable[[Sequence[Request]], list[AnyResult]]
"""Sends one batch of requests (through the cache) and returns their results in order."""


def converse(
    work: Sequence[tuple[ConversationTask, Example, GenerationSettings]],
    send: Send,
    skipped: Callable[[int], None] | None = None,
) -> list[list[AnyResult]]:
    """Every conversation's results: its turns for sample 0, then for sample 1, ...

    `skipped(n)` is told of turns never sent because their trajectory failed earlier.
    """
    trajectories = [(i, j) for i, (_, _, s) in enumerate(work) for j in range(s.repeats)]
    results: dict[tuple[int, int], list[AnyResult]] = {t: [] for t in trajectories}
    rounds = max((len(example.requests) for _, example, _ in work), default=0)
    for turn in range(rounds):
        batch, owners = [], []
        for i, j in trajectories:
            task, example, settings = work[i]
            done = results[i, j]
            if turn >= len(example.requests):
                continue
            if done and isinstance(done[-1], FailedResult):
                done.append(done[-1])
                if skipped:
                    skipped(1)
                continue
            replies = [_history_text(r, example, k, settings) for k, r in enumerate(done)]
            request = settings.samples(task.turn_request(example, turn, replies))[j]
            batch.append(request)
            owners.append((i, j))
        if batch:
            for owner, answer in zip(owners, send(batch), strict=True):
                results[owner].append(answer)
    return [
        [answer for j in range(settings.repeats) for answer in results[i, j]]
        for i, (_, _, settings) in enumerate(work)
    ]


def _history_text(
    result: AnyResult, example: Example, turn: int, settings: GenerationSettings
) -> str:
    """A reply as the next turn sees it: the answer, thinking removed."""
    assert isinstance(result, GenerateResult)
    until = example.requests[turn].until  # type: ignore[union-attr]
    return read_answer(result.text, until, settings).answer


@dataclass(frozen=True)
class ConversationOutcome:
    """A conversation's record fields, from all its samples."""

    scored: Scored
    pred: Any
    correct: int | None
    metrics: dict[str, float]
    scores: dict[str, list[Any]]


def conversation_outcome(
    task: ConversationTask,
    example: Example,
    answers: Sequence[AnyResult],
    settings: GenerationSettings,
    count: Callable[[str], int] | None,
) -> ConversationOutcome:
    """Each sample's turns read, judged and classified; with repeats, pass@k and pass^k of
    the conversation (every checked turn right) over the samples."""
    m = len(example.requests)
    samples: list[Scored] = []
    finishes: list[str] = []
    failures: list[str] = []
    for j in range(settings.repeats):
        group = [a for a in answers[j * m : (j + 1) * m] if isinstance(a, GenerateResult)]
        reads = [
            read_answer(a.text, r.until, settings)  # type: ignore[union-attr]
            for a, r in zip(group, example.requests, strict=True)
        ]
        cleaned = [replace(a, text=read.answer) for a, read in zip(group, reads, strict=True)]
        outcome = task.score(example, cleaned)
        classes = []
        for answer, read in zip(group, reads, strict=True):
            thought = (count(read.thinking) - count("") if count else None) if read.thinking else 0
            generation = Generation(read, answer.finish, answer.n_tokens, thought, read.answer)
            classes.append(
                classify(generation, settings.reasoning_cap, settings.output_cap, settings.refusals)
            )
            finishes.append(answer.finish)
        failures += [str(c) for c in propagated(classes, outcome.scores["turn_pass"])]
        samples.append(outcome)
    if settings.repeats == 1:
        [outcome] = samples
        scores = {**outcome.scores, "finish": finishes, "failure": failures}
        return ConversationOutcome(outcome, outcome.pred, outcome.correct, outcome.metrics, scores)
    correct = [int(s.correct or 0) for s in samples]
    n, c = len(correct), sum(correct)
    metrics = {f"pass@{k}": pass_at_k(n, c, k) for k in range(1, n + 1)}
    metrics |= {f"pass^{k}": pass_hat_k(n, c, k) for k in range(1, n + 1)}
    metrics["turn_pass"] = sum(s.metrics["turn_pass"] for s in samples) / n
    scores = {
        "correct": correct,
        "pred": [s.pred for s in samples],
        "turn_pass": [s.scores["turn_pass"] for s in samples],
        "finish": finishes,
        "failure": failures,
    }
    return ConversationOutcome(Scored(None, None, metrics), None, None, metrics, scores)


def propagated(classes: Sequence[FailureClass], passed: Sequence[int | None]) -> list[FailureClass]:
    """Turn classes with every failed check after the first failed one marked `propagated`
    (where the generation itself ended normally: answered or no answer)."""
    out, failed_before = [], False
    for cls, ok in zip(classes, passed, strict=True):
        content = cls in (FailureClass.ANSWERED, FailureClass.NO_ANSWER)
        out.append(FailureClass.PROPAGATED if ok == 0 and failed_before and content else cls)
        failed_before = failed_before or ok == 0
    return out
