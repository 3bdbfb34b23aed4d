"""The gate's statistics against independent references, and by simulation.

Simulations are seeded and sized to a few seconds each; each states its tolerance.
"""

import math

import numpy as np
import pytest
from scipy import optimize
from scipy.stats import binomtest, norm, ttest_1samp
from statsmodels.stats.contingency_tables import mcnemar

from regress.stats import (
    Correction,
    Rule,
    accuracy_mde,
    accuracy_n,
    accuracy_power,
    adjust_pvalues,
    choice_kl,
    corpus_ratio_test,
    inconclusive,
    kl_divergence_choices,
    mcnemar_pvalue,
    operating,
    paired_diff_ci,
    paired_mean_test,
    regression,
    regressions,
    shift_mde,
    shift_n,
    top1_agreement,
)

# Imported under another name: pytest would try to collect a class called Test*.
from regress.stats import Test as McNemar

COUNTS = [(28, 19), (10, 2), (5, 5), (3, 9), (1, 0), (140, 101)]


@pytest.mark.parametrize(("b", "c"), COUNTS)
def test_exact_is_scipy_one_sided_binomial_test(b, c):
    expected = binomtest(b, b + c, 0.5, alternative="greater").pvalue
    assert mcnemar_pvalue(b, c, McNemar.EXACT) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(("b", "c"), [(28, 19), (10, 2), (140, 101)])
def test_exact_and_asymptotic_are_half_of_statsmodels_two_sided_when_b_exceeds_c(b, c):
    table = [[100, b], [c, 100]]
    assert 2 * mcnemar_pvalue(b, c, McNemar.EXACT) == pytest.approx(
        mcnemar(table, exact=True).pvalue, rel=1e-10
    )
    two_sided = mcnemar(table, exact=False, correction=False).pvalue
    assert 2 * mcnemar_pvalue(b, c, McNemar.ASYMPTOTIC) == pytest.approx(two_sided, rel=1e-9)


@pytest.mark.parametrize(("b", "c"), COUNTS)
def test_midp_is_the_direct_formula(b, c):
    m = b + c
    above = sum(math.comb(m, k) for k in range(b + 1, m + 1))
    expected = (above + 0.5 * math.comb(m, b)) / 2**m
    assert mcnemar_pvalue(b, c, McNemar.MIDP) == pytest.approx(expected, rel=1e-12)


def test_midp_known_values():
    # 3 of 3 discordant pairs against the candidate: P(X > 3) + P(X = 3) / 2 = 1/16.
    assert mcnemar_pvalue(3, 0) == 0.0625
    # 5 vs 1: (1 + 6 / 2) / 64.
    assert mcnemar_pvalue(5, 1) == pytest.approx(0.0625, rel=1e-12)
    # FACTS.md: a 3-point drop at n=300 with ~16% discordant pairs gives mid-p about 0.09.
    assert mcnemar_pvalue(28, 19) == pytest.approx(0.0967, abs=5e-4)


@pytest.mark.parametrize(("b", "c"), COUNTS)
def test_asymptotic_is_the_upper_normal_tail(b, c):
    expected = norm.sf((b - c) / math.sqrt(b + c))
    assert mcnemar_pvalue(b, c, McNemar.ASYMPTOTIC) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("test", list(McNemar))
def test_no_discordant_pair_is_no_evidence(test):
    assert mcnemar_pvalue(0, 0, test) == 1.0


def _score_by_brute_force(delta: float, b: int, c: int, n: int) -> float:
    """Tango's statistic with the constrained MLE found numerically, not by the quadratic."""
    rest = n - b - c

    def negative_loglik(p_b: float) -> float:
        p_c, p_rest = p_b + delta, 1 - 2 * p_b - delta
        terms = [(b, p_b), (c, p_c), (rest, p_rest)]
        return -sum(k * math.log(p) for k, p in terms if k)

    low, high = max(0.0, -delta), (1 - delta) / 2
    bounds = (low + 1e-12, high - 1e-12)
    found = optimize.minimize_scalar(
        negative_loglik, bounds=bounds, method="bounded", options={"xatol": 1e-12}
    )
    p_b = found.x
    variance = n * (2 * p_b + delta - delta**2)
    return (c - b - n * delta) / math.sqrt(variance)


@pytest.mark.parametrize(("b", "c", "n"), [(40, 20, 160), (7, 1, 21), (28, 19, 300), (3, 0, 50)])
def test_tango_limits_solve_the_score_equation(b, c, n):
    low, high = paired_diff_ci(b, c, n)
    z = norm.isf(0.025)
    assert low < (c - b) / n < high
    assert _score_by_brute_force(low, b, c, n) == pytest.approx(z, abs=1e-4)
    assert _score_by_brute_force(high, b, c, n) == pytest.approx(-z, abs=1e-4)


def test_tango_edges_stay_in_range():
    assert paired_diff_ci(0, 0, 0) == (-1.0, 1.0)
    low, high = paired_diff_ci(0, 0, 100)
    assert low == pytest.approx(-high) and 0 < high < 0.05
    assert paired_diff_ci(100, 0, 100)[0] == -1.0
    assert paired_diff_ci(0, 100, 100)[1] == 1.0
    with pytest.raises(ValueError):
        paired_diff_ci(60, 50, 100)


def test_tango_interval_covers_at_nominal_rate():
    rng = np.random.default_rng(7)
    n, p_b, p_c = 200, 0.09, 0.05
    counts = rng.multinomial(n, [p_b, p_c, 1 - p_b - p_c], size=1000)
    truth = p_c - p_b
    covered = 0
    for b, c, _ in counts:
        low, high = paired_diff_ci(int(b), int(c), n)
        covered += low <= truth <= high
    # 1000 runs: the standard error of a 95% coverage is 0.007.
    assert 0.93 <= covered / 1000 <= 0.97


def test_holm_and_bonferroni_known_inputs():
    pvalues = [0.01, 0.04, 0.03]
    assert adjust_pvalues(pvalues, Correction.HOLM) == pytest.approx([0.03, 0.06, 0.06])
    assert adjust_pvalues(pvalues, Correction.BONFERRONI) == pytest.approx([0.03, 0.12, 0.09])
    assert adjust_pvalues([0.5, 0.6], Correction.BONFERRONI) == [1.0, 1.0]
    assert adjust_pvalues([0.02], Correction.HOLM) == pytest.approx([0.02])
    assert adjust_pvalues([], Correction.HOLM) == []


def test_kl_divergence_known_value_and_invariances():
    # softmax([0, ln 3]) = [.25, .75] against [.5, .5].
    expected = 0.25 * math.log(0.5) + 0.75 * math.log(1.5)
    assert kl_divergence_choices([0.0, math.log(3)], [-2.0, -2.0]) == pytest.approx(expected)
    assert kl_divergence_choices([-1.0, -2.0, -3.0], [-11.0, -12.0, -13.0]) == pytest.approx(0)
    assert kl_divergence_choices([-1.0, -5.0], [-5.0, -1.0]) > 3
    with pytest.raises(ValueError):
        kl_divergence_choices([-1.0, -2.0], [-1.0])


def test_choice_kl_and_top1_are_row_wise():
    base = np.array([[-1.0, -2.0], [-1.0, -2.0]])
    cand = np.array([[-1.0, -2.0], [-2.0, -1.0]])
    kls = choice_kl(base, cand)
    assert kls[0] == pytest.approx(0) and kls[1] > 0
    assert top1_agreement(base, cand).tolist() == [True, False]


def test_false_alarm_rate_under_the_null():
    """Same accuracy, 15% discordant pairs at n=500: each test alarms at most alpha + 0.01."""
    rng = np.random.default_rng(2024)
    counts = rng.multinomial(500, [0.075, 0.075, 0.85], size=4000)
    b, c = counts[:, 0], counts[:, 1]
    for test in McNemar:
        alarms = np.mean(mcnemar_pvalue(b, c, test) < 0.05)
        # 4000 runs: the standard error of a 5% rate is 0.0034.
        assert 0.02 <= alarms <= 0.06, (test, alarms)


def test_pvalues_take_arrays_and_give_the_scalar_answers():
    b, c = np.array([28, 10, 0]), np.array([19, 2, 0])
    for test in McNemar:
        expected = [mcnemar_pvalue(int(x), int(y), test) for x, y in zip(b, c, strict=True)]
        assert mcnemar_pvalue(b, c, test).tolist() == pytest.approx(expected, rel=1e-12)
    assert isinstance(mcnemar_pvalue(3, 1), float)
    with pytest.raises(ValueError):
        mcnemar_pvalue(np.array([1, -1]), np.array([0, 0]))


# Planning: the minimum detectable effect and the n that would decide, for each rule.


def test_plans_at_max_drop_zero_are_connors_n():
    # z_0.95 = 1.6449, z_0.8 = 0.8416: (1.6449 sqrt(.15) + 0.8416 sqrt(.1484))^2 / .0016 = 577.6
    for rule in Rule:
        assert accuracy_n(0.15, 0.04, 0.0, rule, 0.05, 0.8) == 578
        # Two units under Holm or Bonferroni plan at alpha / 2: z = 1.96 -> 733.5.
        assert accuracy_n(0.15, 0.04, 0.0, rule, 0.025, 0.8) == 734
    assert accuracy_n(0.15, 0.02, 0.02, Rule.MARGIN, 0.05, 0.8) is None


@pytest.mark.parametrize("rule", list(Rule))
def test_mde_and_n_invert_each_other(rule):
    n = accuracy_n(0.15, 0.04, 0.02, rule, 0.05, 0.8)
    mde = accuracy_mde(n, 0.15, 0.02, rule, 0.05, 0.8)
    assert mde == pytest.approx(0.04, abs=2e-4)
    assert accuracy_power(n, 0.15, 0.04, 0.02, rule, 0.05) == pytest.approx(0.8, abs=0.002)
    assert accuracy_mde(n // 2, 0.15, 0.02, rule, 0.05, 0.8) > mde
    assert accuracy_mde(1, 0.15, 0.02, rule, 0.05, 0.8) is None


def test_the_change_rule_plan_includes_the_max_drop_condition():
    # Half a point above max_drop, Connor's n (max_drop ignored) has only ~70% power.
    connor = accuracy_n(0.15, 0.025, 0.0, Rule.CHANGE, 0.05, 0.8)
    planned = accuracy_n(0.15, 0.025, 0.02, Rule.CHANGE, 0.05, 0.8)
    assert planned > 2 * connor
    assert accuracy_power(connor, 0.15, 0.025, 0.02, Rule.CHANGE, 0.05) < 0.75


@pytest.mark.parametrize("rule", list(Rule))
@pytest.mark.parametrize("drop", [0.03, 0.04])
def test_power_at_the_planned_n_is_the_plan(rule, drop):
    """Simulated P(REGRESSION) at the planned n, through the gate's own decision code."""
    n = accuracy_n(operating.DISCORDANCE, drop, operating.MAX_DROP, rule, operating.ALPHA, 0.8)
    rng = np.random.default_rng(11)
    shares = [(operating.DISCORDANCE + drop) / 2, (operating.DISCORDANCE - drop) / 2]
    counts = rng.multinomial(n, [*shares, 1 - operating.DISCORDANCE], size=1500)
    regressed = regressions(counts[:, 0], counts[:, 1], n, rule)
    # 1500 runs: the standard error of an 80% rate is 0.0103; 0.04 is almost four of them.
    assert regressed.mean() == pytest.approx(0.8, abs=0.04), (n, regressed.mean())


def test_shift_plans_by_hand():
    # ((1.6449 + 0.8416) * 0.2 / 0.02)^2 = 618.3
    assert shift_n(0.2, 0.02, 0.0, Rule.MARGIN, 0.05, 0.8) == 619
    assert shift_n(0.2, 0.04, 0.02, Rule.MARGIN, 0.05, 0.8) == 619
    assert shift_n(0.2, 0.02, 0.02, Rule.CHANGE, 0.05, 0.8) is None
    se = 0.2 / math.sqrt(619)
    assert shift_mde(se, 0.02, Rule.MARGIN, 0.05, 0.8) == pytest.approx(0.04, abs=1e-4)
    # The change rule: significant and beyond max_drop, whichever asks more.
    assert shift_mde(se, 0.02, Rule.CHANGE, 0.05, 0.8) == pytest.approx(0.02 + 0.8416 * se, 1e-4)
    # With a large standard error the significance condition binds: (z_0.95 + z_0.80) x se,
    # closed-form normal quantiles, the same on every CPU.
    z_sum = float(norm.ppf(0.95) + norm.ppf(0.8))
    assert shift_mde(0.02, 0.02, Rule.CHANGE, 0.05, 0.8) == pytest.approx(z_sum * 0.02, 1e-4)


# Score units (TruthfulQA MC2): the bootstrap-t test of a mean score.


def test_mean_test_estimates_and_is_deterministic():
    rng = np.random.default_rng(3)
    base = rng.uniform(0, 1, 200)
    cand = np.clip(base - 0.03 + rng.normal(0, 0.1, 200), 0, 1)
    result = paired_mean_test(base, cand, margin=0.02)
    assert result == paired_mean_test(base, cand, margin=0.02)  # fixed seed: one report
    assert result.delta == pytest.approx(np.mean(cand - base))
    assert result.se == pytest.approx(np.std(cand - base, ddof=1) / math.sqrt(200))
    # Near-normal differences: bootstrap-t agrees with the t test.
    t_test = ttest_1samp(cand - base, 0.0, alternative="less")
    assert result.pvalue == pytest.approx(t_test.pvalue, abs=0.01)
    assert result.ci[0] < result.delta < result.ci[1]
    assert result.margin_pvalue > result.pvalue
    same = paired_mean_test(base, base)
    assert (same.delta, same.pvalue, same.margin_pvalue, same.ci) == (0.0, 1.0, 1.0, (0.0, 0.0))
    assert paired_mean_test([], []).n == 0


SKEWED = {
    # Rare large gains: 5% of examples gain 0.3, the rest lose a little; mean 0.
    "rare large gains": lambda rng, n: (
        np.where(rng.random(n) < 0.05, 0.3, 0.0) + rng.normal(0, 0.02, n) - 0.015
    ),
    "exponential": lambda rng, n: rng.exponential(0.1, n) - 0.1,
    "beta(0.3, 3)": lambda rng, n: rng.beta(0.3, 3, n) - 0.3 / 3.3,
}


@pytest.mark.parametrize("name", list(SKEWED))
def test_mean_test_size_with_right_skewed_differences(name):
    """Issue 12: the paired t test reached size 0.09-0.11 here; bootstrap-t stays <= 0.06."""
    rng = np.random.default_rng(17)
    alarms = t_alarms = 0
    runs = 800
    for i in range(runs):
        diffs = SKEWED[name](rng, 100)
        result = paired_mean_test(np.zeros(100), diffs, resamples=499, seed=i)
        alarms += result.pvalue < 0.05
        t_alarms += ttest_1samp(diffs, 0.0, alternative="less").pvalue < 0.05
    # 800 runs: the standard error of a 5% rate is 0.008.
    assert alarms / runs <= 0.06, alarms / runs
    assert t_alarms / runs > alarms / runs


def test_mean_test_margin_size_and_power():
    """H0 drop <= 0.02 at its boundary (skewed), and a drop of 0.06: size and power."""
    rng = np.random.default_rng(23)
    at_margin = beyond = 0
    runs = 500
    for i in range(runs):
        diffs = SKEWED["rare large gains"](rng, 200)
        at_margin += (
            paired_mean_test(np.zeros(200), diffs - 0.02, 0.02, 0.05, 499, i).margin_pvalue < 0.05
        )
        beyond += (
            paired_mean_test(np.zeros(200), diffs - 0.06, 0.02, 0.05, 499, i).margin_pvalue < 0.05
        )
    assert at_margin / runs <= 0.06
    assert beyond / runs > 0.8


# Perplexity units: the sign-flip test of the corpus log-ratio.


def test_corpus_test_known_values():
    base = np.full(10, -200.0)
    weights = np.full(10, 100.0)
    worse = corpus_ratio_test(base, base - 2.0, weights)
    # exp(-Σll/Σw) goes from e^2 to e^2.02.
    assert worse.baseline == pytest.approx(math.e**2)
    assert worse.relative_change == pytest.approx(math.expm1(0.02))
    # All 10 documents worse: only the no-flip pattern (1 in 2^10) ties the data.
    assert worse.pvalue == pytest.approx(1 / 1024, abs=0.002)
    better = corpus_ratio_test(base, base + 2.0, weights)
    assert better.relative_change < 0 and better.pvalue == 1.0
    same = corpus_ratio_test(base, base, weights)
    assert same.relative_change == 0 and same.pvalue == 1.0 and same.ci == (0.0, 0.0)
    assert corpus_ratio_test([], [], []).n == 0
    with pytest.raises(ValueError):
        corpus_ratio_test([-1.0], [-1.0], [0.0])


def test_corpus_test_interval_inverts_the_test_and_is_deterministic():
    rng = np.random.default_rng(4)
    weights = np.round(rng.lognormal(6, 1, 80)) + 10
    extra = weights * (0.01 + rng.standard_t(3, 80) * 0.01)
    result = corpus_ratio_test(np.zeros(80), -extra, weights, margin=0.02)
    assert result == corpus_ratio_test(np.zeros(80), -extra, weights, margin=0.02)
    low, high = result.ci
    assert low < result.relative_change < high
    # Just inside the interval the one-sided test does not reject at 2.5%; just below, it does.
    inside = corpus_ratio_test(np.zeros(80), -extra, weights, margin=low + 1e-9)
    outside = corpus_ratio_test(np.zeros(80), -extra, weights, margin=low - 1e-3)
    assert inside.margin_pvalue >= 0.025 > outside.margin_pvalue


def _documents(rng, n, sigma=1.0):
    """Heavy-tailed document lengths (words), as in WikiText: tens to thousands."""
    return np.round(rng.lognormal(6, sigma, n)) + 10


NULLS = {
    # Per-token noise that adds up over a document: symmetric, heavy-tailed.
    "t3 noise per token": lambda rng, w: np.sqrt(w) * rng.standard_t(3, w.size) * 0.05,
    # A per-word change that differs by document, heavy-tailed (t with 2.5 df).
    "t2.5 change per document": lambda rng, w: w * rng.standard_t(2.5, w.size) * 0.01,
    # Asymmetric: a quarter of documents much worse, the rest a little better, corpus 0.
    "mixed signs": lambda rng, w: (
        w * (np.where(rng.random(w.size) < 0.25, 0.03, -0.01) + rng.normal(0, 0.003, w.size))
    ),
}


@pytest.mark.parametrize("name", list(NULLS))
@pytest.mark.parametrize("n", [62, 200])
def test_corpus_test_size_under_heavy_tailed_nulls(name, n):
    rng = np.random.default_rng(31)
    runs, alarms = 1500, 0
    for i in range(runs):
        weights = _documents(rng, n, sigma=1.2)
        extra = NULLS[name](rng, weights)
        alarms += (
            corpus_ratio_test(np.zeros(n), -extra, weights, resamples=499, seed=i).pvalue < 0.05
        )
    # 1500 runs: the standard error of a 5% rate is 0.006.
    assert alarms / runs <= 0.06, alarms / runs


def _constructed(case, rng, n):
    """Issue 12's two cases: per-word perplexity factors that raise the corpus perplexity."""
    weights = _documents(rng, n, sigma=1.2)
    if case == "quarter +14%":
        factor = np.where(rng.random(n) < 0.25, 1.14, 0.985)
    else:
        factor = np.where(weights >= np.quantile(weights, 0.8), 1.06, 0.99)
    per_word = np.log(factor) + rng.normal(0, 0.005, n)
    return weights, weights * per_word


@pytest.mark.parametrize("case", ["quarter +14%", "longest fifth +6%"])
def test_constructed_cases_are_flagged_once_there_are_enough_documents(case):
    """Issue 12: Wilcoxon flagged these in 0-1% of runs; the corpus test catches them."""
    rng = np.random.default_rng(41)
    flagged = {rule: 0 for rule in Rule}
    increases = []
    runs = 200
    for i in range(runs):
        weights, extra = _constructed(case, rng, 620)
        result = corpus_ratio_test(np.zeros(620), -extra, weights, 0.02, 0.05, 999, i)
        increases.append(result.relative_change)
        for rule in Rule:
            rule_p = result.margin_pvalue if rule is Rule.MARGIN else result.pvalue
            regressed = regression(rule, 0.05, rule_p, result.relative_change, 0.02)
            undecided = inconclusive(regressed, 0.05, result.pvalue, result.ci[1], 0.02)
            flagged[rule] += bool(regressed or undecided)
    assert np.mean(increases) > 0.02
    for rule in Rule:
        assert flagged[rule] / runs >= 0.9, (rule, flagged[rule] / runs)
