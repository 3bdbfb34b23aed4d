"""The proxy estimator (regress.stats.stratified) and allocation, by seeded simulation.

A synthetic parent suite of 2,400 examples in five margin strata, whose flip rates follow
FACTS.md's measurement of real requantizations (answers change far more where the reference
was unsure). Each replicate draws the parent suite from a superpopulation, then a proxy of it
by stratified sampling without replacement, exactly as `regress proxy build` samples.
"""

from __future__ import annotations

import numpy as np
import pytest

from regress.core.errors import BadInput
from regress.proxy.build import allocate
from regress.stats import Test as McNemar
from regress.stats import mcnemar_pvalue, moments, pvalues, stratified_test

POPULATION = np.array([480, 480, 480, 480, 480])
FLIPS = np.array([0.32, 0.15, 0.08, 0.04, 0.02])
"""Per stratum, least sure first: FACTS.md's Q4_0 (32% of the lowest fifth, 2% of the top)."""
RARE = np.array([0.05, 0.01, 0.003, 0.0, 0.0])
"""A near-lossless candidate (Q8_0 changed answers only in the lowest fifth)."""
BUDGET = 800
Z95 = 1.959964


def _sizes(flips: np.ndarray) -> np.ndarray:
    return np.array(allocate(list(POPULATION), list(POPULATION * np.sqrt(flips)), BUDGET, 10))


def _replicates(flips: np.ndarray, drop: float, runs: int, seed: int):
    """(true parent Δ, b, c) per replicate: parent from the superpopulation, then the proxy."""
    rng = np.random.default_rng(seed)
    sizes = _sizes(flips)
    spread = drop * flips / np.sum(flips * POPULATION / POPULATION.sum())
    p_b, p_c = (flips + spread) / 2, (flips - spread) / 2
    big_b = rng.binomial(POPULATION, p_b, size=(runs, len(flips)))
    big_c = rng.binomial(POPULATION - big_b, p_c / (1 - p_b))
    true = (big_c - big_b).sum(axis=1) / POPULATION.sum()
    # A simple random sample of n_h from each stratum: hypergeometric counts of b and c.
    b = rng.hypergeometric(big_b, POPULATION - big_b, sizes)
    c = rng.hypergeometric(big_c, POPULATION - big_b - big_c, sizes - b)
    return true, b, c, sizes


@pytest.mark.parametrize("drop", [0.0, 0.02])
def test_estimate_is_unbiased_and_its_interval_covers_the_parent_suite(drop):
    true, b, c, sizes = _replicates(FLIPS, drop, 20_000, seed=1)
    m = moments(POPULATION, sizes, b, c)
    assert abs(np.mean(m.delta - true)) < 0.001  # bias within 0.1 point
    coverage = np.mean(np.abs(m.delta - true) <= Z95 * np.sqrt(m.var_design))
    assert 0.935 <= coverage <= 0.965
    # The gate's interval is about the Δ the suite itself estimates (-drop), wider.
    assert 0.935 <= np.mean(np.abs(m.delta + drop) <= Z95 * np.sqrt(m.var)) <= 0.965


def test_no_drop_test_has_its_size_and_the_margin_test_holds_alpha_at_the_margin():
    _, b, c, sizes = _replicates(FLIPS, 0.0, 20_000, seed=2)
    change_p, _ = pvalues(moments(POPULATION, sizes, b, c), 0.02)
    assert 0.04 <= np.mean(change_p < 0.05) <= 0.06
    _, b, c, sizes = _replicates(FLIPS, 0.02, 20_000, seed=3)
    _, margin_p = pvalues(moments(POPULATION, sizes, b, c), 0.02)
    assert 0.035 <= np.mean(margin_p < 0.05) <= 0.06


def test_a_near_lossless_candidate_is_not_flagged_and_its_interval_is_not_too_short():
    _, b, c, sizes = _replicates(RARE, 0.0, 20_000, seed=4)
    m = moments(POPULATION, sizes, b, c)
    change_p, _ = pvalues(m, 0.02)
    assert np.mean(change_p < 0.05) <= 0.06
    assert np.mean(np.abs(m.delta) <= Z95 * np.sqrt(m.var)) >= 0.94


def test_one_stratum_taking_every_example_is_mcnemars_test():
    for b, c in [(30, 12), (5, 9), (40, 40)]:
        test = stratified_test([500], [500], [b], [c], margin=0.0)
        assert test.change_pvalue == pytest.approx(mcnemar_pvalue(b, c, McNemar.ASYMPTOTIC))
        assert test.delta == pytest.approx((c - b) / 500)
        assert test.ci_design == pytest.approx((test.delta, test.delta))  # nothing left to sample


def test_a_proxy_is_tighter_than_a_uniform_subset_of_the_same_size():
    """Same budget, same parent: stratified by margin beats a simple random sample."""
    _, b, c, sizes = _replicates(FLIPS, 0.0, 4000, seed=5)
    stratified = np.sqrt(moments(POPULATION, sizes, b, c).var_design).mean()
    rng = np.random.default_rng(6)
    uniform_sizes = rng.multivariate_hypergeometric(POPULATION, BUDGET, size=4000)
    # A uniform sample's design variance is the one-stratum formula at its size.
    pooled = float(np.sum(POPULATION * FLIPS) / POPULATION.sum())
    uniform = np.sqrt((1 - BUDGET / POPULATION.sum()) * pooled / BUDGET)
    assert uniform_sizes.sum(axis=1).tolist() == [BUDGET] * 4000
    assert stratified < uniform


def test_allocation_is_neyman_within_bounds_and_sums_to_the_budget():
    sizes = allocate([100, 100, 1000, 5], [50.0, 10.0, 0.0, 5.0], 150, 10)
    assert sum(sizes) == 150
    assert sizes[3] == 5  # a stratum smaller than the floor is taken whole
    assert sizes[2] == 10  # never flips: the floor, no more
    assert sizes[0] > sizes[1] >= 10
    with pytest.raises(BadInput):
        allocate([100, 100], [1.0, 1.0], 15, 10)
