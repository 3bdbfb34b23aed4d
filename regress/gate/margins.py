"""How sure the reference model was: the margin between its top two choices.

A multiple-choice record keeps every choice's log-likelihood (`scores.loglik`, and the choice
lengths in `scores.chars` for acc_norm), so its margin is a pure function of the record: the
same bytes always give the same margin, on any machine that reads them. Answers that change
under quantization sit where this margin is small (Q4_0 changed 37% of SmolLM2's least sure
tenth of ARC-Easy, 6% of its seventh: docs/results/proxy-efficiency.md), which is what proxy
subsets stratify on.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence

from regress.core.manifest import Run
from regress.core.proxy_design import cut_bounds
from regress.core.records import Record

NORMALISED_METRICS = frozenset({"acc_norm"})
"""Metrics whose answer is the argmax of log-likelihood per character, not of the sum."""


def choice_margins(logliks: Sequence[float]) -> tuple[float, float]:
    """(log-likelihood margin, probability margin) of one example's choices.

    The first is top-1 minus top-2 log-likelihood (>= 0); the second is the difference of
    their probabilities after normalising over the choices (softmax), in [0, 1].
    """
    if len(logliks) < 2:
        raise ValueError("a margin needs at least two choices")
    first, second = sorted(logliks, reverse=True)[:2]
    top = max(logliks)
    total = sum(math.exp(x - top) for x in logliks)
    return first - second, (math.exp(first - top) - math.exp(second - top)) / total


def record_margin(record: Record, metric: str = "acc") -> float | None:
    """The log-likelihood margin behind the record's answer; None without per-choice scores.

    For acc_norm the margin is taken on log-likelihood per character, the scores that picked
    the answer. A failed example has no margin.
    """
    logliks = record.scores.get("loglik")
    if not record.ok or not logliks or len(logliks) < 2:
        return None
    if metric in NORMALISED_METRICS:
        chars = record.scores.get("chars") or []
        if len(chars) != len(logliks):
            return None
        logliks = [x / max(1, n) for x, n in zip(logliks, chars, strict=True)]
    return choice_margins(logliks)[0]


def margin_order(run: Run, tasks: Sequence[str]) -> list[tuple[float, str, int]]:
    """(margin, task, doc_id) of every example of `tasks`, least sure first.

    Examples without a margin (failed ones) come first with a margin of -inf, ties in
    (task, doc_id) order: a failed reference example is as unsure as it gets.
    """
    keyed = []
    for task in tasks:
        metric = run.manifest.tasks[task].metric
        for record in run.records[task]:
            margin = record_margin(record, metric)
            keyed.append((-math.inf if margin is None else margin, task, record.doc_id))
    return sorted(keyed)


def margin_units(run: Run) -> dict[str, list[str]]:
    """The run's gated units and their tasks' names, in name order (a proxy stratifies each
    unit on its own)."""
    units: dict[str, list[str]] = defaultdict(list)
    for task, info in sorted(run.manifest.tasks.items()):
        units[info.group or task].append(task)
    return dict(sorted(units.items()))


def margin_cuts(run: Run, tasks: list[str], count: int) -> list[list[tuple[float, str, int]]]:
    """The unit's examples ranked by the reference's margin, in `count` equal cuts: (margin,
    task, doc_id) of each, least sure first."""
    ranked = margin_order(run, tasks)
    return [ranked[slice(*cut_bounds(len(ranked), count, k))] for k in range(count)]
