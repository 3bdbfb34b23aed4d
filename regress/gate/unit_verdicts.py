"""A unit's verdict and the one line that says why, from its corrected tests.

The line speaks the unit's own scale: points of accuracy for accuracy and score units, the
relative change of the metric for perplexity units; its bound at the confidence the family's
correction set (regress.gate.family).
"""

from __future__ import annotations

from regress.core.judgements import Outcome
from regress.core.records import Status
from regress.gate.policy import Policy
from regress.gate.results import DropBounds, UnitKind, UnitResult, Verdict
from regress.gate.verdict import rerun_words
from regress.stats import DropTest, PassRequires, Rule, Side, inconclusive, regression


def _failed(unit: UnitResult, policy: Policy) -> str:
    """Why a unit is an ERROR: its failed examples, the judge's failures named apart (a
    judge that fails every reply says nothing of the candidate's answers)."""
    limit = f"(max_error_rate {policy.max_error_rate:.1%})"
    judge = unit.candidate_failures.get(str(Outcome.JUDGE_ERROR), 0)
    if not judge:
        return f"{unit.error_rate:.1%} of the candidate's examples failed {limit}"
    total = unit.n + judge
    own = sum(
        count
        for status, count in unit.candidate_failures.items()
        if status not in (Outcome.JUDGE_ERROR, Status.TRUNCATED)
    )
    if not own:
        return (
            f"the judge failed on {judge / total:.1%} of the examples ({judge} of {total}) "
            f"{limit}: the candidate's answers went unjudged"
        )
    return (
        f"{unit.error_rate:.1%} of the examples failed {limit}: {own} of the candidate's, "
        f"{judge} of the judge's"
    )


def bounds(
    unit: UnitResult, test: DropTest | None, rule_level: float, pass_level: float
) -> DropBounds | None:
    """The one-sided bounds at the levels the unit's tests were held to (see DropBounds)."""
    if test is None or unit.n == 0:
        return None
    return DropBounds(
        at_least=test.bound(rule_level, Side.BEYOND) if unit.rule is Rule.MARGIN else None,
        at_least_level=rule_level,
        at_most=test.bound(pass_level, Side.WITHIN),
        at_most_level=pass_level,
    )


def verdict_of(unit: UnitResult, policy: Policy) -> tuple[Verdict, str]:
    """The unit's verdict and the one line that says why."""
    if unit.error_rate > policy.max_error_rate:
        return Verdict.ERROR, _failed(unit, policy)
    perplexity = unit.kind is UnitKind.PERPLEXITY
    if unit.n == 0 or unit.delta is None or unit.ci is None:
        what = "document scored" if perplexity else "paired example"
        return Verdict.INCONCLUSIVE, f"no {what} on both sides"
    if not perplexity and unit.n < policy.min_examples:
        reason = f"only {unit.n} paired examples (min_examples {policy.min_examples})"
        return Verdict.INCONCLUSIVE, reason
    judged = unit.judged
    if judged is not None and not judged.decides:
        if judged.scores is not None:
            return Verdict.INCONCLUSIVE, (
                f"the judge gave every answer the same score ({judged.scores[0]:g}): it told "
                "no answer from another, so its scores decide nothing"
            )
        return Verdict.INCONCLUSIVE, (
            f"the judge named the same side in both orders on {judged.consistency:.0%} of "
            f"pairs (min_consistency {judged.min_consistency:.0%}): its verdicts decide nothing"
        )
    drop, upper = (unit.delta, unit.ci[1]) if perplexity else (-unit.delta, -unit.ci[0])
    rule_p = _adjusted(unit.pvalue, unit.adjusted_pvalue)
    change_p = _adjusted(unit.change_pvalue, unit.change_adjusted_pvalue)
    regressed = bool(regression(unit.rule, policy.alpha, rule_p, drop, unit.threshold))
    if regressed and _bound_short_of(unit, beyond=True):
        regressed = False  # the envelope of the margins shown (see _bound_short_of)
    if regressed:
        return Verdict.REGRESSION, _regression_reason(unit, drop, rule_p, policy.alpha)
    if policy.pass_requires is PassRequires.EVIDENCE:
        pass_p = _adjusted(or_one(unit.pass_pvalue), unit.pass_adjusted_pvalue)
        if pass_p < policy.alpha and not _bound_short_of(unit, beyond=False):
            return Verdict.PASS, _shown_within(unit)
        return Verdict.INCONCLUSIVE, _not_shown(unit)
    if inconclusive(regressed, policy.alpha, change_p, upper, unit.threshold):
        return Verdict.INCONCLUSIVE, (
            f"worse than the baseline ({_p_text(unit, change_p)} < alpha {policy.alpha}, "
            f"H0: no drop), but the 95% CI reaches a {_noun(unit)} of {_amount(unit, upper)} "
            f"> {_limit(unit)}"
        )
    return Verdict.PASS, _pass_reason(unit, drop, change_p, policy.alpha)


def _bound_short_of(unit: UnitResult, beyond: bool) -> bool:
    """Whether the unit's one-sided bound fails to clear its threshold though the test's p
    did: the exact margin test's p is not monotone in the margin, so it can reject a margin
    that lies past a margin it keeps. The bound is the edge of the margins every one of which
    is rejected (regress.stats.margin.drop_bound), and a verdict asks that too: it rejects a
    subset of what the test rejects, so it keeps the test's size, and it always agrees with
    the bound shown beside it."""
    bounds = unit.bounds
    if bounds is None:
        return False
    if beyond:
        return (
            unit.rule is Rule.MARGIN
            and bounds.at_least is not None
            and (bounds.at_least <= unit.threshold)
        )
    return bounds.at_most >= unit.threshold


def _confidence(level: float, gated: bool) -> str:
    """How sure a one-sided bound is, and whether the family's correction set it (an upper
    bound, which a PASS rests on, never: the PASS is an intersection-union test at alpha)."""
    sure = f"{(1 - level) * 100:.4g}%"
    return f"{sure} one-sided, adjusted" if gated else f"{sure} one-sided"


def _shown_within(unit: UnitResult) -> str:
    bounds = unit.bounds
    assert bounds is not None  # a PASS was tested, so it was bounded
    return (
        f"{_change(unit)}: the {_noun(unit)} is at most {_amount(unit, bounds.at_most)} "
        f"({_confidence(bounds.at_most_level, False)}), within {_limit(unit)}"
    )


def _not_shown(unit: UnitResult) -> str:
    bounds = unit.bounds
    reach = _amount(unit, bounds.at_most) if bounds else "unknown"
    level = f" ({_confidence(bounds.at_most_level, False)})" if bounds else ""
    # A fixed verdict has no legal continuation: rerunning it on a superset tests twice, so
    # the n is what a new, sequential check would need (issue 50).
    needed = f"; {rerun_words(f'{unit.n_to_pass:,}')}" if unit.n_to_pass else ""
    return (
        f"{_change(unit)}: the {_noun(unit)} may be up to {reach}{level}, "
        f"not shown within {_limit(unit)}{needed}"
    )


def or_one(pvalue: float | None) -> float:
    """A PASS test's p, or 1 (no evidence) for a unit that had none."""
    return 1.0 if pvalue is None else pvalue


def _adjusted(raw: float, adjusted: float | None) -> float:
    """The p a verdict uses: adjusted for gated units, the unit's own for ungated ones."""
    return raw if adjusted is None else adjusted


def _regression_reason(unit: UnitResult, drop: float, p: float, alpha: float) -> str:
    shown = f"{_noun(unit)} of {_amount(unit, drop)} > {_limit(unit)}"
    if unit.rule is Rule.MARGIN:
        bounds = unit.bounds
        if bounds is not None and bounds.at_least is not None:
            shown += (
                f": at least {_amount(unit, bounds.at_least)} "
                f"({_confidence(bounds.at_least_level, unit.gated)})"
            )
        return f"{shown}; {_p_text(unit, p)} < alpha {alpha} (H0: within {_limit(unit)})"
    return f"{shown} and {_p_text(unit, p)} < alpha {alpha} (H0: no drop)"


def _pass_reason(unit: UnitResult, drop: float, change_p: float, alpha: float) -> str:
    if change_p < alpha:
        return f"worse than the baseline, but within {_limit(unit)} (95% CI)"
    if drop <= unit.threshold:
        return f"{_change(unit)}, within {_limit(unit)}"
    return (
        f"{_noun(unit)} of {_amount(unit, drop)} > {_limit(unit)} is not significant "
        f"({_p_text(unit, change_p)} >= alpha {alpha}, H0: no drop)"
    )


def _change(unit: UnitResult) -> str:
    """The observed change as the tables show it: Δ in points, or the metric's change."""
    if unit.kind is UnitKind.PERPLEXITY:
        return f"{unit.metric} {unit.delta or 0.0:+.2%}"
    return f"Δ {(unit.delta or 0.0) * 100:+.1f} pts"


def _noun(unit: UnitResult) -> str:
    return f"{unit.metric} increase" if unit.kind is UnitKind.PERPLEXITY else "drop"


def _amount(unit: UnitResult, value: float) -> str:
    """A drop (points) or a relative increase (percent), as the unit's threshold is written."""
    if unit.kind is UnitKind.PERPLEXITY:
        return f"{value:+.2%}"
    return _points(value)


def _limit(unit: UnitResult) -> str:
    if unit.kind is UnitKind.PERPLEXITY:
        return f"max_relative_increase {unit.threshold:.2%}"
    budget = "max_cumulative_drop" if unit.since else "max_drop"
    return f"{budget} {_points(unit.threshold)}"


def _p_text(unit: UnitResult, p: float) -> str:
    return f"{'adj. ' if unit.gated else ''}p {p:.3g}"


def _points(fraction: float) -> str:
    return f"{fraction * 100:.1f} pts"
