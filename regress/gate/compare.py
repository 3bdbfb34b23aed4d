"""Judge a paired candidate and baseline: every rule of the gate, one alpha, one verdict.

The rules, each measured by its own module from one `Context` (regress.gate.rule):
- the units (regress.gate.units): each gated unit's drop, by what its records hold;
- the creep guard (regress.gate.creep): the same units against an older anchor baseline;
- the failure classes (regress.gate.failure_rates): a generation unit's failure rates;
- the golden sets (regress.gate.golden_rules): must-pass items and relative drops;
- the decision gates (regress.gate.decision_gates): absolute requirements on the candidate;
- recovery (regress.gate.recovery): a unit's share of the baseline's accuracy kept;
- divergence (regress.gate.divergence): how far a unit's choice distributions moved.
Judged units enter as outcomes (regress.gate.judged), pooled formats as units
(regress.gate.format_pool); turns and format spreads are reported, not tested.
`regress.gate.family` corrects every rule's tests together and decides.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from regress.core.errors import BadInput, ExitCode
from regress.core.judgements import Judged
from regress.core.manifest import Run
from regress.gate import creep, divergence, failure_rates, golden_rules, recovery, units
from regress.gate.creep import Since, creep_policies
from regress.gate.decision_gates import DecisionGates, measure_gates
from regress.gate.divergence import Divergence
from regress.gate.failure_rates import FailureClasses
from regress.gate.family import correct, decide
from regress.gate.format_pool import with_pooled
from regress.gate.format_spread import spread_changes
from regress.gate.golden_rules import GoldenItems, GoldenSets
from regress.gate.judged import JudgedSummary, judged_pairs, needs_judge
from regress.gate.pairing import Paired, pair
from regress.gate.policy import Policy
from regress.gate.recovery import Recovery
from regress.gate.requirements import Latency
from regress.gate.results import MAX_FLIPS, Comparison, Fingerprint
from regress.gate.rule import Context, GateRule
from regress.gate.turns import turn_changes
from regress.gate.units import Units, error_rate
from regress.gate.verdict import Verdict


def compare(
    baseline: Run,
    candidate: Run,
    policy: Policy,
    allow_mismatch: bool = False,
    golden_items: GoldenItems | None = None,
) -> Comparison:
    """Pair `candidate` with `baseline`, test every unit and give the verdict and exit code
    (`pair`, then `judge`); `golden_items` names the golden sets' items in reports."""
    paired = pair(baseline, candidate, allow_mismatch)
    return judge(baseline, candidate, paired, policy, golden_items)


def judge(
    baseline: Run,
    candidate: Run,
    paired: Paired,
    policy: Policy,
    golden_items: GoldenItems | None = None,
    look: int | None = None,
    since: Since | None = None,
    latency: Latency | None = None,
    judged: Judged | None = None,
) -> Comparison:
    """Every rule of the gate on one pairing, and the verdict that sees them all.

    `look` (0-based) judges the pairing as that look of the policy's sequential design: every
    p-value becomes a repeated p-value and every bound a repeated confidence bound
    (regress.stats.spending), so the one alpha holds over all the looks together.

    `since` adds the creep guard: each gated accuracy or score unit is tested against the
    anchor too, by the margin rule at `policy.max_cumulative_drop`, in the same family.

    `latency` holds the candidate's bench timings for a `ttft_ms` decision gate.

    `judged` holds the policy judge's verdicts on this pairing: each judged unit is tested on
    them (regress.gate.judged); a unit only a judge can score and no judge scored is left out.
    """
    if policy.pool_formats:
        paired = with_pooled(paired, policy)
    design = baseline.manifest.proxy
    if design is not None and (paired.unpaired or len(paired.tasks) < len(baseline.manifest.tasks)):
        raise BadInput(
            f"{baseline.manifest.name} is a proxy of {design.parent}: its estimate needs every "
            f"sampled example paired, {paired.unpaired} are not; rerun the candidate on the proxy"
        )
    warnings = list(paired.warnings)
    pairs, summaries = paired.pairs, dict[str, JudgedSummary]()
    gated_units = paired.units
    if judged is not None and policy.judge is not None:
        pairs, summaries = judged_pairs(pairs, gated_units, judged, policy.judge.min_consistency)
    extra = policy.judge.units if policy.judge is not None else ()
    for name in sorted(set(extra) - set(gated_units)):
        warnings.append(f"the judge's units name '{name}', which is not in this suite")
    for name in sorted(needs_judge(gated_units, extra) - set(summaries)):
        del gated_units[name]
        warnings.append(f"unit {name}: only a judge can score it, and none did (docs/judge.md)")
    for name in sorted(set(policy.units) - set(gated_units)):
        warnings.append(f"policy names unit '{name}', which is not in this suite")
    unit_policies = {name: policy.for_unit(name) for name in gated_units}
    guarded = creep_policies(since, policy) if since is not None else {}
    context = Context(
        baseline=baseline,
        candidate=candidate,
        tasks=paired.tasks,
        pairs=pairs,
        units=gated_units,
        unit_policies=unit_policies,
        policy=policy,
        k=max(1, sum(p.gate for p in unit_policies.values()) + len(guarded)),
        design=design,
        plans=look is None,
    )
    measured = units.measure(context, summaries)
    guard = creep.measure(context, since, guarded) if since is not None else Units((), ())
    failures = failure_rates.measure(context)
    golden = golden_rules.measure(context, golden_items)
    gates = measure_gates(context, summaries, judged, latency)
    kept = recovery.measure(context)
    moved = divergence.measure(context)
    nominal: Callable[[float], float] = lambda level: level  # noqa: E731
    sequential = policy.sequential
    if look is not None and sequential is not None:
        at_look = partial(sequential.repeated_pvalue, look=look)
        measured, guard = measured.repeated(at_look), guard.repeated(at_look)
        failures, golden = failures.repeated(at_look), golden.repeated(at_look)
        gates, kept = gates.repeated(at_look), kept.repeated(at_look)
        moved = moved.repeated(at_look)
        nominal = partial(sequential.nominal_level, look=look)
    rules: tuple[GateRule, ...] = (measured, guard, failures, golden, gates, kept, moved)
    corrected = correct([rule.tests() for rule in rules], policy)
    measured = measured.settled(corrected[0], policy, nominal)
    guard = guard.settled(corrected[1], policy, nominal)
    failures = failures.settled(corrected[2], policy, nominal)
    golden = golden.settled(corrected[3], policy, nominal)
    gates = gates.settled(corrected[4], policy, nominal)
    kept = kept.settled(corrected[5], policy, nominal)
    moved = moved.settled(corrected[6], policy, nominal)
    settled: tuple[GateRule, ...] = (measured, guard, failures, golden, gates, kept, moved)
    if since is not None:
        warnings += [f"anchor {since.label}: {w}" for w in since.paired.warnings]
    warnings += policy.notices
    for unit in (*measured.units, *guard.units):
        rate = error_rate(unit.baseline_failures, unit.n)
        if rate > policy.max_error_rate:
            warnings.append(
                f"{unit.name}: {rate:.1%} of the baseline's examples failed and count as wrong"
            )
    verdict, exit_code = decide([rule.verdict() for rule in settled], policy)
    return Comparison(
        verdict=verdict,
        exit_code=exit_code,
        units=(*measured.units, *guard.units),
        flips=measured.flips[:MAX_FLIPS],
        n_flips=len(measured.flips),
        unpaired=paired.unpaired,
        warnings=tuple(warnings),
        baseline=Fingerprint.of(baseline.manifest),
        candidate=Fingerprint.of(candidate.manifest),
        policy=policy,
        suite=baseline.manifest.suite_name,
        command=candidate.manifest.command,
        failures=failures.rates,
        golden=golden.sets,
        requirements=gates.results,
        recovery=kept.results,
        divergence=moved.results,
        turns=tuple(
            change
            for name, members in gated_units.items()
            for change in turn_changes(name, [p for task in members for p in pairs[task.name]])
        ),
        formats=spread_changes(
            {t.name: t for t in paired.tasks},
            {name: [b for b, _ in ps] for name, ps in pairs.items()},
            {name: [c for _, c in ps] for name, ps in pairs.items()},
        ),
    )


def verdict_of(comparison: Comparison) -> tuple[Verdict, ExitCode]:
    """The verdict and exit code of a comparison's settled rules, as `judge` decides them
    (the sequential gate asks again once each unit is the one decided at its look)."""
    rules: list[GateRule] = [
        Units(comparison.units, (None,) * len(comparison.units)),
        FailureClasses(comparison.failures),
        GoldenSets(comparison.golden),
        DecisionGates(comparison.requirements),
        Recovery(comparison.recovery),
        Divergence(comparison.divergence),
    ]
    return decide([rule.verdict() for rule in rules], comparison.policy)
