"""The exact margin tests, the bounds that invert them, one family for the gate, and the
operating characteristics docs/gate.md shows (regress.stats.margin, regress.stats.operating).

Sizes are exact sums over every outcome, so they are held to alpha itself, no tolerance;
only the whole-gate family is simulated (seeded) and held to alpha + 2 standard errors.
"""

import numpy as np
import pytest
from conftest import REPO
from scipy import stats as sps

from regress.report.operating import render_size_grid, render_verdict_table
from regress.stats import (
    Correction,
    PassRequires,
    Rule,
    Side,
    adjust_pvalues,
    drop_bound,
    envelope_rejects,
    family_false_alarms,
    family_levels,
    margin_pvalue,
    margin_rejects,
    operating,
    reach,
    rejection_edges,
    size_grid,
    tango_score,
    verdict_table,
)

CHECKED_NS = (100, 300)
"""The sizes the suite recomputes (seconds); `python -m regress.report.operating` does them all."""


@pytest.fixture(scope="module")
def grid():
    return size_grid(ns=CHECKED_NS)


@pytest.fixture(scope="module")
def table():
    return verdict_table(ns=CHECKED_NS)


def test_neither_verdict_is_shown_falsely_more_often_than_alpha(grid):
    """At a true drop of exactly max_drop, on every n and discordance of the grid: the
    asymptotic score test reached 0.073 at n = 100 and 4% flips; the exact test holds."""
    assert len(grid) == 2 * len(CHECKED_NS) * len(operating.SIZE_DISCORDANCES)
    for point in grid:
        assert point.probability <= operating.ALPHA, point
    # Not needlessly conservative where most answers flip at random.
    assert all(p.probability > 0.04 for p in grid if p.discordance >= 0.10)


def test_the_grid_sums_agree_with_enumerating_every_outcome():
    """rejection_edges against a brute force over every (b, c) of a small n."""
    n, discordance = 40, 0.2
    b, c = (g.ravel() for g in np.mgrid[0 : n + 1, 0 : n + 1])
    keep = b + c <= n
    b, c = b[keep], c[keep]
    shares = [(discordance + 0.02) / 2, (discordance - 0.02) / 2, 1 - discordance]
    pmf = sps.multinomial.pmf(np.stack([b, c, n - b - c], axis=-1), n, shares)
    for side in Side:
        rejected = np.array(
            [margin_pvalue(x, y, n, 0.02, side) < 0.05 for x, y in zip(b, c, strict=True)]
        )
        edges = rejection_edges(n, 0.02, 0.05, side)
        by_edges = b >= edges[b + c] if side is Side.BEYOND else b <= edges[b + c]
        assert np.array_equal(rejected, by_edges), side
        assert pmf[rejected].sum() <= 0.05


def test_the_largest_tail_is_found():
    """The p-value's search over the discordance against a fine brute-force grid."""
    b, c, n, margin = 31, 17, 300, 0.02
    observed = -tango_score(-margin, b, c, n)
    m = np.arange(n + 1)
    outcome_b = np.concatenate([np.arange(k + 1) for k in m])
    outcome_m = np.concatenate([np.full(k + 1, k) for k in m])
    extreme = -tango_score(-margin, outcome_b, outcome_m - outcome_b, n) >= observed - 1e-9
    low, high = sps.beta.ppf([0.0005, 0.9995], [b + c, b + c + 1], [n - b - c + 1, n - b - c])
    best = 0.0
    for theta in np.linspace(max(low, margin), high, 301):
        share = (theta + margin) / (2 * theta)
        weight = sps.binom.pmf(outcome_m, n, theta) * sps.binom.pmf(outcome_b, outcome_m, share)
        best = max(best, float(weight[extreme].sum()))
    # The search finds at least the grid's best, and not more than the curve between allows.
    found = margin_pvalue(b, c, n, margin) - 0.001
    assert best - 1e-9 <= found <= best + 1e-4


@pytest.mark.parametrize(("b", "c", "n"), [(40, 8, 1000), (28, 19, 300), (0, 0, 300), (9, 1, 100)])
def test_a_bound_is_the_edge_where_its_test_starts_to_reject(b, c, n):
    """The bound a report prints beside a verdict is the inversion of the test that gave it."""
    for level in (0.05, 0.0125):
        low = drop_bound(b, c, n, level, Side.BEYOND)
        high = drop_bound(b, c, n, level, Side.WITHIN)
        assert low < (b - c) / n < high or b == c == 0
        assert margin_pvalue(b, c, n, low - 1e-4, Side.BEYOND) < level
        assert margin_pvalue(b, c, n, low + 1e-4, Side.BEYOND) >= level
        assert margin_pvalue(b, c, n, high + 1e-4, Side.WITHIN) < level
        assert margin_pvalue(b, c, n, high - 1e-4, Side.WITHIN) >= level


def test_issue_25_case_the_bound_agrees_with_the_regression():
    """n = 1000, b = 40, c = 8: the old report showed a 95% CI of [1.93, 4.68] pts beside a
    REGRESSION at max_drop 2; the one-sided bound at the test's level lies beyond 2."""
    assert margin_pvalue(40, 8, 1000, 0.02) < 0.05
    assert drop_bound(40, 8, 1000, 0.05, Side.BEYOND) > 0.02


@pytest.mark.parametrize(
    ("b", "c", "raw_rejects"),
    [(31, 14, True), (26, 10, False)],
)
def test_issue_50_cases_the_bound_and_the_verdict_agree(b, c, raw_rejects):
    """n = 300 at max_drop 2 points (issue 50). The exact p is not monotone in the margin:
    (31, 14) is rejected at 2 points though a margin near 1.98 is not, and (26, 10) is kept
    at 2 points though 2.05 is rejected. The bound is the edge of the margins all rejected,
    so both lie below 2, and the gate shows neither as a REGRESSION: verdict and bound agree."""
    from test_compare import runs

    from regress.gate.compare import compare
    from regress.gate.policy import Policy
    from regress.gate.results import Verdict

    assert (margin_pvalue(b, c, 300, 0.02) < 0.05) is raw_rejects
    bound = drop_bound(b, c, 300, 0.05, Side.BEYOND)
    assert 0.019 < bound < 0.02
    # Every margin below the bound is rejected, and one just above it is kept.
    for margin in np.linspace(bound - reach(300), bound - 2e-5, 60):
        assert margin_pvalue(b, c, 300, float(margin)) < 0.05, margin
    assert any(margin_pvalue(b, c, 300, bound + x) >= 0.05 for x in (1e-5, 2e-5))
    assert not envelope_rejects(b, c, 300, 0.02, 0.05, Side.BEYOND)
    base, cand = runs({"arc": (300, b, c)})
    (unit,) = compare(base, cand, Policy()).units
    assert (unit.b, unit.c) == (b, c)
    assert unit.bounds.at_least == pytest.approx(bound)
    assert unit.verdict is Verdict.INCONCLUSIVE


def test_bound_and_verdict_agree_over_a_seeded_sweep():
    """Seeded (n, b, c) over n = 100-2,000 and 1-40% of answers flipped, both sides, at the
    unit's alpha and a Holm level: the exact test rejects every margin on the bound's far
    side (out to twice the reach where its p can dip back) and keeps one just past it, so the
    envelope test (`envelope_rejects`: the margin beyond the bound) rejects only what the exact
    test rejects and a verdict always agrees with its bound."""
    rng = np.random.default_rng(50)
    for _ in range(12):
        n = int(rng.choice([100, 300, 1000, 2000]))
        m = int(rng.binomial(n, rng.uniform(0.01, 0.4)))
        b = int(rng.binomial(m, rng.uniform(0.45, 0.8)))
        c = m - b
        for level in (0.05, 0.0125):
            for side in Side:
                bound = drop_bound(b, c, n, level, side)
                if abs(bound) >= 1:
                    continue
                rejected = -1 if side is Side.BEYOND else 1  # the side of the bound
                for x in np.linspace(0, 2 * reach(n), 9)[1:]:
                    margin = bound + rejected * x
                    assert margin_pvalue(b, c, n, margin, side) < level, (n, b, c, side, x)
                # The edge: a margin just past it is kept (the bound claims no more).
                kept = (margin_pvalue(b, c, n, bound - rejected * x, side) for x in (1e-5, 2e-5))
                assert any(p >= level for p in kept), (n, b, c, side)


def test_family_levels_reject_exactly_what_holm_rejects():
    rng = np.random.default_rng(3)
    for _ in range(500):
        pvalues = list(rng.uniform(0, 0.08, size=rng.integers(1, 7)))
        for method in Correction:
            adjusted = adjust_pvalues(pvalues, method)
            levels = family_levels(pvalues, 0.05, method)
            assert [a < 0.05 for a in adjusted] == [
                p < lv for p, lv in zip(pvalues, levels, strict=True)
            ]


@pytest.mark.parametrize("n", CHECKED_NS)
def test_a_pass_needs_evidence_and_keeps_its_guarantee(table, n):
    def point(rule, pass_requires, drop):
        (found,) = [
            p
            for p in table
            if (p.rule, p.pass_requires, p.n) == (rule, pass_requires, n)
            and p.drop == pytest.approx(drop)
        ]
        return found

    for rule in Rule:
        # A true drop of max_drop or more passes at most alpha of the time...
        for drop in (0.02, 0.03, 0.05):
            assert point(rule, PassRequires.EVIDENCE, drop).passed <= operating.ALPHA
        # ...where no_evidence_of_harm passed it most of the time (issue 32).
        assert point(rule, PassRequires.NO_EVIDENCE_OF_HARM, 0.02).passed > 0.7
    for pass_requires in PassRequires:
        for drop in operating.DROPS:
            p = point(Rule.MARGIN, pass_requires, drop)
            assert p.regression + p.inconclusive + p.passed == pytest.approx(1, abs=1e-9)
    # Evidence accumulates: an unchanged candidate passes more often with more examples.
    assert point(Rule.MARGIN, PassRequires.EVIDENCE, 0.0).passed > 0.1


def test_the_whole_gate_holds_one_alpha():
    """3 units, a failure class and a golden set in one Holm family: any false REGRESSION
    at most alpha, with nothing changed and with every rule at its threshold."""
    for at_threshold in (False, True):
        rate = family_false_alarms(at_threshold, runs=400)
        assert rate.regression <= operating.ALPHA + 2 * rate.se, rate


def test_the_docs_show_the_operating_characteristics_the_code_computes(grid, table):
    page = (REPO / "docs" / "gate.md").read_text(encoding="utf-8")
    regenerate = "regenerate with: python -m regress.report.operating"
    for line in render_size_grid(grid).splitlines()[2:]:
        assert line in page, regenerate
    for line in render_verdict_table(table).splitlines()[2:]:
        assert line in page, regenerate


def test_a_decision_at_a_level_is_the_p_values():
    """Edge searches and bounds decide by bounds of the p-value and refine it only where
    those leave the decision open (regress.stats.margin_rejects): the same decisions as the
    p-value's own, over a seeded sweep with levels from 30% below it to 30% above, the
    closest of which the bounds cannot settle and the refinement must."""
    rng = np.random.default_rng(7)
    for _ in range(40):
        n = int(rng.integers(20, 400))
        m = int(rng.integers(0, n // 4 + 1))
        b = int(rng.integers(0, m + 1))
        margin, side = float(rng.uniform(-0.05, 0.06)), list(Side)[int(rng.integers(2))]
        p = margin_pvalue(b, m - b, n, margin, side)
        for level in (
            0.05,
            *(p * (1 + e) for e in (-0.3, -0.1, -0.03, -1e-3, 1e-3, 0.03, 0.1, 0.3)),
        ):
            assert margin_rejects(b, m - b, n, margin, side, level) == (p < level), (b, m, n)
