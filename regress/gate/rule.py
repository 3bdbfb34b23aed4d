"""What a rule of the gate is: a measurement that puts its tests in the gate's families, takes
their corrected values back and says what it contributes to the verdict.

Every rule (the units by kind, the creep guard, the failure classes, the golden sets, the
decision gates) is measured by its own module from one `Context`: the pairing and the policy.
`regress.gate.family` corrects every rule's tests together, one alpha for the gate, and hands
each rule its share; `regress.gate.compare.judge` runs them in `RULES` order. A new rule is a
module with a `measure(context)` that returns a `GateRule`, and a section of the report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol, Self

from regress.core.manifest import Run, TaskInfo
from regress.core.proxy_design import ProxyDesign
from regress.gate.pairing import Pair
from regress.gate.policy import Policy, UnitPolicy
from regress.gate.verdict import Verdict


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
