"""What a rule of the gate is: a measurement that puts its tests in the gate's families, takes
their corrected values back and says what it contributes to the verdict.

Every rule (the units by kind, the creep guard, the failure classes, the golden sets, the
decision gates) is measured by its own module from one `Context`: the pairing and the policy.
`regress.gate.family` corrects every rule's tests together, one alpha for the gate, and hands
each rule its share; `regress.gate.compare.judge` runs them in `RULES` order. A new rule is a
module with a `measure(context)` that returns a `GateRule`, and a section of the report.
A rule whose every result is tested both ways (shown failing, shown met) builds on `TwoSided`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar

from regress.core.manifest import Run, TaskInfo
from regress.core.proxy_design import ProxyDesign
from regress.gate.pairing import Pair
from regress.gate.policy import Policy, UnitPolicy
from regress.gate.verdict import Verdict, worst


class Family(StrEnum):
    """The families the gate corrects its tests in (docs/gate.md, "One alpha")."""

    FAIL = "fail"
    """Tests whose rejection fails the gate: alpha bounds the chance of a false REGRESSION."""
    PASS = "pass"
    """Tests a PASS needs (`pass_requires: evidence`), every one: an intersection-union test,
    each at the full alpha, which bounds a false PASS of the gate."""
    CHANGE = "change"
    """The units' no-drop tests, which `no_evidence_of_harm` reads."""


@dataclass(frozen=True)
class Test:
    """One p-value a rule puts in a family."""

    family: Family
    pvalue: float


@dataclass(frozen=True)
class Corrected:
    """A test's corrected p-value, and the level its bound is inverted at."""

    pvalue: float
    level: float


@dataclass(frozen=True)
class Context:
    """What every rule is measured from: one pairing of the two runs, and the policy."""

    baseline: Run
    candidate: Run
    tasks: tuple[TaskInfo, ...]
    """The baseline's tasks that pair, in name order (pooled formats included)."""
    pairs: dict[str, list[Pair]]
    """Per task name: (baseline, candidate) records, judged units' outcomes included."""
    units: dict[str, list[TaskInfo]]
    """The gated units of the paired tasks, by name, with a judge to score those needing one."""
    unit_policies: dict[str, UnitPolicy]
    policy: Policy
    k: int
    """Units the plans share alpha with: every gated unit and creep-guard unit."""
    design: ProxyDesign | None
    """The baseline's proxy design: its units estimate the parent suite's."""
    plans: bool = True
    """Whether units plan the n that would decide them: not at a sequential look, where the
    check states none (a fixed design's n would invite a second test: checks/sequential.py)."""


class GateRule(Protocol):
    """A measured rule: its tests, how it settles on their corrected values, its verdict."""

    def tests(self) -> tuple[Test, ...]:
        """Its p-values, in the order `settled` takes their corrections back."""
        ...

    def repeated(self, at_look: Callable[[float], float]) -> Self:
        """The rule with every p-value made its repeated p-value at a sequential look."""
        ...

    def settled(
        self, corrected: Sequence[Corrected], policy: Policy, nominal: Callable[[float], float]
    ) -> Self:
        """The rule decided on its tests' corrections (`nominal` maps a family level to the
        level a bound is inverted at)."""
        ...

    def verdict(self) -> Verdict | None:
        """What it contributes to the gate's verdict; None when it cannot move it."""
        ...


class TwoSidedResult(Protocol):
    """A dataclass result tested both ways: None p-values when it was not tested."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def fail_pvalue(self) -> float | None:
        """One-sided p of H0 "it holds": small shows it failing."""
        ...

    @property
    def pass_pvalue(self) -> float | None:
        """One-sided p of H0 "it does not hold": small shows it met."""
        ...

    @property
    def verdict(self) -> Verdict:
        """Its verdict once settled."""
        ...


R = TypeVar("R", bound=TwoSidedResult)


@dataclass(frozen=True)
class TwoSided(Generic[R]):
    """A rule of results each tested both ways: shown failing (FAIL) and shown met (PASS).

    The recoveries, the divergences and the decision gates share this shape; each settles its
    results on its own bounds and words (`each_settled`)."""

    results: tuple[R, ...]

    def tests(self) -> tuple[Test, ...]:
        """Each tested result's test of failing and its test of being met (p 1 without one);
        a result without a FAIL p was not tested and puts none in the families."""
        return tuple(
            test
            for r in self.results
            if r.fail_pvalue is not None
            for test in (
                Test(Family.FAIL, r.fail_pvalue),
                Test(Family.PASS, 1.0 if r.pass_pvalue is None else r.pass_pvalue),
            )
        )

    def repeated(self, at_look: Callable[[float], float]) -> Self:
        """Both p-values of every result as repeated p-values."""
        return replace(
            self,
            results=tuple(
                replace(
                    r,
                    fail_pvalue=None if r.fail_pvalue is None else at_look(r.fail_pvalue),
                    pass_pvalue=None if r.pass_pvalue is None else at_look(r.pass_pvalue),
                )
                for r in self.results
            ),
        )

    def each_settled(
        self,
        corrected: Sequence[Corrected],
        settle: Callable[[int, R, Corrected, Corrected], R],
        untested: Callable[[R], R] = lambda result: result,
    ) -> Self:
        """The rule with each tested result settled by `settle` (its place among the results,
        it, its FAIL test's correction and its PASS test's, in `tests` order) and each
        untested one by `untested`."""
        given = iter(corrected)
        return replace(
            self,
            results=tuple(
                untested(r) if r.fail_pvalue is None else settle(i, r, next(given), next(given))
                for i, r in enumerate(self.results)
            ),
        )

    def verdict(self) -> Verdict | None:
        """The worst verdict of a result."""
        return worst([r.verdict for r in self.results])
