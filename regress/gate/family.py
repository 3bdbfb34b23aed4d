"""One alpha for the gate: every rule's tests corrected together, and the one verdict.

docs/gate.md, "One alpha": every test that can fail the gate (the gated units' rule tests,
the creep guard's, the gated failure-class rates, the golden sets' relative drops, the
decision gates shown failing) is one family under `policy.correction`. A PASS that needs
evidence (the gated units', anchor rows' and recoveries' within-margin tests, the decision
gates shown met) is an intersection-union test: the gate PASSes only when every one of them
rejects, so each at the full alpha already bounds P(gate PASS) by alpha whenever any one of
them sits at its margin (Berger 1982), and a correction would only cost power. The units'
no-drop tests, which `no_evidence_of_harm` reads, form a third family under the correction.
"""

from __future__ import annotations

from collections.abc import Sequence

from regress.core.errors import ExitCode
from regress.gate.policy import Inconclusive, Policy
from regress.gate.results import Verdict
from regress.gate.rule import Corrected, Family, Test
from regress.gate.verdict import worst
from regress.stats import adjust_pvalues, family_levels


def correct(tests: Sequence[Sequence[Test]], policy: Policy) -> list[list[Corrected]]:
    """Each rule's tests corrected, every family as one: per rule, its tests' corrections in
    its own order (`tests[i]` are rule i's tests, as `GateRule.tests` gives them). The PASS
    family is left at the full alpha: its tests are intersected, not united (module docstring)."""
    corrected: dict[tuple[int, int], Corrected] = {}
    for family in Family:
        where = [
            (i, j) for i, own in enumerate(tests) for j, t in enumerate(own) if t.family == family
        ]
        if not where:
            continue
        raw = [tests[i][j].pvalue for i, j in where]
        if family is Family.PASS:
            adjusted, levels = raw, [policy.alpha] * len(raw)
        else:
            adjusted = adjust_pvalues(raw, policy.correction)
            levels = family_levels(raw, policy.alpha, policy.correction)
        for key, p, level in zip(where, adjusted, levels, strict=True):
            corrected[key] = Corrected(p, level)
    return [[corrected[i, j] for j in range(len(own))] for i, own in enumerate(tests)]


def decide(verdicts: Sequence[Verdict | None], policy: Policy) -> tuple[Verdict, ExitCode]:
    """The gate's one verdict from what each rule contributes: ERROR when a gated unit's run
    failed; else REGRESSION when any rule was shown failing; else INCONCLUSIVE when a gated
    unit or a decision gate could not decide (exit 1 under `inconclusive: fail`); else PASS."""
    verdict = worst([v for v in verdicts if v is not None]) or Verdict.PASS
    if verdict is Verdict.ERROR:
        return verdict, ExitCode.RUN_FAILED
    if verdict is Verdict.REGRESSION:
        return verdict, ExitCode.REGRESSION
    if verdict is Verdict.INCONCLUSIVE:
        failing = policy.inconclusive == Inconclusive.FAIL
        return verdict, ExitCode.REGRESSION if failing else ExitCode.OK
    return Verdict.PASS, ExitCode.OK
