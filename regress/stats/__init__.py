"""The statistics the gate rests on: pure functions and small frozen types over counts and
arrays, importing nothing else of regress, so any wing may use them.

- `paired`: McNemar (exact, mid-p, asymptotic), Tango's interval and score, Holm and Bonferroni,
  Wilson intervals, KL divergence and top-1 agreement over choices, the paired mean test
  (bootstrap-t).
- `margin`: the exact unconditional margin test in both directions, its confidence bounds.
- `drops`: one interface over the drop tests of every unit kind.
- `decision`: the verdict rules (REGRESSION, INCONCLUSIVE, PASS) for one unit or arrays of them.
- `power`: power, minimum detectable effects, the n that decides.
- `spending`: group-sequential designs (alpha spending, boundaries, repeated p-values).
- `stratified`: the stratified estimate and test of a proxy baseline.
- `perplexity`: the corpus-level perplexity tests.
- `operating`: exact operating characteristics of the gate (docs/gate.md's tables).

Other wings import from this package only (tests/test_layout.py keeps them to it).
"""

from regress.stats.decision import (
    PassRequires,
    Rule,
    inconclusive,
    regression,
)
from regress.stats.drops import (
    DropTest,
    NormalShift,
    PairedCounts,
    RelativeIncrease,
    StudentizedShift,
)
from regress.stats.margin import (
    Side,
    margin_pvalue,
)
from regress.stats.operating import (
    SequentialPoint,
    sequential_oc,
)
from regress.stats.paired import (
    SEED,
    Correction,
    Test,
    adjust_pvalues,
    bootstrap_t,
    choice_kl,
    family_levels,
    holm_rows,
    mcnemar_pvalue,
    paired_diff_ci,
    paired_mean_test,
    tango_score,
    top1_agreement,
    wilson_interval,
)
from regress.stats.perplexity import (
    corpus_shift,
)
from regress.stats.power import (
    accuracy_mde,
    accuracy_n,
    pass_n,
    shift_mde,
    shift_n,
)
from regress.stats.spending import (
    SequentialDesign,
    cut,
    expected_fraction,
    median_unbiased_drift,
)
from regress.stats.stratified import (
    moments,
    pvalues,
    stratified_test,
    upper_drop,
    weighted_mean,
)

__all__ = [
    "Correction",
    "DropTest",
    "NormalShift",
    "PairedCounts",
    "PassRequires",
    "RelativeIncrease",
    "Rule",
    "SEED",
    "SequentialDesign",
    "SequentialPoint",
    "Side",
    "StudentizedShift",
    "Test",
    "accuracy_mde",
    "accuracy_n",
    "adjust_pvalues",
    "bootstrap_t",
    "choice_kl",
    "corpus_shift",
    "cut",
    "expected_fraction",
    "family_levels",
    "holm_rows",
    "inconclusive",
    "margin_pvalue",
    "mcnemar_pvalue",
    "median_unbiased_drift",
    "moments",
    "paired_diff_ci",
    "paired_mean_test",
    "pass_n",
    "pvalues",
    "regression",
    "sequential_oc",
    "shift_mde",
    "shift_n",
    "stratified_test",
    "tango_score",
    "top1_agreement",
    "upper_drop",
    "weighted_mean",
    "wilson_interval",
]
