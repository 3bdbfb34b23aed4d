"""Failure classes of generations, baseline beside candidate, and the gate on their rates.

For every unit whose records carry failure classes (regress.run.failures), each class's rate is
paired document by document: a document's rate is the share of its generations in that
class (an example the backend failed on is all crash). A policy with `max_failure_increase`
gates on them: a class whose rate rose by more than that, significantly (the bootstrap-t
margin test the gate uses for scores), is a REGRESSION. Its p-value joins the gate's one Holm
family with the units and the golden sets (regress.gate.compare.judge), which decides it.
Without the key the rates are reported, not gated.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Self

from regress.core.records import Record
from regress.gate.pairing import Pair
from regress.gate.policy import Policy
from regress.gate.rule import Context, Corrected, Family, Test
from regress.gate.verdict import Verdict
from regress.run.failures import FAILURES, FailureClass
from regress.stats import paired_mean_test


@dataclass(frozen=True)
class FailureRate:
    """One failure class of one unit on both sides."""

    unit: str
    failure: str
    n: int
    """Paired documents."""
    baseline: float
    """Share of the baseline's generations in this class."""
    candidate: float
    increase: float
    """candidate - baseline (document-weighted)."""
    pvalue: float
    """One-sided p of H0 "the rate rose by at most max_failure_increase" (small p: it rose by
    more); 1 when not gated."""
    threshold: float | None
    """The policy's max_failure_increase; None: reported, not gated."""
    regressed: bool
    """Set by the gate once the family is corrected: the adjusted p fell below alpha."""
    adjusted_pvalue: float | None = None
    """pvalue after the gate's one family-wise correction; None when not gated."""


def _rates(record: Record, failure: str) -> float:
    if not record.ok:
        return float(failure == FailureClass.CRASH)
    classes = record.scores.get("failure", [])
    return classes.count(failure) / len(classes) if classes else 0.0


def refusal_share(record: Record) -> float:
    """The share of an example's generations that refused (a failed example: none)."""
    return _rates(record, FailureClass.REFUSAL)


def generates(pairs: Sequence[Pair]) -> bool:
    """Whether these records are generations with failure classes."""
    return any("failure" in base.scores for base, _ in pairs)


def failure_rates(
    unit: str, pairs: Sequence[Pair], threshold: float | None
) -> tuple[FailureRate, ...]:
    """Every failure class seen on either side, with its raw p when gated (none regressed
    until the gate's correction says so)."""
    found = []
    for failure in FAILURES:
        before = [_rates(base, failure) for base, _ in pairs]
        after = [_rates(cand, failure) for _, cand in pairs]
        if not any(before) and not any(after):
            continue
        # Higher is better for the test: one minus the rate.
        test = paired_mean_test(
            [1 - x for x in before], [1 - y for y in after], margin=threshold or 0.0
        )
        increase = -test.delta
        p = test.margin_pvalue if threshold is not None else 1.0
        found.append(
            FailureRate(
                unit=unit,
                failure=str(failure),
                n=len(pairs),
                baseline=sum(before) / len(before),
                candidate=sum(after) / len(after),
                increase=increase,
                pvalue=p,
                threshold=threshold,
                regressed=False,
            )
        )
    return tuple(found)


@dataclass(frozen=True)
class FailureClasses:
    """The failure classes' rule: a gated unit's class rate shown to rise beyond
    `max_failure_increase` fails the gate."""

    rates: tuple[FailureRate, ...]

    def tests(self) -> tuple[Test, ...]:
        """The increase test of every gated rate."""
        return tuple(Test(Family.FAIL, f.pvalue) for f in self.rates if f.threshold is not None)

    def repeated(self, at_look: Callable[[float], float]) -> Self:
        """Every rate's p-value as its repeated p-value."""
        return replace(self, rates=tuple(replace(f, pvalue=at_look(f.pvalue)) for f in self.rates))

    def settled(
        self, corrected: Sequence[Corrected], policy: Policy, nominal: Callable[[float], float]
    ) -> Self:
        """Each gated rate regressed when it rose beyond its threshold, shown at alpha."""
        given = iter(corrected)
        settled = []
        for rate in self.rates:
            if rate.threshold is not None:
                adjusted = next(given).pvalue
                regressed = rate.increase > rate.threshold and adjusted < policy.alpha
                rate = replace(rate, adjusted_pvalue=adjusted, regressed=regressed)
            settled.append(rate)
        return replace(self, rates=tuple(settled))

    def verdict(self) -> Verdict | None:
        """REGRESSION when a rate regressed."""
        return Verdict.REGRESSION if any(f.regressed for f in self.rates) else None


def measure(context: Context) -> FailureClasses:
    """Failure-class rates of the generation units, raw p-values (the gate corrects them)."""
    found: list[FailureRate] = []
    for name, members in context.units.items():
        unit_pairs = [pair for task in members for pair in context.pairs[task.name]]
        if generates(unit_pairs):
            gated = context.unit_policies[name].gate
            threshold = context.policy.max_failure_increase if gated else None
            found += failure_rates(name, unit_pairs, threshold)
    return FailureClasses(tuple(found))
