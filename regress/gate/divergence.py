"""The divergence rule: how far a multiple-choice unit's answer distributions moved.

`units: {arc_easy: {max_kl: 0.02}}` bounds the mean KL divergence of the candidate's
distribution over each question's choices from the baseline's (nats; the softmax of the
choices' log-likelihoods), the quantity llama.cpp users judge a quantization by, here on the
choices rather than the vocabulary. It sees every change, not only the ones that flip an
answer, so it decides with far fewer examples than accuracy does; what it claims is that the
model answers alike, not that it is as accurate (docs/gate.md, "Estimands").

Each example's divergence is capped at `KL_CAP` nats before averaging: the test is a betting
test of a bounded mean (regress.stats.bounded_mean), valid at any n and under any skew, which a
test of an unbounded mean cannot be (a few questions moving a lot would carry it). The rule
therefore bounds the mean capped divergence; the report prints the uncapped mean beside it and
how many examples reached the cap. A candidate that failed an example diverges by the cap
there; an example the baseline failed has no distribution to diverge from and is left out.

An INCONCLUSIVE unit of a fixed check states the n that would decide it, from the betting
test's own plan (regress.stats.betting_n): with its mean within max_kl, the examples that would
show a candidate diverging like this one within it; otherwise those that would show a mean of
twice max_kl above it. A sequential check states none (checks/sequential.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Self

import numpy as np

from regress.core.errors import BadInput
from regress.core.records import Record
from regress.gate.betting_order import betting_order, record_key
from regress.gate.outcomes import UnitKind, unit_kind
from regress.gate.policy import Policy
from regress.gate.rule import Context, Corrected, TwoSided
from regress.gate.verdict import TESTS_TWICE, Verdict, detect_words, rerun_words
from regress.stats import BoundedDrop, Direction, PassRequires, Side, betting_n
from regress.stats import kl_divergence_choices as choice_divergence

KL_CAP = 1.0
"""Nats: an example whose choices moved further counts this much (a near-certain answer
turned into a coin flip between two choices is about 0.7)."""
PLAN_FACTOR = 2
"""An INCONCLUSIVE unit above max_kl is planned for a mean of twice it, as accuracy's n to
detect is for twice max_drop: a divergence worth catching, stated rather than observed."""


@dataclass(frozen=True)
class DivergenceResult:
    """A unit's mean divergence over choices as the gate measured and decided it."""

    unit: str
    n: int
    mean_kl: float
    """The mean of each example's divergence capped at KL_CAP: what the rule bounds."""
    uncapped_kl: float
    """The plain mean, for the report."""
    at_cap: int
    """Examples whose divergence reached the cap (or whose candidate failed)."""
    max_kl: float
    fail_pvalue: float
    """One-sided p of H0 "mean capped KL <= max_kl"."""
    pass_pvalue: float
    """One-sided p of H0 "mean capped KL >= max_kl"."""
    fail_adjusted_pvalue: float | None = None
    pass_adjusted_pvalue: float | None = None
    at_least: float | None = None
    """The mean capped KL is at least this, at `at_least_level` (the failing test's level)."""
    at_least_level: float | None = None
    at_most: float | None = None
    """The mean capped KL is at most this, at `at_most_level` (the PASS test's level)."""
    at_most_level: float | None = None
    n_needed: int | None = None
    """INCONCLUSIVE with its mean at or above max_kl: the examples that would show a mean of
    twice max_kl above it with the policy's power (None past the plan's largest size)."""
    n_to_pass: int | None = None
    """INCONCLUSIVE with its mean within max_kl: the examples that would show a candidate
    diverging like this one within it with the policy's power, at the full alpha."""
    verdict: Verdict = Verdict.INCONCLUSIVE
    reason: str = ""


@dataclass(frozen=True)
class Divergence(TwoSided[DivergenceResult]):
    """Every gated unit with a `max_kl`, measured; decided once settled."""

    samples: tuple[np.ndarray, ...] = ()
    """Each result's capped divergences in the order tested (its bounds invert the test on
    them); empty once only the verdicts are needed."""
    plans: bool = True
    """Whether an INCONCLUSIVE result states the n that would decide it (not at a sequential
    look: regress.gate.rule.Context.plans)."""
    k: int = 1
    """Gated units the n to detect shares alpha with, as accuracy's does."""

    def settled(
        self, corrected: Sequence[Corrected], policy: Policy, nominal: Callable[[float], float]
    ) -> Self:
        """Each unit decided on its corrected tests, with the bounds that agree."""

        def settle(
            at: int, result: DivergenceResult, failing: Corrected, met: Corrected
        ) -> DivergenceResult:
            high, low = nominal(failing.level), nominal(met.level)
            result = replace(
                result,
                fail_adjusted_pvalue=failing.pvalue,
                pass_adjusted_pvalue=met.pvalue,
                at_least=_bound(self.samples[at], high, Side.BEYOND),
                at_least_level=high,
                at_most=_bound(self.samples[at], low, Side.WITHIN),
                at_most_level=low,
            )
            result = _decided(result, policy)
            if result.verdict is Verdict.INCONCLUSIVE and self.plans:
                result = _planned(result, self.samples[at], policy, self.k)
            return result

        return self.each_settled(corrected, settle)


def measure(context: Context) -> Divergence:
    """The divergence tests of every gated unit whose policy sets `max_kl`."""
    results, samples = [], []
    for name, members in context.units.items():
        unit_policy = context.unit_policies[name]
        if unit_policy.max_kl is None or not unit_policy.gate:
            continue
        records = {t.name: [base for base, _ in context.pairs[t.name]] for t in members}
        if context.design is not None or unit_kind(name, members, records) is not UnitKind.ACCURACY:
            raise BadInput(
                f"unit {name}: max_kl bounds how multiple-choice answers moved; it needs a "
                "full baseline of multiple-choice tasks"
            )
        if unit_policy.max_kl >= KL_CAP:
            raise BadInput(
                f"unit {name}: max_kl must be below {KL_CAP:g} nat, the most one example's "
                "divergence counts"
            )
        # A betting test: the examples in the order they fix (gate/betting_order.py).
        tested = [pair for task in members for pair in context.pairs[task.name] if pair[0].ok]
        order = betting_order([record_key(base) for base, _ in tested])
        uncapped = [_divergence(*tested[i]) for i in order]
        # Rounding leaves an unchanged example's divergence a hair below 0.
        capped = np.clip(np.asarray(uncapped, dtype=float), 0.0, KL_CAP)
        failing, met = divergence_test(capped, unit_policy.max_kl)
        results.append(
            DivergenceResult(
                unit=name,
                n=len(capped),
                mean_kl=float(capped.mean()) if capped.size else 0.0,
                uncapped_kl=float(np.mean(uncapped)) if uncapped else 0.0,
                at_cap=int(np.sum(capped >= KL_CAP)),
                max_kl=unit_policy.max_kl,
                fail_pvalue=failing,
                pass_pvalue=met,
            )
        )
        samples.append(capped)
    return Divergence(tuple(results), tuple(samples), context.plans, context.k)


def divergence_test(capped: np.ndarray, max_kl: float) -> tuple[float, float]:
    """One-sided p-values of H0 "mean capped KL <= max_kl" (small: shown above it) and of
    H0 "mean capped KL >= max_kl" (small: shown below it), by betting on values in [0, cap]."""
    if capped.size == 0:
        return 1.0, 1.0
    test = BoundedDrop(capped, 0.0, KL_CAP)
    return test.pvalue(max_kl, Side.BEYOND), test.pvalue(max_kl, Side.WITHIN)


def _divergence(base: Record, cand: Record) -> float:
    """KL(baseline || candidate) over the example's choices; the cap when the candidate failed."""
    if not cand.ok:
        return KL_CAP
    ours, theirs = base.scores.get("loglik"), cand.scores.get("loglik")
    if not ours or not theirs or len(ours) != len(theirs):
        raise BadInput(
            f"task {base.task} doc {base.doc_id}: max_kl needs both sides' per-choice "
            "log-likelihoods, the same choices on each"
        )
    return choice_divergence(ours, theirs)


def _bound(values: np.ndarray, level: float, side: Side) -> float | None:
    """The mean capped KL's one-sided bound at `level` (BEYOND: at least; WITHIN: at most):
    the edge of the values of max_kl the betting test rejects, which a verdict asks to clear."""
    if values.size == 0:
        return None
    return BoundedDrop(values, 0.0, KL_CAP).bound(level, side)


def _decided(result: DivergenceResult, policy: Policy) -> DivergenceResult:
    """A unit's divergence verdict and the one line that says why."""
    shown, limit = f"mean KL {result.mean_kl:.4f}", f"max_kl {result.max_kl:g}"
    if result.n < policy.min_examples:
        why = f"only {result.n} paired examples (min_examples {policy.min_examples})"
        return replace(result, verdict=Verdict.INCONCLUSIVE, reason=why)
    failing = result.fail_adjusted_pvalue
    # A verdict needs its bound past max_kl too: then verdict and bound cannot disagree, and
    # as the test's p is monotone in max_kl the bound's edge rejects only what the test does.
    above = result.at_least is not None and result.at_least > result.max_kl
    below = result.at_most is not None and result.at_most < result.max_kl
    if failing is not None and failing < policy.alpha and above:
        why = (
            f"{shown}, at least {result.at_least:.4f} > {limit} "
            f"(adj. p {failing:.3g} < alpha {policy.alpha})"
        )
        return replace(result, verdict=Verdict.REGRESSION, reason=why)
    met = result.pass_adjusted_pvalue
    if policy.pass_requires is PassRequires.NO_EVIDENCE_OF_HARM:
        return replace(result, verdict=Verdict.PASS, reason=f"{shown}: not shown above {limit}")
    if met is not None and met < policy.alpha and below:
        why = f"{shown}, at most {result.at_most:.4f}: within {limit}"
        return replace(result, verdict=Verdict.PASS, reason=why)
    why = f"{shown}, may be as high as {result.at_most:.4f}: not shown within {limit}"
    return replace(result, verdict=Verdict.INCONCLUSIVE, reason=why)


def _planned(
    result: DivergenceResult, capped: np.ndarray, policy: Policy, k: int
) -> DivergenceResult:
    """An INCONCLUSIVE result with the n that would decide it, said in its reason."""
    if capped.size == 0:
        return result
    within = result.mean_kl < result.max_kl
    planned = result.mean_kl if within else min(PLAN_FACTOR * result.max_kl, KL_CAP)
    side, level = (Direction.BELOW, policy.alpha) if within else (Direction.ABOVE, policy.alpha / k)
    n = betting_n(capped, planned, result.max_kl, side, level, policy.power, 0.0, KL_CAP)
    if n is None:
        return result
    n = max(n, policy.min_examples)  # fewer could never decide
    if within:
        said = rerun_words(f"{n:,}", "a candidate diverging like this one")
        result = replace(result, n_to_pass=n)
    else:
        said = f"{detect_words(f'{n:,}', f'mean KL of {planned:g}')}; {TESTS_TWICE}"
        result = replace(result, n_needed=n)
    return replace(result, reason=f"{result.reason}; {said}")
