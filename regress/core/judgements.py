"""What a judge decided: each example's judgement in both orders, and the judge's work.

The types judging reads (regress.gate.judged, regress.gate.judge_audit), apart from how a
judge is run (regress.run.judge), so judging needs nothing from the run.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Mode(StrEnum):
    """What a judge is asked."""

    PAIRWISE = "pairwise"
    SINGLE = "single"
    RUBRIC = "rubric"


class Outcome(StrEnum):
    """One example's judged outcome, from the candidate's side."""

    WIN = "win"
    LOSS = "loss"
    TIE = "tie"
    JUDGE_ERROR = "judge_error"


def judge_id(identity: Mapping[str, Any]) -> str:
    """A judge's short id: the first 16 hex digits of its identity's sha256."""
    text = json.dumps(identity, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Judgement:
    """One example judged in both orders: a line of the judgements file (docs/formats.md)."""

    task: str
    doc_id: int
    unit: str
    judge: str
    """The judge's id (`judge_id`)."""
    question: str
    reference: str | None
    baseline: str
    candidate: str
    verdicts: tuple[str | None, str | None]
    """Each order's verdict as the side it prefers (baseline, candidate or tie; None: no
    verdict); the first order shows the baseline's answer as A."""
    replies: tuple[str, str]
    """The judge's replies (log-prob reading: each verdict's log-prob), in the same order."""
    outcome: Outcome
    consistent: bool | None
    """Whether both orders named the same side; None when the judge was not asked or erred."""
    mode: str = "pairwise"
    turn: int | None = None
    """A conversation turn judged on its own (1-based), None for a whole example."""
    min_score: float | None = None
    """That turn's passing score: each side's turn passed when its score reached it."""

    def to_dict(self) -> dict[str, Any]:
        turn = {"turn": self.turn, "min": self.min_score} if self.turn is not None else {}
        return {
            "task": self.task,
            "doc_id": self.doc_id,
            **turn,
            "unit": self.unit,
            "mode": self.mode,
            "judge": self.judge,
            "question": self.question,
            "reference": self.reference,
            "baseline": self.baseline,
            "candidate": self.candidate,
            "verdicts": list(self.verdicts),
            "replies": list(self.replies),
            "outcome": str(self.outcome),
            "consistent": self.consistent,
        }


@dataclass(frozen=True)
class Judged:
    """A judge's work: its judgements, its identity and what it cost."""

    mode: Mode
    """Pairwise (which answer is better), or single and rubric (each answer scored)."""
    judgements: tuple[Judgement, ...]
    identity: Mapping[str, Any]
    calls: int
    """Distinct requests sent to the judge model (cached ones included)."""
    tokens: Mapping[str, int]
    """`prompt` and `completion` tokens the judge's requests took."""
    cached: int = 0
    computed: int = 0
    rejected: int = 0
    """Cached verdict rows refused (corrupt, or failing their digest) and asked again: the
    cache folder was damaged or edited, which the check's reports say."""


def outcome_of(first: str | None, second: str | None) -> tuple[Outcome, bool | None]:
    """The example's outcome and whether the orders agreed, from the side each preferred."""
    if first is None or second is None:
        return Outcome.JUDGE_ERROR, None
    consistent = first == second
    if consistent and first == "candidate":
        return Outcome.WIN, True
    if consistent and first == "baseline":
        return Outcome.LOSS, True
    return Outcome.TIE, consistent
