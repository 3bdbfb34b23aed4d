"""The sequential gate at its edges (issue #47, item 9): a candidate that drops 50 points or
more gets the fixed gate's REGRESSION instead of a crash, and a design with an unreasonable
number of looks is refused when the policy is read."""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path

import pytest
from test_bounds import _bounded_child

from regress.core.errors import BadInput
from regress.core.manifest import Run
from regress.core.store import Store
from regress.gate.compare import judge
from regress.gate.pairing import pair
from regress.gate.policy import Policy, load_policy, parse_policy
from regress.gate.results import Verdict
from regress.stats import MAX_LOOKS, SequentialDesign, median_unbiased_drift

DESIGN = SequentialDesign()


def _every_right_answer_wrong(base: Run) -> Run:
    """`base` with every right answer turned to the likeliest wrong choice: a drop of 36
    points on baselines/main (55, 44, 18, 19 and 43 right of 100 per task)."""
    records = {}
    for task, recs in base.records.items():
        out = []
        for r in recs:
            if r.correct == 1:
                loglik = list(r.scores["loglik"])
                wrong = max(
                    (i for i in range(len(loglik)) if i != r.target), key=loglik.__getitem__
                )
                loglik[wrong] = max(loglik) + 0.5
                r = dataclasses.replace(
                    r,
                    pred=wrong,
                    correct=0,
                    metrics=dict.fromkeys(r.metrics, 0.0),
                    scores={**r.scores, "loglik": loglik},
                )
            out.append(r)
        records[task] = out
    return dataclasses.replace(base, records=records)


def test_a_collapsed_candidate_is_a_regression_at_every_look_that_can_show_it() -> None:
    """The probe: `check --sequential` exited 3 with no report (brentq found no sign change
    for a p-value below 1e-15). Each look now judges, and the last gives the fixed verdict."""
    main = Store(Path(__file__).resolve().parents[1] / "baselines").load("main")
    candidate = _every_right_answer_wrong(main)
    paired = pair(main, candidate, False)
    fixed = judge(main, candidate, paired, Policy())
    assert (fixed.verdict, int(fixed.exit_code)) == (Verdict.REGRESSION, 1)
    unit = fixed.units[0]
    assert unit.change_pvalue < 1e-50  # the p-value the old search could not bracket
    sequential = Policy(sequential=DESIGN)
    for look in range(len(DESIGN.looks)):
        comparison = judge(main, candidate, paired, sequential, look=look)
        nominal = DESIGN.nominal_level(sequential.alpha, look)
        expected = Verdict.REGRESSION if unit.pvalue < nominal else Verdict.INCONCLUSIVE
        assert comparison.units[0].verdict is expected
    assert comparison.verdict is fixed.verdict and comparison.exit_code == fixed.exit_code


@pytest.mark.parametrize("look", range(len(DESIGN.looks)))
@pytest.mark.parametrize("pvalue", [1e-16, 1e-30, 1e-120, 1e-300])
def test_a_repeated_pvalue_exists_however_small_the_pvalue(look: int, pvalue: float) -> None:
    repeated = DESIGN.repeated_pvalue(pvalue, look)
    assert pvalue <= repeated < 0.05
    # Its defining property: the look's nominal level at that alpha reaches the p-value.
    if repeated > pvalue:
        assert DESIGN.nominal_level(repeated, look) == pytest.approx(pvalue, rel=1e-6)
    # Smaller p-values never give larger repeated ones.
    assert DESIGN.repeated_pvalue(pvalue / 10, look) <= repeated * (1 + 1e-9)


@pytest.mark.parametrize("z", [35.0, 47.0, 200.0])
def test_the_median_unbiased_drift_of_a_huge_statistic(z: float) -> None:
    # At the first look nothing came before, so the median-unbiased drift is the one whose
    # statistic has median z: z / sqrt(t). A fixed search range of +-60 once missed it.
    first = DESIGN.looks[0]
    assert median_unbiased_drift(DESIGN, 0.05, 0, z) == pytest.approx(
        z / math.sqrt(first), abs=1e-3
    )
    assert math.isfinite(median_unbiased_drift(DESIGN, 0.05, 1, z))


@pytest.mark.parametrize(
    ("looks", "message"),
    [
        (100_000, f"sequential.looks must be at most {MAX_LOOKS}, got 100000"),
        ([k / 25 for k in range(1, 26)], f"at most {MAX_LOOKS} sequential looks, not 25"),
    ],
)
def test_an_unreasonable_number_of_looks_is_refused_when_the_policy_is_read(
    tmp_path: Path, looks: object, message: str
) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(f"sequential:\n  looks: {looks}\n", encoding="utf-8")
    start = time.monotonic()
    with pytest.raises(BadInput, match=message):
        load_policy(path)
    assert time.monotonic() - start < 1.0
    assert parse_policy({"sequential": {"looks": MAX_LOOKS}}).sequential.looks[-1] == 1.0


def test_a_count_of_looks_is_refused_before_the_looks_are_built(tmp_path: Path) -> None:
    """10^12 equal steps would be a tuple of 10^12 fractions: refused before it is built
    (a child with 2 GB of address space runs it, so unbounded code fails rather than the
    machine)."""
    path = tmp_path / "policy.yaml"
    path.write_text("sequential:\n  looks: 1000000000000\n", encoding="utf-8")
    code = f"""
from regress.core.errors import BadInput
from regress.gate.policy import load_policy
try:
    load_policy(__import__("pathlib").Path({str(path)!r}))
except BadInput as exc:
    print(exc)
"""
    done = _bounded_child(code)
    assert done.stdout.strip() == (
        f"policy file {path}: sequential.looks must be at most {MAX_LOOKS}, got 1000000000000"
    ), done.stderr[-300:]
