"""The gate's statistics against independent references, and by simulation."""

import math

import numpy as np
import pytest
from scipy import optimize
from scipy.stats import binomtest, norm, ttest_rel
from statsmodels.stats.contingency_tables import mcnemar

from regress.stats import (
    Correction,
    adjust_pvalues,
    choice_kl,
    connor_n,
    kl_divergence_choices,
    mcnemar_power,
    mcnemar_pvalue,
    paired_diff_ci,
    paired_mean_n,
    paired_mean_test,
    paired_relative_test,
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


def test_connor_n_by_hand():
    # z_0.95 = 1.6449, z_0.8 = 0.8416: (1.6449 sqrt(.15) + 0.8416 sqrt(.1484))^2 / .0016 = 577.6
    assert connor_n(0.15, 0.04) == 578
    # Two units under Holm or Bonferroni plan at alpha / 2: z = 1.96 -> 733.5.
    assert connor_n(0.15, 0.04, units=2) == 734
    assert connor_n(0.15, 0.04, one_sided=False) == 734
    with pytest.raises(ValueError):
        connor_n(0.01, 0.04)


def test_power_inverts_connor():
    n = connor_n(0.16, 0.03, power=0.9)
    assert mcnemar_power(n, 0.16, 0.03) == pytest.approx(0.9, abs=0.002)
    assert mcnemar_power(n - 20, 0.16, 0.03) < 0.9
    assert mcnemar_power(10, 0.04, 0.04) > mcnemar_power(10, 0.2, 0.04)


def test_false_alarm_rate_under_the_null():
    """Same accuracy, 15% discordant pairs at n=500: each test alarms at most alpha + 0.01."""
    rng = np.random.default_rng(2024)
    counts = rng.multinomial(500, [0.075, 0.075, 0.85], size=4000)
    for test in McNemar:
        alarms = np.mean([mcnemar_pvalue(int(b), int(c), test) < 0.05 for b, c, _ in counts])
        # 4000 runs: the standard error of a 5% rate is 0.0034.
        assert alarms <= 0.06, (test, alarms)
        assert alarms >= 0.02, (test, alarms)


def test_power_at_connors_n_is_near_plan():
    discordance, drop = 0.15, 0.04
    n = connor_n(discordance, drop)
    rng = np.random.default_rng(11)
    p_b, p_c = (discordance + drop) / 2, (discordance - drop) / 2
    counts = rng.multinomial(n, [p_b, p_c, 1 - p_b - p_c], size=2000)
    for test in (McNemar.MIDP, McNemar.ASYMPTOTIC):
        power = np.mean([mcnemar_pvalue(int(b), int(c), test) < 0.05 for b, c, _ in counts])
        assert power == pytest.approx(0.8, abs=0.04), (test, power)


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


def test_paired_relative_test_corpus_change_and_direction():
    base = np.full(10, -200.0)
    weights = np.full(10, 100.0)
    worse = paired_relative_test(base, base - 2.0, weights)
    # exp(-Σll/Σw) goes from e^2 to e^2.02.
    assert worse.baseline == pytest.approx(math.e**2)
    assert worse.relative_change == pytest.approx(math.expm1(0.02))
    # All 10 documents worse: the exact signed-rank p is 1 / 2^10.
    assert worse.pvalue == pytest.approx(1 / 1024)
    better = paired_relative_test(base, base + 2.0, weights)
    assert better.relative_change < 0 and better.pvalue == 1.0
    same = paired_relative_test(base, base, weights)
    assert same.relative_change == 0 and same.pvalue == 1.0
    assert paired_relative_test([], [], []).n == 0


def test_paired_mean_test_is_scipys_paired_t_test():
    rng = np.random.default_rng(3)
    base = rng.uniform(0, 1, 200)
    cand = np.clip(base - 0.03 + rng.normal(0, 0.1, 200), 0, 1)
    result = paired_mean_test(base, cand)
    reference = ttest_rel(cand, base, alternative="less")
    assert result.pvalue == pytest.approx(reference.pvalue, rel=1e-10)
    low, high = ttest_rel(cand, base).confidence_interval(0.95)
    assert result.ci == pytest.approx((low, high))
    assert result.delta == pytest.approx(np.mean(cand - base))
    assert result.sd == pytest.approx(np.std(cand - base, ddof=1))
    same = paired_mean_test(base, base)
    assert (same.delta, same.pvalue, same.ci) == (0.0, 1.0, (0.0, 0.0))


def test_paired_mean_n_by_hand():
    # ((1.6449 + 0.8416) * 0.2 / 0.02)^2 = 618.3
    assert paired_mean_n(0.2, 0.02) == 619
    # Three gated units: alpha / 3 -> z = 2.128, (2.9696 * 10)^2 = 881.9
    assert paired_mean_n(0.2, 0.02, units=3) == 882
