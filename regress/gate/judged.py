"""A judged unit: the judge's verdicts turned into the paired outcomes every other unit tests.

Pairwise, each judged example becomes a pair of 0/1 outcomes: a loss is (baseline 1,
candidate 0), a win (0, 1), a tie (0, 0). McNemar's test on the discordant pairs is then
exactly the sign test of wins against losses, the margin rule reads Δ = (wins - losses) / n
as it reads an accuracy change, and the unit joins the gate's one Holm family like any other.

Graded (a single 1-10 or rubric 1-5 template), each side's score, scaled to [0, 1] ((s - 1) /
(top - 1)), becomes the example's value of the task's primary metric with `correct` unset: a
score unit, tested by the gate's paired bootstrap-t against max_drop on that scale.

A conversation with judged turns is graded turn by turn: each side's judged turn passes when
its score reaches the turn's `min` (and its code checks passed), and the conversation passes
when every checked turn does. Its 0/1 pass is the outcome, tested as any accuracy unit.

Either way a judge error leaves its example out of the test (there is no verdict to pair) and
counts as a failure of the unit: above max_error_rate the unit is an ERROR, never a REGRESSION.

What the report adds (`JudgedSummary`): wins, losses, ties and errors; the win rate with ties
as half and its 95% bootstrap interval over examples; the judge's swap consistency; the length
ratio of the candidate's answers to the baseline's, since judges prefer longer answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from regress.core.errors import BadInput
from regress.core.judgements import Judged, Judgement, Outcome, judge_id
from regress.core.manifest import TaskInfo
from regress.core.records import Record
from regress.gate.pairing import Pair
from regress.tasks.judge_templates import CHOICES, Mode
from regress.tasks.open_answers import JUDGED

BOOTSTRAP_RESAMPLES = 2000
_SCORE = {Outcome.WIN: 1.0, Outcome.TIE: 0.5, Outcome.LOSS: 0.0}


@dataclass(frozen=True)
class JudgedSummary:
    """What a judge said about one unit."""

    judge: str
    """The judge's id; `identity` spells it out."""
    identity: Mapping[str, Any]
    mode: str
    """pairwise, single or rubric."""
    wins: int
    losses: int
    ties: int
    judge_errors: int
    win_rate: float | None
    """Wins plus half the ties, over the examples with a verdict."""
    win_rate_ci: tuple[float, float] | None
    """95% percentile bootstrap interval of the win rate, resampling examples."""
    consistency: float | None
    """Share of the pairs the judge was asked about whose two orders named the same side."""
    min_consistency: float
    length_ratio: float | None
    """Mean length (characters) of the candidate's answers over the baseline's."""
    calls: int
    tokens: Mapping[str, int]
    scores: tuple[float, float] | None = None
    """Graded modes: the mean score of the baseline's answers and of the candidate's, on the
    template's scale (1-10 or 1-5)."""
    quality_ci: tuple[float, float] | None = None
    """Graded modes: the 95% bootstrap interval of the candidate's mean score (seed 002's
    weighted quality score, one criterion)."""
    distinct_scores: int | None = None
    """Graded modes: how many different scores the judge gave over every answer it scored."""
    per_turn: bool = False
    """Conversation turns were graded one by one; the unit tests conversation pass."""

    @property
    def decides(self) -> bool:
        """Whether the verdicts carry information: a pairwise judge whose orders agree often
        enough, a grader that gave at least two different scores. A judge that names a
        position, or gives every answer the same score, would pass any candidate."""
        if self.distinct_scores is not None and self.distinct_scores < 2:
            return False
        return self.consistency is None or self.consistency >= self.min_consistency


def outcome_pairs(
    pairs: Sequence[Pair], judgements: Mapping[int, Judgement], metric: str
) -> list[Pair]:
    """A judged task's pairs as outcomes (see the module docstring): 0/1 `correct` when
    pairwise, the scaled score as `metric` when graded; examples the judge erred on are left
    out. Each record keeps its status, so a failed side still counts as a failure of its run."""
    out = []
    for base, cand in pairs:
        judgement = judgements.get(base.doc_id)
        if judgement is None:
            raise BadInput(f"task {base.task} doc {base.doc_id}: paired but not judged")
        outcome = judgement.outcome
        if outcome is Outcome.JUDGE_ERROR:
            continue
        if judgement.mode == Mode.PAIRWISE:
            out.append(
                (
                    replace(base, correct=int(outcome is Outcome.LOSS)),
                    replace(cand, correct=int(outcome is Outcome.WIN)),
                )
            )
            continue
        top = int(CHOICES[Mode(judgement.mode)][-1])
        scaled = [_scaled(v, top) for v in judgement.verdicts]
        out.append(
            (
                replace(base, correct=None, metrics={metric: scaled[0]}),
                replace(cand, correct=None, metrics={metric: scaled[1]}),
            )
        )
    return out


def turn_outcome_pairs(
    pairs: Sequence[Pair], judgements: Mapping[int, Sequence[Judgement]]
) -> list[Pair]:
    """A conversation task's pairs with each side's judged turns decided (see the module
    docstring): `correct` is the conversation's pass and `scores["turn_pass"]` every turn's.
    A conversation with a judge error on any turn is left out, as a judged example is."""
    out = []
    for base, cand in pairs:
        found = judgements.get(base.doc_id)
        if not found:
            raise BadInput(f"task {base.task} doc {base.doc_id}: paired but not judged")
        if any(j.outcome is Outcome.JUDGE_ERROR for j in found):
            continue
        out.append((_turns_decided(base, found, 0), _turns_decided(cand, found, 1)))
    return out


def _turns_decided(record: Record, found: Sequence[Judgement], side: int) -> Record:
    """One side's record with its judged turns passed or failed; a failed run stays failed."""
    if not record.ok:
        return record
    turns = list(record.scores["turn_pass"])
    for j in found:
        score, at = j.verdicts[side], int(j.turn or 0) - 1
        # A judged turn whose code checks failed stays failed whatever the judge says.
        turns[at] = 0 if turns[at] == 0 else int(float(score or 0) >= float(j.min_score or 0))
    passed = int(all(p for p in turns if p is not None))
    return replace(record, correct=passed, scores={**record.scores, "turn_pass": turns})


def candidate_scores(judgements: Sequence[Judgement]) -> list[float]:
    """The candidate's score of each graded example the judge gave a verdict on, on the
    template's scale: a failed answer scores the scale's bottom (1), as it scores 0 in the
    unit's test. Judge errors are left out (they count as the unit's failures)."""
    return [
        float(j.verdicts[1]) if j.verdicts[1] is not None else 1.0
        for j in judgements
        if j.mode != Mode.PAIRWISE and j.outcome is not Outcome.JUDGE_ERROR
    ]


def _scaled(score: str | None, top: int) -> float:
    """A score on [0, 1]; a side that failed (no score) is scored by its status anyway."""
    return (int(score) - 1) / (top - 1) if score is not None else 0.0


def summarize(
    judged: Judged, judgements: Sequence[Judgement], min_consistency: float
) -> JudgedSummary:
    """The unit's judged figures (see JudgedSummary)."""
    counts = {o: sum(j.outcome is o for j in judgements) for o in Outcome}
    scores = np.array([_SCORE[j.outcome] for j in judgements if j.outcome in _SCORE])
    asked = [j.consistent for j in judgements if j.consistent is not None]
    base_chars = [len(j.baseline) for j in judgements]
    cand_chars = [len(j.candidate) for j in judgements]
    # Graded: the examples both of whose answers were scored.
    graded = [
        (int(b), int(c))
        for j in judgements
        if j.mode != Mode.PAIRWISE
        for b, c in [j.verdicts]
        if b is not None and c is not None
    ]
    theirs = np.array([c for _, c in graded], dtype=float)
    return JudgedSummary(
        judge=judge_id(judged.identity),
        identity=judged.identity,
        mode=str(judged.mode),
        wins=counts[Outcome.WIN],
        losses=counts[Outcome.LOSS],
        ties=counts[Outcome.TIE],
        judge_errors=counts[Outcome.JUDGE_ERROR],
        win_rate=float(scores.mean()) if scores.size else None,
        win_rate_ci=_bootstrap(scores),
        consistency=sum(asked) / len(asked) if asked else None,
        min_consistency=min_consistency,
        length_ratio=(
            float(np.mean(cand_chars) / np.mean(base_chars))
            if base_chars and np.mean(base_chars) > 0
            else None
        ),
        calls=judged.calls,
        tokens=dict(judged.tokens),
        scores=((float(np.mean([b for b, _ in graded])), float(theirs.mean())) if graded else None),
        quality_ci=_bootstrap(theirs) if graded else None,
        distinct_scores=len({v for pair in graded for v in pair}) if graded else None,
        per_turn=any(j.turn is not None for j in judgements),
    )


def _bootstrap(scores: np.ndarray) -> tuple[float, float] | None:
    """The percentile interval of the mean over resampled examples (seeded: reproducible)."""
    if scores.size < 2:
        return None
    from scipy.stats import bootstrap  # loaded by a judged gate only

    if np.ptp(scores) == 0:  # every example the same: nothing to resample
        return float(scores[0]), float(scores[0])
    result = bootstrap(
        (scores,),
        np.mean,
        n_resamples=BOOTSTRAP_RESAMPLES,
        method="percentile",
        random_state=np.random.default_rng(0),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def needs_judge(units: Mapping[str, Sequence[TaskInfo]], extra: Sequence[str] = ()) -> set[str]:
    """The units a judge scores: those whose every task only a judge can score (primary
    metric `judged`), and the ones named in `extra` (the policy's `judge.units`)."""
    found = {name for name, tasks in units.items() if all(t.metric == JUDGED for t in tasks)}
    return found | (set(extra) & set(units))


def judged_pairs(
    pairs: Mapping[str, list[Pair]],
    units: Mapping[str, Sequence[TaskInfo]],
    judged: Judged,
    min_consistency: float,
) -> tuple[dict[str, list[Pair]], dict[str, JudgedSummary]]:
    """`pairs` with every judged unit's tasks turned into outcomes, and each judged unit's
    summary."""
    by_task: dict[str, dict[int, list[Judgement]]] = {}
    for j in judged.judgements:
        by_task.setdefault(j.task, {}).setdefault(j.doc_id, []).append(j)
    out = dict(pairs)
    summaries = {}
    for name, tasks in units.items():
        if not any(t.name in by_task for t in tasks):
            continue
        for task in tasks:
            found = by_task.get(task.name, {})
            if any(j.turn is not None for js in found.values() for j in js):
                out[task.name] = turn_outcome_pairs(pairs[task.name], found)
                continue
            whole = {doc_id: js[0] for doc_id, js in found.items()}
            out[task.name] = outcome_pairs(pairs[task.name], whole, task.metric)
        mine = [j for t in tasks for js in by_task.get(t.name, {}).values() for j in js]
        summaries[name] = summarize(judged, mine, min_consistency)
    return out, summaries
