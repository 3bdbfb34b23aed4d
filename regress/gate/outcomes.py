"""What a unit pairs, example by example: its kind, the metric of each task, each outcome.

A failed example (status error, timeout or refused) is wrong: its outcome is 0 on the side
that failed, so a candidate failure where the baseline was right counts as a regression
exactly as a wrong answer does (regress.gate.units).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

import numpy as np

from regress.core.errors import BadInput
from regress.core.manifest import TaskInfo
from regress.core.records import Record
from regress.gate.policy import UnitPolicy

ROLLING = "loglikelihood_rolling"


class UnitKind(StrEnum):
    """What a unit pairs: 0/1 outcomes, scores in [0, 1], or per-document log-likelihoods."""

    ACCURACY = "accuracy"
    SCORE = "score"
    PERPLEXITY = "perplexity"


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


def metric_of(task: TaskInfo, unit_policy: UnitPolicy, kind: UnitKind) -> str | None:
    """The metric a task of the unit pairs on; None means the record's 0/1 `correct`."""
    override = unit_policy.metric
    if kind is UnitKind.SCORE:
        return override or task.metric
    return None if override in (None, task.metric) else override


def gold_probability(record: Record) -> float:
    """The probability the record's model put on the gold choice among the choices: the
    softmax of its per-choice log-likelihoods, summed over gold choices (`p_gold`). A failed
    example puts none on it, as it is wrong."""
    if not record.ok:
        return 0.0
    logliks = record.scores.get("loglik")
    gold = record.target if isinstance(record.target, list) else [record.target]
    if not logliks or not all(isinstance(g, int) and 0 <= g < len(logliks) for g in gold):
        raise BadInput(
            f"task {record.task} doc {record.doc_id}: p_gold needs a multiple-choice record "
            "(per-choice log-likelihoods and the gold choice's index); remove `estimand: p_gold`"
        )
    values = np.asarray(logliks, dtype=float)
    weights = np.exp(values - values.max())
    return float(weights[gold].sum() / weights.sum())


def outcome_value(record: Record, metric: str | None, binary: bool) -> float:
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
