"""The golden-set rules of the gate, applied beside the statistical test of each unit.

A golden set (regress.tasks.golden) is the short list of prompts a product cannot get wrong.
Its task is also an ordinary unit (McNemar and the margin test, as any other), but two rules
need no statistics and fail the gate on their own:

- **must-pass**: any item flagged `must_pass` that the baseline passed and the candidate
  failed (a failed run of the item counts as failing) is named in the report and fails the
  gate, however well everything else went;
- **relative drop** (seed 002's rule): the candidate's pass rate over the whole set may drop
  by at most `max_relative_drop` (policy `golden: {max_relative_drop: 0.05}`) of the
  baseline's: (baseline - candidate) / baseline > 0.05 fails.

A task is a golden set when its records carry the `must_pass` metric, so the rules read the
stored records alone; item names (and choice texts) come from the golden file when the
caller has it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from regress.core.manifest import Run, TaskInfo
from regress.core.records import Record
from regress.gate.pairing import Pair

GoldenItems = Mapping[tuple[str, int], Mapping[str, Any]]
"""(task, doc_id) -> the golden file's item, to name it in reports."""


@dataclass(frozen=True)
class GoldenItem:
    """A must-pass item the candidate fails."""

    task: str
    doc_id: int
    name: str
    """The item's `id` in the golden file (`doc N` when the file was not given)."""
    target: Any
    baseline_pred: Any
    candidate_pred: Any
    candidate_status: str


@dataclass(frozen=True)
class GoldenResult:
    """One golden set's verdict under the two rules."""

    task: str
    n: int
    """Items paired between baseline and candidate."""
    must_pass: int
    """Of those, items flagged must_pass."""
    baseline_rate: float
    candidate_rate: float
    relative_drop: float
    """(baseline_rate - candidate_rate) / baseline_rate; 0 when the baseline passed none."""
    max_relative_drop: float
    regressed: tuple[GoldenItem, ...]
    """Must-pass items the baseline passed and the candidate fails: each fails the gate."""
    still_failing: tuple[GoldenItem, ...]
    """Must-pass items both fail: reported, not a regression of this candidate."""
    failed: bool
    reason: str


def is_golden(records: list[Record]) -> bool:
    """Whether a task's records come from a golden set."""
    return any("must_pass" in r.metrics for r in records)


def _shown(answer: Any, item: Mapping[str, Any]) -> Any:
    """A choice index as its text, when the item is known."""
    choices = item.get("choices")
    if choices and isinstance(answer, int) and 0 <= answer < len(choices):
        return choices[answer]
    return answer


def judge_golden(
    baseline: Run,
    tasks: Sequence[TaskInfo],
    paired: Mapping[str, list[Pair]],
    max_relative_drop: float,
    items: GoldenItems | None = None,
) -> tuple[GoldenResult, ...]:
    """Both rules for every golden set among the paired `tasks`, in task order."""
    items = items or {}
    results = []
    for info in sorted(tasks, key=lambda t: t.name):
        if not is_golden(baseline.records.get(info.name, [])):
            continue
        pairs = paired[info.name]
        regressed, still = [], []
        for base, cand in pairs:
            if not base.metrics.get("must_pass") or cand.right:
                continue
            source = items.get((info.name, base.doc_id), {})
            item = GoldenItem(
                task=info.name,
                doc_id=base.doc_id,
                name=str(source.get("id", f"doc {base.doc_id}")),
                target=_shown(base.target, source),
                baseline_pred=_shown(base.pred, source),
                candidate_pred=_shown(cand.pred, source),
                candidate_status=str(cand.status),
            )
            (regressed if base.right else still).append(item)
        n = len(pairs)
        before = sum(b.right for b, _ in pairs) / n if n else 0.0
        after = sum(c.right for _, c in pairs) / n if n else 0.0
        drop = (before - after) / before if before else 0.0
        reasons = []
        if regressed:
            listed = ", ".join(item.name for item in regressed[:10])
            reasons.append(f"{len(regressed)} must-pass item(s) regressed: {listed}")
        if drop > max_relative_drop:
            reasons.append(
                f"pass rate fell {before:.1%} -> {after:.1%}, {drop:.1%} of itself "
                f"(> {max_relative_drop:.0%})"
            )
        reason = "; ".join(reasons) or (
            f"no must-pass item regressed; pass rate {before:.1%} -> {after:.1%}"
            f" (relative drop {max(drop, 0.0):.1%} <= {max_relative_drop:.0%})"
        )
        results.append(
            GoldenResult(
                task=info.name,
                n=n,
                must_pass=sum(bool(b.metrics.get("must_pass")) for b, _ in pairs),
                baseline_rate=before,
                candidate_rate=after,
                relative_drop=drop,
                max_relative_drop=max_relative_drop,
                regressed=tuple(regressed),
                still_failing=tuple(still),
                failed=bool(reasons),
                reason=reason,
            )
        )
    return tuple(results)
