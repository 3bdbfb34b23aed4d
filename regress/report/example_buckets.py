"""Two runs' examples side by side, sorted into the four buckets a developer reads first:
regressed, fixed, still failing, unchanged.

Examples pair on task, document id and document hash, as the gate pairs them, and move as
the gate counts them: an example whose pass rate (its one outcome, or the share of its
samples that were right) fell regressed, one whose rate rose was fixed; of the others, those
never right are still failing and the rest unchanged. A failed example is wrong (as in the
gate), so regressed and fixed are the gate's broke / fixed counts.

Records hold no benchmark text, so an answer is the record's prediction (a choice index, an
extracted string), unless a gate report of the same two model files quoted the texts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from regress.core.manifest import Run
from regress.core.records import Record


class Bucket(StrEnum):
    """Where a paired example went."""

    REGRESSED = "regressed"
    FIXED = "fixed"
    STILL_FAILING = "still failing"
    UNCHANGED = "unchanged"


@dataclass(frozen=True)
class Example:
    """One paired example and both runs' answers."""

    task: str
    doc_id: int
    bucket: Bucket
    baseline_answer: str
    candidate_answer: str
    target: str
    question: str = ""
    """The question's text, when a gate report quoted it."""


@dataclass(frozen=True)
class Buckets:
    """A candidate run's examples against a baseline run's."""

    baseline: str
    candidate: str
    examples: tuple[Example, ...]
    """Every paired example, by task and document id."""
    unpaired: int
    """The candidate's examples with no identical baseline document."""

    def count(self, bucket: Bucket) -> int:
        """Examples in `bucket`."""
        return sum(e.bucket is bucket for e in self.examples)

    def of(self, bucket: Bucket) -> list[Example]:
        """The examples in `bucket`, in task and document order."""
        return [e for e in self.examples if e.bucket is bucket]


def pass_rate(record: Record) -> float:
    """The share of its samples that were right (one sample: 0 or 1); failed: 0."""
    outcomes = record.outcomes
    return sum(outcomes) / len(outcomes)


def answer(record: Record) -> str:
    """What the model answered, as text: its status when it failed, `choice 2` for a
    multiple-choice index, else the prediction (`(empty)` for an empty one)."""
    if not record.ok:
        return f"({record.status})"
    return _text(record.pred)


def _text(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int):
        return f"choice {value}"
    if isinstance(value, str):
        return value or "(empty)"
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def sort_examples(
    baseline: Run, candidate: Run, quoted: Mapping[tuple[str, int], Mapping[str, Any]] = {}
) -> Buckets:
    """Pair `candidate`'s examples with `baseline`'s and bucket them; `quoted` holds a gate
    report's flips by (task, doc_id), whose texts replace the predictions."""
    examples, unpaired = [], 0
    for task in sorted(candidate.records):
        theirs = {r.doc_id: r for r in baseline.records.get(task, ())}
        for record in candidate.records[task]:
            base = theirs.get(record.doc_id)
            if base is None or base.doc_hash != record.doc_hash:
                unpaired += 1
                continue
            examples.append(_example(base, record, quoted.get((task, record.doc_id), {})))
    return Buckets(baseline.manifest.name, candidate.manifest.name, tuple(examples), unpaired)


def _example(base: Record, cand: Record, flip: Mapping[str, Any]) -> Example:
    was, now = pass_rate(base), pass_rate(cand)
    if now < was:
        bucket = Bucket.REGRESSED
    elif now > was:
        bucket = Bucket.FIXED
    else:
        bucket = Bucket.UNCHANGED if now else Bucket.STILL_FAILING
    return Example(
        task=cand.task,
        doc_id=cand.doc_id,
        bucket=bucket,
        baseline_answer=_quoted(flip, "baseline_answer") or answer(base),
        candidate_answer=_quoted(flip, "candidate_answer") or answer(cand),
        target=_quoted(flip, "target_answer") or _text(cand.target),
        question=_quoted(flip, "question"),
    )


def _quoted(flip: Mapping[str, Any], key: str) -> str:
    """A text the gate report quoted; '' when it quoted none (or something else)."""
    value = flip.get(key)
    return value if isinstance(value, str) else ""


def quoted_flips(
    comparisons: Sequence[Mapping[str, Any]], baseline: Run, candidate: Run
) -> dict[tuple[str, int], Mapping[str, Any]]:
    """The flips of the gate reports that compared these two model files, by (task, doc_id)."""
    flips: dict[tuple[str, int], Mapping[str, Any]] = {}
    for comp in comparisons:
        same = (
            comp["baseline"]["sha256"] == baseline.manifest.model.sha256
            and comp["candidate"]["sha256"] == candidate.manifest.model.sha256
        )
        if same:
            for flip in comp.get("flips", ()):
                task, doc = (
                    (flip.get("task"), flip.get("doc_id"))
                    if isinstance(flip, dict)
                    else (None, None)
                )
                if isinstance(task, str) and isinstance(doc, int):
                    flips[(task, doc)] = flip
    return flips
