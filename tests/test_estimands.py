"""The estimands for small changes: `estimand: p_gold` (a multiple-choice unit paired on the
gold choice's probability instead of right/wrong, regress.stats.BoundedDrop) and `max_kl` (the
divergence rule, regress.gate.divergence), both tested by betting on bounded values. Pure logic
on crafted records; sizes under skew are checked by seeded simulation."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy.special import softmax
from test_compare import info, record, run

from regress.core.errors import BadInput
from regress.core.records import Status
from regress.gate.betting_order import betting_order, record_key
from regress.gate.compare import compare, judge
from regress.gate.divergence import KL_CAP
from regress.gate.outcomes import gold_probability
from regress.gate.pairing import pair
from regress.gate.policy import Estimand, Policy, UnitPolicy, load_policy
from regress.gate.results import UnitKind, Verdict
from regress.report.markdown import render_markdown
from regress.stats import (
    BoundedDrop,
    Direction,
    SequentialDesign,
    Side,
    betting_n,
    bounded_mean_pvalue,
)
from regress.stats.bounded_mean import TOLERANCE

ALPHA = 0.05
P_GOLD = Policy(units={"arc": UnitPolicy(estimand=Estimand.P_GOLD, max_drop=0.02)})


def _chose(task: str, doc_id: int, logliks: list[float], target: int = 0):
    """A multiple-choice record whose model gave these per-choice log-likelihoods."""
    pred = int(np.argmax(logliks))
    base = record(task, doc_id, int(pred == target))
    return dataclasses.replace(base, target=target, pred=pred, scores={"loglik": logliks})


def _runs(base_logliks, cand_logliks):
    base = [_chose("arc", i, ll) for i, ll in enumerate(base_logliks)]
    cand = [_chose("arc", i, ll) for i, ll in enumerate(cand_logliks)]
    return run("base", {"arc": base}, [info("arc")]), run("cand", {"arc": cand}, [info("arc")])


def test_gold_probability_is_the_softmax_of_the_choices_at_the_gold_ones():
    logliks = [-4.2, -3.4, -3.1, -2.2]
    expected = softmax(logliks)
    assert gold_probability(_chose("arc", 0, logliks, target=2)) == pytest.approx(expected[2])
    several = dataclasses.replace(_chose("arc", 0, logliks), target=[1, 3])
    assert gold_probability(several) == pytest.approx(expected[1] + expected[3])
    assert gold_probability(record("arc", 0, 0, status=Status.ERROR)) == 0.0


def test_p_gold_refuses_a_record_without_choices_in_one_line():
    scored = dataclasses.replace(record("gen", 3, 1), scores={})
    with pytest.raises(BadInput, match=r"^task gen doc 3: p_gold needs a multiple-choice record"):
        gold_probability(scored)


def test_the_policy_names_the_estimand_and_refuses_an_unknown_one(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text("units:\n  arc: {estimand: p_gold, max_drop: 0.01}\n")
    policy = load_policy(path)
    assert policy.for_unit("arc").estimand is Estimand.P_GOLD
    assert policy.to_dict()["units"]["arc"]["estimand"] == "p_gold"
    path.write_text("units:\n  arc: {estimand: kl}\n")
    with pytest.raises(BadInput, match=r"units\.arc\.estimand must be one of accuracy, p_gold"):
        load_policy(path)


def test_a_small_shift_of_every_answer_is_shown_by_p_gold_but_flips_nothing():
    """Every gold choice loses about 6 points of probability while every answer stays: 0/1
    accuracy sees no change at all, p_gold shows a drop beyond its 2-point margin."""
    rng = np.random.default_rng(3)
    base = [[float(x) for x in rng.normal([0.0, -1.5, -2.0, -2.5], 0.2)] for _ in range(400)]
    cand = [[ll[0] - 0.3, *ll[1:]] for ll in base]
    b, c = _runs(base, cand)
    accuracy = compare(b, c, Policy(units={"arc": UnitPolicy(max_drop=0.02)})).units[0]
    assert (accuracy.b, accuracy.c) == (0, 0) and accuracy.verdict is Verdict.PASS
    result = compare(b, c, P_GOLD)
    [unit] = result.units
    drops = [gold_probability(x) - gold_probability(y) for x, y in zip(*(r.records["arc"]
             for r in (b, c)), strict=True)]  # fmt: skip
    assert unit.kind is UnitKind.SCORE and unit.metric == "p_gold"
    assert unit.delta == pytest.approx(-float(np.mean(drops)))
    assert unit.verdict is Verdict.REGRESSION and unit.bounds.at_least > 0.02
    assert result.verdict is Verdict.REGRESSION
    assert "| arc (p_gold) | 400 |" in render_markdown(result)


def test_an_unchanged_candidate_passes_on_p_gold():
    rng = np.random.default_rng(4)
    base = [[float(x) for x in rng.normal([0.0, -1.0, -1.5], 0.5)] for _ in range(400)]
    cand = [[x + float(rng.normal(0, 0.02)) for x in ll] for ll in base]
    [unit] = compare(*_runs(base, cand), P_GOLD).units
    assert unit.verdict is Verdict.PASS and unit.bounds.at_most < 0.02


def test_an_identical_candidate_too_few_to_pass_is_told_the_betting_tests_own_n():
    """100 examples whose gold probabilities did not move cannot be shown within a 2-point
    p_gold margin: the betting test's stakes set a floor of about 210. The n to PASS is that
    test's own plan (regress.stats.betting_n), where the normal approximation of a spread of
    0 said 2."""
    base = [[0.0, -1.0, -2.0] for _ in range(100)]
    [unit] = compare(*_runs(base, base), P_GOLD).units
    assert unit.verdict is Verdict.INCONCLUSIVE and unit.delta == 0
    floor = betting_n(np.zeros(100), 0.0, 0.02, Direction.BELOW, ALPHA, 0.8, -1.0, 1.0)
    assert unit.n_to_pass == floor and floor > 200
    assert bounded_mean_pvalue(np.zeros(floor), 0.02, "below", -1.0, 1.0) < ALPHA


def test_a_sequential_look_plans_no_n_to_decide(monkeypatch):
    """A sequential check states no n to decide (checks/sequential.py), so its looks do not
    pay for the betting test's plan: the same p_gold unit judged fixed plans it, at a look
    the plan is never run and the unit's verdict and p-values are the fixed one's, repeated."""
    base = [[0.0, -1.0, -2.0] for _ in range(100)]
    b, c = _runs(base, base)
    paired = pair(b, c, False)
    [fixed] = judge(b, c, paired, P_GOLD).units
    assert fixed.n_to_pass is not None  # no drop seen: the plan is the n to PASS
    planned = []
    monkeypatch.setattr("regress.gate.units.betting_n", lambda *a: planned.append(a))
    design = SequentialDesign()
    policy = dataclasses.replace(P_GOLD, sequential=design)
    [looked] = judge(b, c, paired, policy, look=0).units
    assert planned == [] and looked.n_needed is None and looked.n_to_pass is None
    assert looked.pass_pvalue == design.repeated_pvalue(fixed.pass_pvalue, 0)
    assert looked.verdict is fixed.verdict is Verdict.INCONCLUSIVE


def test_p_gold_refuses_a_unit_that_is_not_multiple_choice():
    records = [record("gen", i, None, metrics={"score": 0.5}) for i in range(5)]
    side = run("base", {"gen": records}, [info("gen", metric="score")])
    policy = Policy(units={"gen": UnitPolicy(estimand=Estimand.P_GOLD)})
    with pytest.raises(BadInput, match="^unit gen: estimand p_gold needs multiple-choice tasks"):
        compare(side, side, policy)


@pytest.mark.parametrize("skew", [1, -1])
@pytest.mark.parametrize("n", [100, 400])
def test_the_betting_test_holds_its_size_at_the_margin_under_skew(skew, n):
    """Drops whose true mean is exactly the 2-point margin, made of many tiny moves and a few
    large ones (1-3% of examples move 90 points one way): neither a REGRESSION (drop shown
    beyond) nor a PASS (shown within) comes out more often than alpha. 4,000 runs: two
    standard errors are 0.007."""
    margin, rare = 0.02, 0.9 * skew
    common = margin - 0.03 * skew
    share = (margin - common) / (rare - common)
    rng = np.random.default_rng(11)
    runs_ = 4000
    drops = np.where(rng.random((runs_, n)) < share, rare, common)
    assert abs(drops.mean() - margin) < 0.005
    beyond = bounded_mean_pvalue(drops, margin, "above", -1.0, 1.0) < ALPHA
    within = bounded_mean_pvalue(drops, margin, "below", -1.0, 1.0) < ALPHA
    limit = ALPHA + 2 * (ALPHA * (1 - ALPHA) / runs_) ** 0.5
    assert beyond.mean() <= limit and within.mean() <= limit
    # The unit's test object is this very test.
    test = BoundedDrop(drops[0])
    assert test.pvalue(margin, Side.BEYOND) == pytest.approx(
        bounded_mean_pvalue(drops[0], margin, "above", -1.0, 1.0)
    )


def _kl(p_logliks, q_logliks) -> float:
    """KL(p || q) of two choice distributions, written out (the oracle)."""
    p, q = softmax(p_logliks), softmax(q_logliks)
    return float(np.sum(p * np.log(p / q)))


def _kl_policy(max_kl: float = 0.02) -> Policy:
    # A wide max_drop: only the divergence rule can fail these candidates.
    return Policy(units={"arc": UnitPolicy(max_kl=max_kl, max_drop=0.5)})


def test_choices_that_moved_beyond_max_kl_fail_the_gate_though_no_answer_flipped():
    rng = np.random.default_rng(5)
    base = [[float(x) for x in rng.normal([0.0, -2.0, -2.5, -3.0], 0.2)] for _ in range(300)]
    cand = [[ll[0] - 0.9, *ll[1:]] for ll in base]
    result = compare(*_runs(base, cand), _kl_policy())
    [unit], [moved] = result.units, result.divergence
    assert (unit.b, unit.c) == (0, 0) and unit.verdict is Verdict.PASS
    expected = np.mean([_kl(p, q) for p, q in zip(base, cand, strict=True)])
    assert moved.mean_kl == pytest.approx(expected) == pytest.approx(moved.uncapped_kl)
    assert moved.at_cap == 0 and moved.mean_kl > 0.02
    assert moved.verdict is Verdict.REGRESSION and 0.02 < moved.at_least < moved.mean_kl
    assert result.verdict is Verdict.REGRESSION
    text = render_markdown(result)
    assert text.splitlines()[0].startswith("## regress: ❌ REGRESSION in **divergence of arc**")
    assert "### Divergence" in text
    assert result.to_dict()["divergence"][0]["verdict"] == "REGRESSION"


def test_choices_that_barely_moved_pass_within_max_kl():
    rng = np.random.default_rng(6)
    base = [[float(x) for x in rng.normal([0.0, -1.0, -1.5], 0.5)] for _ in range(400)]
    cand = [[x + float(rng.normal(0, 0.02)) for x in ll] for ll in base]
    result = compare(*_runs(base, cand), _kl_policy())
    [moved] = result.divergence
    assert moved.verdict is Verdict.PASS and moved.mean_kl < moved.at_most < 0.02
    assert (
        result.verdict is Verdict.PASS
        and "divergence" not in compare(*_runs(base, cand), Policy()).to_dict()
    )


def test_a_failed_candidate_example_diverges_by_the_cap_and_a_failed_baseline_one_is_left_out():
    base = [[0.0, -1.0]] * 150
    b, c = _runs(base, base)
    failed = dataclasses.replace(c.records["arc"][0], status=Status.ERROR, scores={})
    c.records["arc"][0] = failed
    b.records["arc"][1] = dataclasses.replace(b.records["arc"][1], status=Status.ERROR)
    [moved] = compare(b, c, _kl_policy()).divergence
    assert (moved.n, moved.at_cap) == (149, 1)
    assert moved.mean_kl == pytest.approx(KL_CAP / 149)


@pytest.mark.parametrize(
    ("max_kl", "message"),
    [(1.0, "max_kl must be below 1 nat"), (0.0, "units.arc.max_kl must be a positive number")],
)
def test_max_kl_outside_the_cap_is_refused_in_one_line(tmp_path, max_kl, message):
    path = tmp_path / "policy.yaml"
    path.write_text(f"units:\n  arc: {{max_kl: {max_kl}}}\n")
    base = [[0.0, -1.0]] * 5
    with pytest.raises(BadInput, match=message):
        compare(*_runs(base, base), load_policy(path))


def test_the_kl_test_holds_its_size_at_max_kl_under_skew():
    """Divergences whose true capped mean is exactly max_kl, nearly all tiny and 1.5% at
    the cap: neither side is shown more often than alpha (4,000 runs of 300)."""
    max_kl, tiny = 0.02, 0.005
    share = (max_kl - tiny) / (KL_CAP - tiny)
    rng = np.random.default_rng(12)
    values = np.where(rng.random((4000, 300)) < share, KL_CAP, tiny)
    above = bounded_mean_pvalue(values, max_kl, "above", 0.0, KL_CAP) < ALPHA
    below = bounded_mean_pvalue(values, max_kl, "below", 0.0, KL_CAP) < ALPHA
    limit = ALPHA + 2 * (ALPHA * (1 - ALPHA) / 4000) ** 0.5
    assert above.mean() <= limit and below.mean() <= limit


def _drop_samples(seed: int, count: int, range_: tuple[float, float]) -> list[np.ndarray]:
    """Seeded samples in `range_` of the shapes a gate meets: spread, skewed (a few large
    moves), rounded to ties, constant, and ordered with the large values first (where a
    betting test's wealth peaks early and the whole sample's mean is rejected too)."""
    rng = np.random.default_rng(seed)
    low, high = range_
    width = high - low
    samples = []
    for i in range(count):
        n = int(rng.choice([30, 150, 600, 2000]))
        centre = low + width * rng.uniform(0.4, 0.6) if low < 0 else width * rng.uniform(0, 0.1)
        shape = i % 5
        if shape == 0:
            x = centre + rng.normal(0, width * rng.uniform(0.01, 0.2), n)
        elif shape == 1:
            x = np.where(rng.random(n) < rng.uniform(0.01, 0.05), high * 0.9, centre)
        elif shape == 2:
            x = np.round(centre + rng.normal(0, 0.05 * width, n), 2)
        elif shape == 3:
            x = np.full(n, centre)
        else:
            x = np.sort(centre + rng.exponential(0.05 * width, n))[::-1]
        samples.append(np.clip(x, low, high))
    return samples


@pytest.mark.parametrize(("range_", "seed"), [((-1.0, 1.0), 60), ((0.0, KL_CAP), 61)])
def test_the_betting_p_is_monotone_in_the_margin(range_, seed):
    """The proof in regress.stats.bounded_mean, checked on a grid of margins over seeded
    samples of both estimands' ranges: p of "mean <= margin" never falls as the margin rises,
    p of "mean >= margin" never rises. So the margins a test rejects are one run and its
    bound is that run's edge."""
    low, high = range_
    margins = np.linspace(low, high, 201)
    for x in _drop_samples(seed, 10, range_):
        rows = np.broadcast_to(x, (margins.size, x.size))
        above = bounded_mean_pvalue(rows, margins, Direction.ABOVE, low, high)
        below = bounded_mean_pvalue(rows, margins, Direction.BELOW, low, high)
        assert np.all(np.diff(above) >= 0) and np.all(np.diff(below) <= 0), x.size
        assert above[0] < 1 or np.all(x == low)  # a value above the range's floor refutes it


@pytest.mark.parametrize(("range_", "seed"), [((-1.0, 1.0), 62), ((0.0, KL_CAP), 63)])
def test_bound_and_verdict_agree_for_both_estimands_over_a_seeded_sweep(range_, seed):
    """Seeded samples, both sides, at the unit's alpha and a Holm level: the test rejects
    every margin from the bound outward (up to the range's end) and keeps one a tolerance
    past it, so "the margin lies beyond the bound", which a verdict asks, is what the test
    rejects and a verdict always agrees with its bound."""
    low, high = range_
    step = 2 * TOLERANCE * (high - low)
    for x in _drop_samples(seed, 10, range_):
        test = BoundedDrop(x, low, high)
        for level in (0.05, 0.0125):
            for side in Side:
                bound = test.bound(level, side)
                outward = -1 if side is Side.BEYOND else 1  # the side the test rejects
                end = low if side is Side.BEYOND else high
                if test.pvalue(end, side) >= level:  # nothing rejected: the trivial bound
                    assert bound == end
                    continue
                for margin in np.linspace(bound, end, 7):
                    assert test.pvalue(float(margin), side) < level, (x.size, side, margin)
                assert test.pvalue(bound - outward * step, side) >= level, (x.size, side)


def _arc_order(n: int) -> np.ndarray:
    """The doc_ids of an `arc` unit of n examples in the order the betting tests take them
    (regress.gate.betting_order)."""
    return betting_order([record_key(record("arc", i, 1)) for i in range(n)])


def _betting(by_doc: np.ndarray) -> np.ndarray:
    """An `arc` unit's per-example values, given in doc order, in the betting tests' order."""
    return by_doc[_arc_order(len(by_doc))]


def _gold_runs(drops: np.ndarray):
    """Runs whose gold choices' probabilities drop by `drops`, in the order the betting tests
    take them, no answer flipping: the baseline gives the gold choice 0.9 of a two-choice
    softmax."""
    gold = np.log(0.9 / 0.1)
    base = [[float(gold), 0.0] for _ in drops]
    by_doc = np.empty_like(drops)
    by_doc[_arc_order(len(drops))] = drops
    theirs = 0.9 - by_doc
    cand = [[float(np.log(p / (1 - p))), 0.0] for p in theirs]
    return _runs(base, cand)


def _verdict_by_bounds(threshold: float, at_least: float, at_most: float) -> Verdict:
    """The verdict the bounds shown beside it claim: shown beyond, else shown within."""
    if threshold < at_least:
        return Verdict.REGRESSION
    return Verdict.PASS if threshold > at_most else Verdict.INCONCLUSIVE


def _early_or_not(early: bool) -> np.ndarray:
    """400 seeded drops of a gold choice's probability, the large ones first if `early`."""
    drops = np.clip(np.random.default_rng(64).normal(0.03, 0.05, 400), -0.05, 0.35)
    return np.sort(drops)[::-1] if early else drops


@pytest.mark.parametrize("early", [False, True])
def test_p_gold_verdicts_follow_the_bounds_a_hair_either_side_of_them(early):
    """A p_gold unit gated at a max_drop a hair either side of each of its bounds: the verdict
    is the one the bounds claim, each bound the edge of the margins the betting test rejects
    at the level the gate reports. `early` puts the large drops first, where the test's
    wealth peaks early: the lower bound then exceeds the sample's mean (the bounds may even
    cross), which the old bisection from the mean missed (issue 50)."""
    drops = _early_or_not(early)
    b, c = _gold_runs(drops)
    [unit] = compare(b, c, P_GOLD).units
    pairs = zip(b.records["arc"], c.records["arc"], strict=True)
    by_doc = np.array([gold_probability(x) - gold_probability(y) for x, y in pairs])
    test = BoundedDrop(_betting(by_doc))
    at_least = test.bound(unit.bounds.at_least_level, Side.BEYOND)
    at_most = test.bound(unit.bounds.at_most_level, Side.WITHIN)
    assert (unit.bounds.at_least, unit.bounds.at_most) == (at_least, at_most)
    assert (at_least > float(np.mean(test.drops))) is early
    for max_drop in (at_least - 1e-4, at_least + 1e-4, at_most - 1e-4, at_most + 1e-4):
        policy = Policy(units={"arc": UnitPolicy(estimand=Estimand.P_GOLD, max_drop=max_drop)})
        [gated] = compare(b, c, policy).units
        assert gated.verdict is _verdict_by_bounds(max_drop, at_least, at_most), gated.reason


def _divergences(base, cand) -> np.ndarray:
    """Each example's choice divergence, by the oracle, in the order the test takes them."""
    pairs = zip(base.records["arc"], cand.records["arc"], strict=True)
    return _betting(np.array([_kl(x.scores["loglik"], y.scores["loglik"]) for x, y in pairs]))


@pytest.mark.parametrize("early", [False, True])
def test_divergence_verdicts_follow_the_bounds_a_hair_either_side_of_them(early):
    """The same for max_kl on such runs' choice divergences. Before issue 50's fix the
    early-peaking sample, gated at a max_kl of 0.028, was a REGRESSION printed "at least
    0.0258" (its mean) "> max_kl 0.028"; its bound is 0.0310."""
    b, c = _gold_runs(np.clip(1.5 * _early_or_not(early), -0.05, 0.35))
    test = BoundedDrop(_divergences(b, c), 0.0, KL_CAP)
    [moved] = compare(b, c, _kl_policy(0.01)).divergence
    at_least = test.bound(moved.at_least_level, Side.BEYOND)
    at_most = test.bound(moved.at_most_level, Side.WITHIN)
    assert moved.at_least == pytest.approx(at_least, abs=1e-9)
    assert moved.at_most == pytest.approx(at_most, abs=1e-9)
    assert (at_least > moved.mean_kl) is early
    for max_kl in (at_least - 1e-5, at_least + 1e-5, at_most - 1e-5, at_most + 1e-5):
        [gated] = compare(b, c, _kl_policy(max_kl)).divergence
        assert gated.verdict is _verdict_by_bounds(max_kl, at_least, at_most), gated.reason


def test_an_undecided_divergence_states_the_betting_tests_own_n_to_decide():
    """An INCONCLUSIVE max_kl unit says how many examples a new check would need, planned by
    resampling its own betting test (regress.stats.betting_n): within max_kl, to show a
    candidate diverging like this one within it; above, to detect a mean of twice max_kl. A
    sequential look states neither (its check never does)."""
    b, c = _gold_runs(np.full(150, 0.03))  # every answer a little less sure: mean KL 0.004
    result = compare(b, c, _kl_policy(0.02))
    [moved] = result.divergence
    divergences = _divergences(b, c)
    floor = betting_n(divergences, divergences.mean(), 0.02, Direction.BELOW, ALPHA, 0.8, 0, 1)
    assert moved.verdict is Verdict.INCONCLUSIVE and moved.n_needed is None
    assert moved.n_to_pass == floor and floor > 150
    said = f"a new sequential check over about {floor:,} or more examples"
    assert said in moved.reason and "could show a candidate diverging like this one" in moved.reason
    assert said in render_markdown(result).splitlines()[0]
    assert result.to_dict()["divergence"][0]["n_to_pass"] == floor

    # Five answers of sixty lose most of their confidence: a mean of 0.03, not shown above 0.02.
    b, c = _gold_runs(np.r_[np.zeros(55), np.full(5, 0.4)])
    policy = dataclasses.replace(_kl_policy(0.02), min_examples=20)
    [moved] = compare(b, c, policy).divergence
    divergences = _divergences(b, c)
    needed = betting_n(divergences, 0.04, 0.02, Direction.ABOVE, ALPHA, 0.8, 0, 1)
    assert moved.verdict is Verdict.INCONCLUSIVE and moved.mean_kl > 0.02
    assert moved.n_needed == needed and needed > 60 and moved.n_to_pass is None
    assert f"a new check over about {needed:,} examples would detect a mean KL of 0.04" in (
        moved.reason
    )

    # Never fewer than min_examples, under which every check is INCONCLUSIVE.
    b0, c0 = _gold_runs(np.zeros(50))
    [unchanged] = compare(b0, c0, _kl_policy(0.5)).divergence
    assert betting_n(np.zeros(50), 0.0, 0.5, Direction.BELOW, ALPHA, 0.8, 0, 1) < 100
    assert unchanged.verdict is Verdict.INCONCLUSIVE and unchanged.n_to_pass == 100

    sequential = dataclasses.replace(policy, sequential=SequentialDesign())
    [looked] = judge(b, c, pair(b, c, False), sequential, look=0).divergence
    assert looked.verdict is Verdict.INCONCLUSIVE
    assert looked.n_needed is None and looked.n_to_pass is None and "about" not in looked.reason


def test_a_sequential_look_reads_the_divergence_by_its_repeated_pvalues():
    """At a look of a sequential check the rule's two p-values are their repeated p-values
    and its bounds are inverted at the look's nominal levels, so bound and verdict still
    agree (the two-sided rules' shared `repeated`, regress.gate.rule.TwoSided)."""
    design = SequentialDesign()
    b, c = _gold_runs(np.clip(1.5 * _early_or_not(False), -0.05, 0.35))
    paired = pair(b, c, False)
    [fixed] = judge(b, c, paired, _kl_policy(0.015)).divergence
    policy = dataclasses.replace(_kl_policy(0.015), sequential=design)
    for look in range(len(design.looks)):
        [moved] = judge(b, c, paired, policy, look=look).divergence
        assert moved.fail_pvalue == design.repeated_pvalue(fixed.fail_pvalue, look)
        assert moved.pass_pvalue == design.repeated_pvalue(fixed.pass_pvalue, look)
        assert moved.at_least_level == pytest.approx(
            design.nominal_level(fixed.at_least_level, look)
        )
        at_least = BoundedDrop(_divergences(b, c), 0.0, KL_CAP).bound(
            moved.at_least_level, Side.BEYOND
        )
        assert moved.at_least == at_least
        assert (moved.verdict is Verdict.REGRESSION) is (at_least > 0.015)


def _blocked_gold_runs(seed: int, n: int = 200):
    """A p_gold unit of two tasks stored one after the other: every example of `a` loses 8
    points of its gold choice's probability and every one of `b` gains 8 (each give or take
    1) of the baseline's 70%, so the unit's mean moves by about 0 and no answer flips: a
    REGRESSION beyond 2 points is a false alarm."""
    rng = np.random.default_rng(seed)
    drops = {"a": 0.08 + rng.normal(0, 0.01, n), "b": -0.08 + rng.normal(0, 0.01, n)}
    base_records, cand_records = {}, {}
    for task, moved in drops.items():
        base_records[task] = [_chose(task, i, [float(np.log(0.7 / 0.3)), 0.0]) for i in range(n)]
        cand_records[task] = [
            _chose(task, i, [float(np.log(p / (1 - p))), 0.0]) for i, p in enumerate(0.7 - moved)
        ]
    infos = [info("a", "mix"), info("b", "mix")]
    return run("base", base_records, infos), run("cand", cand_records, infos), drops


def test_a_unit_stored_task_by_task_is_bet_on_in_an_order_the_examples_fix():
    """Bet on in the stored order, the first task's examples, all moved one way, carry the
    wealth past 1/alpha though the unit's mean did not move: a false REGRESSION in every one
    of 20 seeded runs. The gate bets on them in the order their names hash to (gate/
    betting_order.py), which interleaves the tasks: no false alarm in any of the 20."""
    policy = Policy(units={"mix": UnitPolicy(estimand=Estimand.P_GOLD, max_drop=0.02)})
    stored = gated = 0
    for seed in range(20):
        b, c, drops = _blocked_gold_runs(seed)
        as_stored = BoundedDrop(np.concatenate([drops["a"], drops["b"]]))
        stored += as_stored.pvalue(0.02, Side.BEYOND) < ALPHA
        [unit] = compare(b, c, policy).units
        assert abs(unit.delta) < 0.01
        gated += unit.verdict is Verdict.REGRESSION
    assert (stored, gated) == (20, 0)


def test_the_betting_tests_give_the_same_answer_whatever_order_the_records_are_stored_in():
    """p_gold and max_kl on a group unit whose records are stored in doc order, reversed and
    shuffled: the same p-values and bounds, since the examples fix the order bet in."""
    b, c, _ = _blocked_gold_runs(0, 60)
    policy = Policy(units={"mix": UnitPolicy(estimand=Estimand.P_GOLD, max_drop=0.02, max_kl=0.01)})
    seen = set()
    for shuffle in (
        lambda r: r,
        lambda r: r[::-1],
        lambda r: list(np.random.default_rng(3).permutation(r)),
    ):
        stored = {task: shuffle(records) for task, records in b.records.items()}
        result = compare(run("base", stored, list(b.manifest.tasks.values())), c, policy)
        [unit], [moved] = result.units, result.divergence
        seen.add((unit.pvalue, unit.pass_pvalue, unit.bounds, moved.fail_pvalue, moved.at_most))
    assert len(seen) == 1


@pytest.mark.parametrize("side", ["above", "below"])
def test_the_betting_tests_hold_their_size_across_the_default_designs_looks(side):
    """At a look of a sequential check a betting test's p-value is read against the look's
    nominal level, which the design computes for a normal statistic; over the default
    design's three looks those levels add up to 0.056, above alpha. Measured instead, as the
    gate runs it: a look's examples are the first of the pool's seeded order, bet on in the
    order their names hash to (random keys here). Drops whose true mean is the 2-point margin,
    shaped six ways (symmetric, skewed either way, the range's two ends, two values, uniform),
    1,000 examples each run: the share of runs shown beyond the margin (above) or within it
    (below) at any look stays within alpha (2,000 runs per shape; two standard errors:
    0.01)."""
    design, margin, runs_, n = SequentialDesign(), 0.02, 2000, 1000
    levels = [design.nominal_level(ALPHA, look) for look in range(len(design.looks))]
    assert sum(levels) > ALPHA
    rng = np.random.default_rng(21)
    shapes = {
        "symmetric": lambda: rng.normal(margin, 0.05, (runs_, n)),
        "rare gains": lambda: np.where(rng.random((runs_, n)) < 0.05 / 0.93, 0.9, -0.03),
        "rare losses": lambda: np.where(rng.random((runs_, n)) < 0.01 / 0.93, -0.9, 0.03),
        "ends": lambda: np.where(rng.random((runs_, n)) < (1 + margin) / 2, 1.0, -1.0),
        "two values": lambda: np.where(rng.random((runs_, n)) < margin / 0.5, 0.5, 0.0),
        "uniform": lambda: rng.uniform(margin - 0.5, margin + 0.5, (runs_, n)),
    }
    for name, draw in shapes.items():
        drops = np.clip(draw(), -1.0, 1.0)
        keys = rng.random((runs_, n))
        shown = np.zeros(runs_, dtype=bool)
        for look, fraction in enumerate(design.looks):
            m = math.ceil(n * fraction)
            seen = np.take_along_axis(drops[:, :m], np.argsort(keys[:, :m], axis=1), axis=1)
            shown |= bounded_mean_pvalue(seen, margin, side, -1.0, 1.0) < levels[look]
        assert shown.mean() <= ALPHA + 0.01, (name, shown.mean())
