"""The recovery rule: a unit's candidate must keep a share of the baseline's accuracy.

`units: {arc_easy: {max_relative_drop: 0.05}}` asks the candidate to keep at least 95% of the
baseline's accuracy on that unit (recovery = candidate / baseline >= 1 - max_relative_drop),
the threshold quantization CI writes by hand ("compressed >= 95% of base"). It is a rule beside
the unit's absolute margin, in the same family: both must hold for a PASS.

The test is the unit's own exact margin test (regress.stats.margin) with the margin the
recovery allows: recovery >= rho exactly when the paired drop is at most (1 - rho) x the
baseline's accuracy, so the drop is tested against (1 - rho) x the baseline's accuracy on these
examples, shown beyond it (a REGRESSION) or within it (a PASS under `pass_requires: evidence`),
as the golden sets' relative drop is. The recovery's bounds are the drop's bounds on the same
scale, at the levels the family's correction set. Its size at
the margin, with the baseline's accuracy estimated on the same examples, is checked by seeded
simulation in tests/test_recovery.py. Accuracy (0/1) units only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Self

from regress.core.errors import BadInput
from regress.gate.outcomes import UnitKind, metric_of, outcome_value, unit_kind
from regress.gate.policy import Policy
from regress.gate.rule import Context, Corrected, TwoSided
from regress.gate.verdict import Verdict
from regress.stats import PassRequires, Side, drop_bound, margin_pvalue


@dataclass(frozen=True)
class RecoveryResult:
    """A unit's recovery as the gate measured and decided it."""

    unit: str
    n: int
    b: int
    """Examples the baseline got right and the candidate wrong."""
    c: int
    """Examples the candidate got right and the baseline wrong."""
    baseline: float
    candidate: float
    recovery: float | None
    """Candidate accuracy / baseline accuracy; None when the baseline scored nothing."""
    min_recovery: float
    """1 - the unit's max_relative_drop."""
    fail_pvalue: float
    """One-sided p of H0 "recovery >= min_recovery"."""
    pass_pvalue: float
    """One-sided p of H0 "recovery <= min_recovery"."""
    fail_adjusted_pvalue: float | None = None
    pass_adjusted_pvalue: float | None = None
    at_most: float | None = None
    """The recovery is at most this, at `at_most_level` (the failing test's level)."""
    at_most_level: float | None = None
    at_least: float | None = None
    """The recovery is at least this, at `at_least_level` (the PASS test's level)."""
    at_least_level: float | None = None
    verdict: Verdict = Verdict.INCONCLUSIVE
    reason: str = ""


@dataclass(frozen=True)
class Recovery(TwoSided[RecoveryResult]):
    """Every gated unit with a `max_relative_drop`, measured; decided once settled."""

    def settled(
        self, corrected: Sequence[Corrected], policy: Policy, nominal: Callable[[float], float]
    ) -> Self:
        """Each unit decided on its corrected tests, with the bounds that agree."""

        def settle(
            _: int, result: RecoveryResult, failing: Corrected, met: Corrected
        ) -> RecoveryResult:
            high, low = nominal(failing.level), nominal(met.level)
            result = replace(
                result,
                fail_adjusted_pvalue=failing.pvalue,
                pass_adjusted_pvalue=met.pvalue,
                at_most=_bound(result, high, Side.BEYOND),
                at_most_level=high,
                at_least=_bound(result, low, Side.WITHIN),
                at_least_level=low,
            )
            return _decided(result, policy)

        return self.each_settled(corrected, settle)


def measure(context: Context) -> Recovery:
    """The recovery tests of every gated unit whose policy sets `max_relative_drop`."""
    results = []
    for name, members in context.units.items():
        unit_policy = context.unit_policies[name]
        if unit_policy.max_relative_drop is None or not unit_policy.gate:
            continue
        if context.design is not None:
            raise BadInput(
                f"unit {name}: max_relative_drop needs a full baseline; a proxy's examples "
                "estimate its parent suite's accuracy, not a recovery"
            )
        records = {t.name: [base for base, _ in context.pairs[t.name]] for t in members}
        if unit_kind(name, members, records) is not UnitKind.ACCURACY:
            raise BadInput(
                f"unit {name}: max_relative_drop bounds a right/wrong accuracy; a score unit "
                "takes max_drop, a perplexity unit max_relative_increase"
            )
        x, y = [], []
        for task in members:
            metric = metric_of(task, unit_policy, UnitKind.ACCURACY)
            for base, cand in context.pairs[task.name]:
                x.append(outcome_value(base, metric, True))
                y.append(outcome_value(cand, metric, True))
        n = len(x)
        b = sum(p > q for p, q in zip(x, y, strict=True))
        c = sum(q > p for p, q in zip(x, y, strict=True))
        least = 1.0 - unit_policy.max_relative_drop
        baseline = sum(x) / n if n else 0.0
        failing, met = recovery_test(b, c, n, baseline, least)
        results.append(
            RecoveryResult(
                unit=name,
                n=n,
                b=b,
                c=c,
                baseline=baseline,
                candidate=sum(y) / n if n else 0.0,
                recovery=sum(y) / sum(x) if sum(x) else None,
                min_recovery=least,
                fail_pvalue=failing,
                pass_pvalue=met,
            )
        )
    return Recovery(tuple(results))


def recovery_test(b: int, c: int, n: int, baseline: float, least: float) -> tuple[float, float]:
    """One-sided p-values of H0 "recovery >= least" (small: shown below it) and of H0
    "recovery <= least" (small: shown above it), from the paired counts (b, c) of n and the
    baseline's accuracy on them: the exact margin test at the drop the recovery allows."""
    if n == 0 or baseline == 0.0:
        return 1.0, 1.0
    margin = (1.0 - least) * baseline
    return margin_pvalue(b, c, n, margin, Side.BEYOND), margin_pvalue(b, c, n, margin, Side.WITHIN)


def _bound(result: RecoveryResult, level: float, side: Side) -> float | None:
    """The recovery's one-sided bound at `level`: the drop's bound on the recovery's scale
    (BEYOND: the drop is at least D, so the recovery is at most 1 - D / baseline; WITHIN: at
    least). None when the baseline scored nothing."""
    if result.n == 0 or result.baseline == 0.0:
        return None
    drop = drop_bound(result.b, result.c, result.n, level, side)
    return 1.0 - drop / result.baseline


def _decided(result: RecoveryResult, policy: Policy) -> RecoveryResult:
    """A unit's recovery verdict and the one line that says why."""
    shown = _percent(result.recovery)
    least = _percent(result.min_recovery)
    if result.n < policy.min_examples:
        why = f"only {result.n} paired examples (min_examples {policy.min_examples})"
        return replace(result, verdict=Verdict.INCONCLUSIVE, reason=why)
    failing = result.fail_adjusted_pvalue
    # A verdict needs its bound past the limit too: the bounds are the envelope of the
    # margins the exact test rejects, which agrees with them (regress.stats.margin.drop_bound).
    below = result.at_most is None or result.at_most < result.min_recovery
    above = result.at_least is None or result.at_least > result.min_recovery
    if failing is not None and failing < policy.alpha and below:
        at_most = f", at most {_percent(result.at_most)}" if result.at_most is not None else ""
        why = (
            f"recovery {shown}{at_most} < {least} of the baseline's accuracy "
            f"(adj. p {failing:.3g} < alpha {policy.alpha})"
        )
        return replace(result, verdict=Verdict.REGRESSION, reason=why)
    met = result.pass_adjusted_pvalue
    if policy.pass_requires is PassRequires.NO_EVIDENCE_OF_HARM:
        why = f"recovery {shown}: not shown below {least}"
        return replace(result, verdict=Verdict.PASS, reason=why)
    if met is not None and met < policy.alpha and above:
        why = f"recovery {shown}, at least {_percent(result.at_least)}: above {least}"
        return replace(result, verdict=Verdict.PASS, reason=why)
    reach = f", may be as low as {_percent(result.at_least)}" if result.at_least is not None else ""
    why = f"recovery {shown}{reach}: not shown above {least}"
    return replace(result, verdict=Verdict.INCONCLUSIVE, reason=why)


def _percent(value: float | None) -> str:
    return "undefined (the baseline scored nothing)" if value is None else f"{value:.1%}"
