"""Decision gates: absolute requirements on the candidate, each a one-sided test.

Seed 002 asks for gates such as "pass@1 > 85% on core tasks" and "refusal rate < 2% on benign
prompts". A point estimate against the bound would pass a candidate on luck, so each
requirement is two one-sided tests of the candidate's own rate, like a unit's margin:

- shown failing: H0 "the requirement holds" (pass@1 >= min; rate <= max), rejected when the
  rate is shown on the wrong side of the bound. Its p joins the gate's REGRESSION family.
- shown met: H0 "it does not hold", rejected when the rate is shown on the right side. Its p
  joins the PASS family (`pass_requires: evidence`).

A 0/1 outcome per example is tested exactly (binomial, scipy's `binomtest`); a rate per
example in [0, 1] (pass@1 over repeats, a refusal share of several samples) by the betting
test of a bounded mean (regress.stats.bounded_mean_pvalue), valid under any skew where a
t-test is not, as is `quality`, the candidate's judged score on the grading judge's scale
(seed 002's weighted quality score), bounded by the widest grading scale, 1-10. `ttft_ms`
bounds the median time to first token of the candidate's requests in a bench file: an exact
sign test, the share of requests slower than the bound against one half. A requirement that
cannot be evaluated (its unit is not in the suite, it has no generations to refuse, no
grading judge scored it, no bench file of the candidate was given) is INCONCLUSIVE with the
reason, never a silent PASS.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from scipy import stats

from regress.core.errors import BadInput
from regress.gate.policy import Metric, Requirement
from regress.gate.results import Verdict
from regress.stats import Direction, bounded_mean_interval, bounded_mean_pvalue
from regress.tasks.judge_templates import CHOICES, Mode


@dataclass(frozen=True)
class RequirementResult:
    """A requirement as the gate measured and decided it."""

    requirement: str
    """Its description: `pass_at_1 of core >= 85.0%`."""
    metric: str
    unit: str | None
    bound: float
    n: int
    """Examples the rate is measured on (0: not evaluated)."""
    value: float | None
    """The candidate's rate; None when not evaluated."""
    fail_pvalue: float | None
    """One-sided p of H0 "the requirement holds"; None when not evaluated."""
    pass_pvalue: float | None
    """One-sided p of H0 "it does not hold"; None when not evaluated."""
    verdict: Verdict = Verdict.INCONCLUSIVE
    reason: str = ""
    fail_adjusted_pvalue: float | None = None
    pass_adjusted_pvalue: float | None = None
    ci: tuple[float, float] | None = None
    """95% interval of `value` (uncorrected, for the reader; the verdict comes from the
    corrected tests); None when not evaluated."""


CONFIDENCE = 0.95
"""Level of the interval reported beside each requirement's value."""
GRADES = (
    min(int(CHOICES[mode][0]) for mode in (Mode.SINGLE, Mode.RUBRIC)),
    max(int(CHOICES[mode][-1]) for mode in (Mode.SINGLE, Mode.RUBRIC)),
)
"""The range a judged grade lies in, whichever grading template gave it (1-10): the betting
test needs the range, and a rubric's 1-5 lies inside it. Measured: the wider range costs
almost no power (quality >= 4.0, true mean 4.3 on 1-5 grades, n = 100: shown met in 52% of
runs on 1-10, 48% on 1-5), since the stakes follow the observed spread."""


@dataclass(frozen=True)
class Latency:
    """The candidate's request timings for the `ttft_ms` gate, from a bench file of the same
    model file (`check --bench`)."""

    ttft_ms: tuple[float, ...] = ()
    """Time to first token of each timed request, ms."""
    missing: str = "no bench file of the candidate was given (`check --bench FILE`)"
    """Why there are none, when there are none."""


def measure_latency(requirement: Requirement, latency: Latency) -> RequirementResult:
    """The sign test of `ttft_ms <= max` on the candidate's requests (scipy's `quantile_test`
    of the median): its value is their median TTFT; shown failing when the median is shown
    above the bound, shown met when shown below it."""
    if not latency.ttft_ms:
        return measure(requirement, None, latency.missing)
    times, bound = latency.ttft_ms, requirement.bound
    above = stats.quantile_test(times, q=bound, p=0.5, alternative="greater").pvalue
    below = stats.quantile_test(times, q=bound, p=0.5, alternative="less").pvalue
    ci = stats.quantile_test(times, q=bound, p=0.5).confidence_interval(CONFIDENCE)
    return replace(
        _blank(requirement),
        n=len(times),
        value=float(statistics.median(times)),
        ci=(float(ci.low), float(ci.high)),
        fail_pvalue=float(above),
        pass_pvalue=float(below),
    )


def measure(
    requirement: Requirement, values: Sequence[float] | None, missing: str
) -> RequirementResult:
    """The raw tests of `requirement` on the candidate's per-example `values` (its unit's
    metric, each example's refusal share, or its judged score); None: not evaluable, for the
    reason `missing`. The verdict is settled once the gate has corrected the p-values
    (`settle`)."""
    blank = _blank(requirement)
    if values is None or not values:
        why = missing if values is None else "no candidate example to measure"
        return replace(blank, reason=f"not evaluated: {why}")
    # A judged score is on the judge's scale, never a 0/1 outcome, whatever values it took.
    binary = requirement.metric is not Metric.QUALITY and all(v in (0.0, 1.0) for v in values)
    fail, passed = _tests(values, requirement, binary)
    return replace(
        blank,
        n=len(values),
        value=sum(values) / len(values),
        ci=_interval(values, requirement, binary),
        fail_pvalue=fail,
        pass_pvalue=passed,
    )


def _interval(
    values: Sequence[float], requirement: Requirement, binary: bool
) -> tuple[float, float]:
    """The 95% interval that goes with the tests: exact (Clopper-Pearson) for 0/1 outcomes,
    the betting test's inversion for per-example rates and scores."""
    if binary:
        ci = stats.binomtest(int(sum(values)), len(values)).proportion_ci(CONFIDENCE)
        return float(ci.low), float(ci.high)
    if len(set(values)) == 1:
        return values[0], values[0]
    return bounded_mean_interval(values, CONFIDENCE, *_range(values, requirement))


def _blank(requirement: Requirement) -> RequirementResult:
    """The requirement, not yet measured."""
    return RequirementResult(
        requirement.describe(), str(requirement.metric), requirement.unit, requirement.bound,
        0, None, None, None,
    )  # fmt: skip


def _tests(values: Sequence[float], requirement: Requirement, binary: bool) -> tuple[float, float]:
    """(p shown failing, p shown met) of a rate or score that must be >= its bound
    (at_least) or <= it; `binary`: the values are 0/1 outcomes, tested exactly."""
    bound = requirement.bound
    if binary:
        k, n = int(sum(values)), len(values)
        below = stats.binomtest(k, n, bound, alternative="less").pvalue
        above = stats.binomtest(k, n, bound, alternative="greater").pvalue
    elif len(set(values)) == 1:
        # Constant values show nothing: a grader that gave every answer a 7 says nothing of
        # the mean it would give other answers.
        below = above = 1.0
    else:
        low, high = _range(values, requirement)
        below = bounded_mean_pvalue(values, bound, Direction.BELOW, low, high)
        above = bounded_mean_pvalue(values, bound, Direction.ABOVE, low, high)
    below, above = float(below), float(above)
    return (below, above) if requirement.at_least else (above, below)


def _range(values: Sequence[float], requirement: Requirement) -> tuple[float, float]:
    """The range the per-example values are known to lie in: a judged grade's, else [0, 1]
    (rates); a value outside it is bad input, since the test's guarantee rests on it."""
    low, high = GRADES if requirement.metric is Metric.QUALITY else (0.0, 1.0)
    outside = [v for v in values if not low <= v <= high]
    if outside:
        raise BadInput(
            f"gate {requirement.describe()}: per-example values must lie in [{low:g}, {high:g}] "
            f"to be tested, got {outside[0]!r}"
        )
    return low, high


def settle(
    result: RequirementResult,
    fail_adjusted: float | None,
    pass_adjusted: float | None,
    alpha: float,
    evidence: bool,
) -> RequirementResult:
    """The requirement's verdict from its corrected p-values: REGRESSION when shown failing;
    PASS when shown met (or, without `evidence`, when not shown failing); else INCONCLUSIVE."""
    if result.value is None:
        return result
    ttft = result.metric == Metric.TTFT_MS
    form: Callable[[float], str] = {
        Metric.TTFT_MS: lambda v: f"{v:,.0f} ms",
        Metric.QUALITY: lambda v: f"{v:.2f}",
    }.get(Metric(result.metric), lambda v: f"{v:.1%}")
    value = (
        f"median {form(result.value)} over {result.n:,} requests"
        if ttft
        else f"{form(result.value)} on {result.n:,} examples"
    )
    if result.ci is not None:
        value += f" (95% CI {form(result.ci[0])} to {form(result.ci[1])})"
    if fail_adjusted is not None and fail_adjusted < alpha:
        verdict = Verdict.REGRESSION
        reason = f"{value}: shown failing (adj. p {fail_adjusted:.3g} < alpha {alpha})"
    elif not evidence or (pass_adjusted is not None and pass_adjusted < alpha):
        verdict = Verdict.PASS
        shown = f"shown met (adj. p {pass_adjusted:.3g})" if evidence else "not shown failing"
        reason = f"{value}: {shown}"
    else:
        verdict = Verdict.INCONCLUSIVE
        reason = (
            f"{value}: neither shown met nor failing (adj. p {pass_adjusted:.3g} and "
            f"{fail_adjusted:.3g}, alpha {alpha})"
        )
    return replace(
        result,
        verdict=verdict,
        reason=reason,
        fail_adjusted_pvalue=fail_adjusted,
        pass_adjusted_pvalue=pass_adjusted,
    )
