"""The golden-set rules of the gate, applied beside the statistical test of each unit.

A golden set (regress.tasks.golden) is the short list of prompts a product cannot get wrong.
Its task is also an ordinary unit (McNemar and the margin test, as any other), but two rules
need no statistics and fail the gate on their own:

- **must-pass**: any item flagged `must_pass` that the baseline passed and the candidate
  failed (a failed run of the item counts as failing) is named in the report and fails the
  gate, however well everything else went;
- **relative drop** (seed 002's rule): the candidate's pass rate over the whole set may drop
  by at most `max_relative_drop` (policy `golden: {max_relative_drop: 0.05}`) of the
  baseline's. Random flips alone would break a raw "(baseline - candidate) / baseline > 0.05"
  rule often (50 items at 60% with 5% of answers flipping: 15% of runs), so the drop must be
  shown: the exact paired margin test (regress.stats.margin) of an absolute drop beyond
  max_relative_drop x the baseline's rate, its p in the gate's one Holm family.

A task is a golden set when its records carry the `must_pass` metric, so the rules read the
stored records alone; item names (and choice texts) come from the golden file when the
caller has it.

A must-pass item that the baseline gets right by a hair can flip on another CPU with no model
change at all. `fragile_items` names them when a golden baseline is made, and every failed
must-pass item carries its baseline margin, so such an item is fixed before CI fails it for
noise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Self

from regress.core.manifest import Run, TaskInfo
from regress.core.records import Record
from regress.gate.margins import record_margin
from regress.gate.pairing import Pair
from regress.gate.policy import Policy
from regress.gate.rule import Context, Corrected, Family, Test
from regress.gate.verdict import Verdict
from regress.stats import Side, margin_pvalue

GoldenItems = Mapping[tuple[str, int], Mapping[str, Any]]
"""(task, doc_id) -> the golden file's item, to name it in reports."""
FRAGILE_MARGIN = 0.3
"""Log-likelihood margin (nats, top-1 minus top-2 choice) below which a right answer may flip
on another CPU build: about twice the largest per-token log-prob difference measured between
llama.cpp's AVX2 and AVX-512 builds of one version (0.139 nats; such builds changed 1.1-2.2%
of answers, docs/results/noise-floors.md). A margin over choices of several tokens can move
more; this flags the clearest cases."""


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
    baseline_margin: float | None = None
    """How sure the baseline was (log-likelihood margin, nats); None for generated answers.
    Below FRAGILE_MARGIN the item may fail on another machine for noise alone."""


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
    pvalue: float = 1.0
    """One-sided p of H0 "the pass rate fell by at most max_relative_drop of itself"."""
    adjusted_pvalue: float | None = None
    """pvalue after the gate's one family-wise correction."""


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
        regressed: list[GoldenItem] = []
        still: list[GoldenItem] = []
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
                baseline_margin=record_margin(base, info.metric),
            )
            (regressed if base.right else still).append(item)
        n = len(pairs)
        before = sum(b.right for b, _ in pairs) / n if n else 0.0
        after = sum(c.right for _, c in pairs) / n if n else 0.0
        lost = sum(b.right and not c.right for b, c in pairs)
        gained = sum(c.right and not b.right for b, c in pairs)
        pvalue = margin_pvalue(lost, gained, n, max_relative_drop * before, Side.BEYOND)
        result = GoldenResult(
            task=info.name,
            n=n,
            must_pass=sum(bool(b.metrics.get("must_pass")) for b, _ in pairs),
            baseline_rate=before,
            candidate_rate=after,
            relative_drop=(before - after) / before if before else 0.0,
            max_relative_drop=max_relative_drop,
            regressed=tuple(regressed),
            still_failing=tuple(still),
            failed=False,
            reason="",
            pvalue=pvalue if before else 1.0,
        )
        results.append(settle(result, None, 1.0))
    return tuple(results)


def fragile_items(run: Run) -> list[tuple[str, int, float]]:
    """(task, doc_id, margin) of the must-pass items a run gets right by less than
    FRAGILE_MARGIN: they may fail on another machine for noise alone."""
    found = []
    for task, records in sorted(run.records.items()):
        if not is_golden(records):
            continue
        metric = run.manifest.tasks[task].metric
        for record in records:
            margin = record_margin(record, metric)
            must_pass = record.metrics.get("must_pass") and record.right
            if must_pass and margin is not None and margin < FRAGILE_MARGIN:
                found.append((task, record.doc_id, margin))
    return found


def settle(result: GoldenResult, adjusted_pvalue: float | None, alpha: float) -> GoldenResult:
    """The set's verdict once its relative-drop p is corrected with the gate's family
    (`adjusted_pvalue`, None: not tested); a regressed must-pass item fails it regardless."""
    reasons = []
    if result.regressed:
        listed = ", ".join(item.name for item in result.regressed[:10])
        reasons.append(f"{len(result.regressed)} must-pass item(s) regressed: {listed}")
    rates = f"pass rate {result.baseline_rate:.1%} -> {result.candidate_rate:.1%}"
    limit = f"{result.max_relative_drop:.0%} of itself"
    shown = adjusted_pvalue is not None and adjusted_pvalue < alpha
    if shown:
        reasons.append(
            f"{rates}: a drop beyond {limit} is shown (adj. p {adjusted_pvalue:.3g} < alpha "
            f"{alpha})"
        )
    reason = "; ".join(reasons) or (
        f"no must-pass item regressed; {rates}, no drop beyond {limit} shown"
        + (f" (adj. p {adjusted_pvalue:.3g})" if adjusted_pvalue is not None else "")
    )
    return replace(result, failed=bool(reasons), reason=reason, adjusted_pvalue=adjusted_pvalue)


@dataclass(frozen=True)
class GoldenSets:
    """The golden sets' rule: a regressed must-pass item, or a relative drop shown beyond
    `golden.max_relative_drop`, fails the gate."""

    sets: tuple[GoldenResult, ...]

    def tests(self) -> tuple[Test, ...]:
        """Every set's relative-drop test."""
        return tuple(Test(Family.FAIL, g.pvalue) for g in self.sets)

    def repeated(self, at_look: Callable[[float], float]) -> Self:
        """Every set's p-value as its repeated p-value."""
        return replace(self, sets=tuple(replace(g, pvalue=at_look(g.pvalue)) for g in self.sets))

    def settled(
        self, corrected: Sequence[Corrected], policy: Policy, nominal: Callable[[float], float]
    ) -> Self:
        """Each set decided on its corrected relative-drop p (`settle`)."""
        sets = zip(self.sets, corrected, strict=True)
        return replace(self, sets=tuple(settle(g, c.pvalue, policy.alpha) for g, c in sets))

    def verdict(self) -> Verdict | None:
        """REGRESSION when a set failed."""
        return Verdict.REGRESSION if any(g.failed for g in self.sets) else None


def measure(context: Context, items: GoldenItems | None) -> GoldenSets:
    """Both rules for every golden set of the pairing; `items` names their items."""
    return GoldenSets(
        judge_golden(
            context.baseline, context.tasks, context.pairs, context.policy.max_relative_drop, items
        )
    )
