"""The decision gates' rule: the policy's absolute requirements on the candidate (`gates:`),
each measured on its unit's examples and tested both ways (regress.gate.requirements).

A gate shown failing fails the gate; one shown met counts toward a PASS that needs evidence;
one that cannot be evaluated or decided is INCONCLUSIVE, never a silent PASS.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Self

from regress.core.judgements import Judged, Mode
from regress.gate.betting_order import betting_order, judgement_key, record_key
from regress.gate.failure_rates import refusal_share
from regress.gate.format_pool import SUFFIX as POOLED
from regress.gate.judged import JudgedSummary, candidate_scores
from regress.gate.outcomes import metric_of, outcome_value, unit_kind
from regress.gate.policy import Metric, Policy, Requirement
from regress.gate.requirements import (
    Latency,
    RequirementResult,
    measure,
    measure_latency,
    settle,
)
from regress.gate.results import UnitKind
from regress.gate.rule import Context, Corrected, TwoSided
from regress.stats import PassRequires


@dataclass(frozen=True)
class DecisionGates(TwoSided[RequirementResult]):
    """Every decision gate of the policy, measured; decided once settled. A gate that could
    not be evaluated has no p-value and puts no test in the families."""

    def settled(
        self, corrected: Sequence[Corrected], policy: Policy, nominal: Callable[[float], float]
    ) -> Self:
        """Each gate decided on its corrected tests."""
        evidence = policy.pass_requires is PassRequires.EVIDENCE

        def tested(
            _: int, result: RequirementResult, failing: Corrected, met: Corrected
        ) -> RequirementResult:
            return settle(result, failing.pvalue, met.pvalue, policy.alpha, evidence)

        def untested(result: RequirementResult) -> RequirementResult:
            return settle(result, None, None, policy.alpha, evidence)

        return self.each_settled(corrected, tested, untested)


def measure_gates(
    context: Context,
    summaries: Mapping[str, JudgedSummary],
    judged: Judged | None,
    latency: Latency | None,
) -> DecisionGates:
    """Every decision gate's raw tests: `ttft_ms` on `latency`, `quality` on the grading
    judge's scores (`summaries`, `judged`), the rest on the candidate's examples."""
    return DecisionGates(
        tuple(
            measure_latency(r, latency or Latency())
            if r.metric is Metric.TTFT_MS
            else _quality(r, summaries, judged)
            if r.metric is Metric.QUALITY
            else _requirement(r, context)
            for r in context.policy.gates
        )
    )


def _requirement(requirement: Requirement, context: Context) -> RequirementResult:
    """A decision gate's raw tests on the candidate's examples of its unit (every gated
    accuracy or score unit when it names none): each example's value of the unit's metric,
    or its refusal share."""
    units, pairs, unit_policies = context.units, context.pairs, context.unit_policies
    if requirement.unit is not None and requirement.unit not in units:
        return measure(requirement, None, f"the suite has no unit {requirement.unit!r}")
    # A pooled unit holds the same examples as its formats: counted once, in them.
    gated = [n for n in units if unit_policies[n].gate and not n.endswith(POOLED)]
    names = [requirement.unit] if requirement.unit else gated
    refusals = requirement.metric is Metric.REFUSAL_RATE
    values: list[float] = []
    keys: list[str] = []
    generated = False
    for name in names:
        members = units[name]
        records = {t.name: [cand for _, cand in pairs[t.name]] for t in members}
        kind = unit_kind(name, members, records)
        if kind is UnitKind.PERPLEXITY:
            continue
        for task in members:
            metric = metric_of(task, unit_policies[name], kind)
            for record in records[task.name]:
                generated = generated or "failure" in record.scores
                binary = kind is UnitKind.ACCURACY
                values.append(
                    refusal_share(record) if refusals else outcome_value(record, metric, binary)
                )
                keys.append(record_key(record))
    if refusals and not generated:
        return measure(requirement, None, "its examples are not generations: nothing to refuse")
    # Rates and scores are tested by betting: in the order the examples fix.
    return measure(requirement, [values[i] for i in betting_order(keys)], "")


def _quality(
    requirement: Requirement, summaries: Mapping[str, JudgedSummary], judged: Judged | None
) -> RequirementResult:
    """A `quality` gate's raw tests on the candidate's scores from the grading judge, in its
    unit (every graded unit when it names none). Not evaluated without a grading judge, or
    when the judge gave every answer one score: its mean would then say nothing."""
    graded = {name: s for name, s in summaries.items() if s.mode != Mode.PAIRWISE}
    if requirement.unit is not None and requirement.unit not in graded:
        why = f"no grading judge (judge.mode single or rubric) scored unit {requirement.unit!r}"
        return measure(requirement, None, why)
    names = [requirement.unit] if requirement.unit else sorted(graded)
    if judged is None or not names:
        why = "no unit was scored by a grading judge (judge.mode single or rubric)"
        return measure(requirement, None, why)
    for name in names:
        if not graded[name].decides:
            return measure(requirement, None, f"the judge gave every answer of {name} one score")
    graded_judgements = [j for j in judged.judgements if j.unit in names]
    order = betting_order([judgement_key(j) for j in graded_judgements])
    return measure(requirement, candidate_scores([graded_judgements[i] for i in order]), "")
