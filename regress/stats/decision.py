"""The gate's decision rules: what makes a unit a REGRESSION, INCONCLUSIVE or a PASS.

One function decides for one unit or for arrays of simulated units alike, so the operating
characteristics in docs/gate.md (`regress.stats.operating`) are computed by the code that judges.

Inputs per unit, all one-sided for "the candidate is worse":
- `drop`: the observed drop (accuracy points as a fraction, a score, or a relative increase
  of perplexity), `threshold` the policy's max_drop (or max_relative_increase);
- `rule_p`: the family-wise adjusted p of the rule's test: H0 "drop <= threshold" (margin)
  or H0 "no drop" (change);
- `change_p`: the family-wise adjusted p of H0 "no drop";
- `upper`: the upper end of the 95% interval of the drop.

`inconclusive` is `pass_requires: no_evidence_of_harm`'s rule; under `evidence` a unit that
did not regress passes only when its within-margin test rejects (regress.gate.compare).
"""

from __future__ import annotations

from enum import StrEnum

import numpy as np
from numpy.typing import ArrayLike


class Rule(StrEnum):
    """What alpha bounds: the hypothesis a REGRESSION rejects."""

    MARGIN = "margin"
    """H0: drop <= max_drop. REGRESSION when the drop is significantly beyond max_drop, so
    alpha bounds P(REGRESSION) for every allowed drop, not only for no change."""
    CHANGE = "change"
    """H0: no drop. REGRESSION when the drop is significant and its point estimate exceeds
    max_drop: alpha bounds P(REGRESSION) only when nothing changed; a true drop of exactly
    max_drop fails up to half the time."""


class PassRequires(StrEnum):
    """What a PASS must show (docs/gate.md, "What the verdicts mean")."""

    EVIDENCE = "evidence"
    """PASS only when the drop is shown within the threshold: its one-sided upper bound, at the
    family's adjusted level, lies below it (two one-sided tests, Schuirmann 1987). Anything
    neither shown beyond nor within is INCONCLUSIVE."""
    NO_EVIDENCE_OF_HARM = "no_evidence_of_harm"
    """PASS unless the candidate is shown worse (regress before 0.4): an underpowered run
    passes by default."""


def regression(
    rule: Rule, alpha: float, rule_p: ArrayLike, drop: ArrayLike, threshold: float
) -> np.ndarray:
    """Whether the unit regressed; `rule_p` is the adjusted p of the rule's own test."""
    significant = np.asarray(rule_p) < alpha
    if Rule(rule) is Rule.MARGIN:
        return significant
    return significant & (np.asarray(drop) > threshold)


def inconclusive(
    regressed: ArrayLike, alpha: float, change_p: ArrayLike, upper: ArrayLike, threshold: float
) -> np.ndarray:
    """Whether a unit that did not regress is INCONCLUSIVE, under either rule.

    INCONCLUSIVE means: the candidate is significantly worse than the baseline (H0 "no drop"
    rejected), yet the 95% interval still reaches beyond the threshold, so the data cannot
    tell an allowed drop from a forbidden one. An unchanged candidate therefore lands here at
    most as often as the no-change test falsely alarms (alpha, family-wise); a drop that is
    merely not significant, however large its point estimate, is a PASS whose worth the
    minimum detectable effect states.
    """
    significant = np.asarray(change_p) < alpha
    return ~np.asarray(regressed) & significant & (np.asarray(upper) > threshold)
