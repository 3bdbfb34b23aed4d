"""Decision gates (`gates:`): absolute requirements on the candidate, each two one-sided tests
in the gate's families, never a silent PASS (docs/gate.md#decision-gates). Pure logic on
crafted records; tests/test_cli_gate.py gates a real run."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.stats import beta
from statsmodels.stats.multitest import multipletests
from test_compare import runs
from test_generation_gate import _record, _run
from test_report_html import bench_file

from regress.bench.summaries import bench_models
from regress.checks import candidate_latency
from regress.core.errors import BadInput, ExitCode
from regress.gate.compare import compare, judge
from regress.gate.pairing import pair
from regress.gate.policy import Metric, Policy, Requirement, parse_policy
from regress.gate.requirements import Latency, measure, measure_latency, settle
from regress.gate.results import Verdict
from regress.report.markdown import render_markdown

ALPHA = 0.05


def _binomial_tail(k: int, n: int, p: float, upper: bool) -> float:
    """P(X >= k) (upper) or P(X <= k), summed term by term: the oracle."""
    terms = range(k, n + 1) if upper else range(k + 1)
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in terms)


def _gate(spec, gates, **policy):
    base, cand = runs(spec)
    return compare(base, cand, Policy(gates=tuple(gates), **policy))


def test_pass_at_1_is_two_exact_one_sided_tests_of_the_candidates_accuracy():
    """300 examples: the candidate right on 276 (92%). Against 85% it is shown met; against
    95% shown failing; against 91% neither, whatever its point estimate says."""
    spec = {"arc": (300, 0, 0)}  # candidate = baseline: half right
    base, cand = runs(spec)
    right = sum(r.right for r in cand.records["arc"])
    for bound, verdict in (
        (right / 300 - 0.08, Verdict.PASS),
        (right / 300 + 0.08, Verdict.REGRESSION),
    ):
        result = compare(base, cand, Policy(gates=(Requirement(Metric.PASS_AT_1, bound, "arc"),)))
        [gate] = result.requirements
        assert gate.value == pytest.approx(right / 300) and gate.n == 300
        assert gate.fail_pvalue == pytest.approx(_binomial_tail(right, 300, bound, upper=False))
        assert gate.pass_pvalue == pytest.approx(_binomial_tail(right, 300, bound, upper=True))
        assert gate.verdict is verdict and result.verdict is verdict
        # Its 95% interval is Clopper-Pearson's, from the beta quantiles.
        low, high = beta.ppf(0.025, right, 301 - right), beta.ppf(0.975, right + 1, 300 - right)
        assert gate.ci == pytest.approx((low, high))
    close = compare(
        base, cand, Policy(gates=(Requirement(Metric.PASS_AT_1, right / 300 + 0.01, "arc"),))
    )
    assert close.requirements[0].verdict is Verdict.INCONCLUSIVE
    assert close.verdict is Verdict.INCONCLUSIVE and close.exit_code == ExitCode.OK


def test_a_failing_gate_fails_the_gate_and_its_report_says_which():
    result = _gate({"arc": (400, 0, 0)}, [Requirement(Metric.PASS_AT_1, 0.85, "arc")])
    assert [u.verdict for u in result.units] == [Verdict.PASS]
    assert result.verdict is Verdict.REGRESSION and result.exit_code == ExitCode.REGRESSION
    first = render_markdown(result).splitlines()[0]
    assert first.startswith(
        "## regress: ❌ REGRESSION in decision gate **pass_at_1 of arc >= 85.0%**"
    )
    assert "shown failing" in first
    data = result.to_dict()
    assert data["requirements"][0]["verdict"] == "REGRESSION"
    assert data["policy"]["gates"] == {"pass_at_1": {"unit": "arc", "min": 0.85}}
    assert parse_policy({"gates": data["policy"]["gates"]}).gates == result.policy.gates
    assert "requirements" not in _gate({"arc": (400, 0, 0)}, []).to_dict()
    # So far off that the binomial tail underflows to 0: still a p-value, still a failure.
    [far] = _gate({"arc": (400, 0, 0)}, [Requirement(Metric.PASS_AT_1, 0.999, "arc")]).requirements
    assert far.fail_pvalue == 0.0 and far.verdict is Verdict.REGRESSION


@pytest.mark.parametrize(
    ("requirement", "why"),
    [
        (Requirement(Metric.PASS_AT_1, 0.5, "core"), "the suite has no unit 'core'"),
        (Requirement(Metric.TTFT_MS, 500), "no bench file of the candidate was given"),
        (Requirement(Metric.QUALITY, 4.0), "no unit was scored by a grading judge"),
        (Requirement(Metric.REFUSAL_RATE, 0.02), "not generations"),
    ],
)
def test_a_gate_that_cannot_be_evaluated_is_never_a_pass(requirement, why):
    """Every unit passes; the gate that could not be measured keeps the verdict INCONCLUSIVE."""
    result = _gate({"arc": (3000, 0, 0)}, [requirement])
    assert [u.verdict for u in result.units] == [Verdict.PASS]
    [gate] = result.requirements
    assert gate.verdict is Verdict.INCONCLUSIVE and gate.value is None and why in gate.reason
    assert result.verdict is Verdict.INCONCLUSIVE
    assert "decision gate" in render_markdown(result).splitlines()[0]


def test_refusal_rate_counts_each_generations_refusals():
    """Greedy generations, 3 of 300 refused: within 5% (shown), beyond 0.5% (shown)."""
    records = [_record(i, ["refusal" if i < 3 else "answered"], 1) for i in range(300)]
    base = _run("base", records, "exact_match")
    cand = _run("cand", records, "exact_match")
    for bound, verdict in ((0.05, Verdict.PASS), (0.002, Verdict.REGRESSION)):
        gate = Requirement(Metric.REFUSAL_RATE, bound, "gsm8k")
        [result] = compare(base, cand, Policy(gates=(gate,), min_examples=1)).requirements
        assert result.value == pytest.approx(0.01) and result.verdict is verdict
        assert result.fail_pvalue == pytest.approx(_binomial_tail(3, 300, bound, upper=True))


def test_a_rate_gate_bets_on_its_examples_in_an_order_they_fix():
    """A refusal share of 5 samples per example (a betting test), every refusal in the first
    20 examples stored: in doc order or reversed, the same p-values and interval, since the
    examples fix the order bet in (regress/gate/betting_order.py)."""
    records = [
        _record(i, ["refusal"] * 2 + ["answered"] * 3 if i < 20 else ["answered"] * 5, [1] * 5)
        for i in range(200)
    ]
    gate = Requirement(Metric.REFUSAL_RATE, 0.02, "gsm8k")
    seen = set()
    for stored in (records, records[::-1]):
        side = _run("cand", stored, "pass@1")
        [result] = compare(side, side, Policy(gates=(gate,), min_examples=1)).requirements
        assert result.value == pytest.approx(0.04)
        seen.add((result.fail_pvalue, result.pass_pvalue, result.ci))
    assert len(seen) == 1


def test_gates_join_the_one_alpha_of_the_gate():
    """A unit's margin test and a decision gate's failing test are one Holm family: the gate's
    adjusted p is what statsmodels' Holm gives for the two raw p-values together. The met
    test is part of the gate's intersection-union PASS: held to alpha uncorrected."""
    result = _gate({"arc": (400, 40, 10)}, [Requirement(Metric.PASS_AT_1, 0.49, "arc")])
    [unit] = result.units
    [gate] = result.requirements
    expected = multipletests([unit.pvalue, gate.fail_pvalue], method="holm")[1]
    assert unit.adjusted_pvalue == pytest.approx(expected[0])
    assert gate.fail_adjusted_pvalue == pytest.approx(expected[1])
    assert gate.pass_adjusted_pvalue == gate.pass_pvalue


@pytest.mark.parametrize("grade", [1.0, 7.0, 10.0])
def test_one_grade_for_every_answer_shows_nothing_either_way(grade):
    """A grader that gave every candidate answer the same grade: the t-test has no spread to
    test, so the quality gate is neither shown met nor failing, whichever side the grade is
    on; one differing grade makes it testable again."""
    gate = Requirement(Metric.QUALITY, 6.0)
    raw = measure(gate, [grade] * 80, "")
    assert (raw.fail_pvalue, raw.pass_pvalue) == (1.0, 1.0) and raw.value == grade
    result = settle(raw, raw.fail_pvalue, raw.pass_pvalue, ALPHA, evidence=True)
    assert result.verdict is Verdict.INCONCLUSIVE
    spread = measure(gate, [grade] * 79 + [grade + (1 if grade < 10 else -1)], "")
    assert min(spread.fail_pvalue, spread.pass_pvalue) < ALPHA


def test_at_its_bound_a_gate_is_shown_either_way_at_most_alpha():
    """Seeded simulation: a candidate whose true pass@1 is exactly the bound is shown failing
    and shown met each in at most alpha of runs (exact tests: at most, not about)."""
    rng = np.random.default_rng(20261203)
    gate = Requirement(Metric.PASS_AT_1, 0.85)
    runs_, n = 4000, 300
    failed = passed = 0
    # The runs repeat few distinct counts: each is measured once and weighted by its runs.
    counts, times_each = np.unique(rng.binomial(n, 0.85, size=runs_), return_counts=True)
    for k, times in zip(counts, times_each, strict=True):
        values = [1.0] * int(k) + [0.0] * (n - int(k))
        raw = measure(gate, values, "")
        result = settle(raw, raw.fail_pvalue, raw.pass_pvalue, ALPHA, evidence=True)
        failed += times * (result.verdict is Verdict.REGRESSION)
        passed += times * (result.verdict is Verdict.PASS)
    slack = 2 * math.sqrt(ALPHA * (1 - ALPHA) / runs_)
    assert failed / runs_ <= ALPHA + slack and passed / runs_ <= ALPHA + slack
    assert failed / runs_ > 0.01  # the tests do spend their alpha at the bound


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"gates": {"pass_at_2": {"min": 0.5}}}, "gates must be one of pass_at_1"),
        ({"gates": {"pass_at_1": {"unit": "core"}}}, "gates.pass_at_1.min must be a number"),
        ({"gates": {"pass_at_1": {"max": 0.5}}}, "unknown policy key 'gates.pass_at_1.max'"),
        ({"gates": {"refusal_rate": [{"max": 1.5}]}}, r"gates.refusal_rate\[0\].max must be"),
        ({"gates": {"ttft_ms": {"max": -1}}}, "gates.ttft_ms.max must be a positive number"),
    ],
)
def test_policy_refuses_a_gate_it_could_not_apply(data, message):
    with pytest.raises(BadInput, match=message):
        parse_policy(data)


def _with_latency(requirement, times):
    """Every unit passes (3,000 identical answers); the gate is `requirement` on `times`."""
    base, cand = runs({"arc": (3000, 0, 0)})
    policy = Policy(gates=(requirement,))
    return judge(base, cand, pair(base, cand), policy, latency=Latency(times))


def test_ttft_is_a_sign_test_of_the_median_against_the_bound():
    """20 requests, 16 of them slower than 500 ms: more than half shown slower (the median
    shown beyond the bound); 16 faster: shown within it; 11 slower: neither."""
    bound = Requirement(Metric.TTFT_MS, 500)
    for slower, verdict in (
        (16, Verdict.REGRESSION),
        (4, Verdict.PASS),
        (11, Verdict.INCONCLUSIVE),
    ):
        times = tuple([900.0 + i for i in range(slower)] + [100.0 + i for i in range(20 - slower)])
        raw = measure_latency(bound, Latency(times))
        assert raw.n == 20 and raw.value == pytest.approx(float(np.median(times)))
        assert raw.fail_pvalue == pytest.approx(_binomial_tail(slower, 20, 0.5, upper=True))
        assert raw.pass_pvalue == pytest.approx(_binomial_tail(slower, 20, 0.5, upper=False))
        result = _with_latency(bound, times)
        [gate] = result.requirements
        assert gate.value == raw.value and gate.fail_pvalue == raw.fail_pvalue
        assert gate.verdict is verdict and result.verdict is verdict
        assert f"median {raw.value:,.0f} ms over 20 requests" in gate.reason
        assert min(times) <= gate.ci[0] <= raw.value <= gate.ci[1] <= max(times)
    # No timings: not evaluated, never a PASS.
    [gate] = _with_latency(bound, ()).requirements
    assert gate.verdict is Verdict.INCONCLUSIVE and "check --bench" in gate.reason


def test_the_candidates_timings_are_its_model_files():
    """Matched by sha256: another model's timings are never used, and the reason says so."""
    base, cand = runs({"arc": (100, 0, 0)})
    models = tuple(bench_models(json.loads(bench_file([base], "2026-12-02T12:00:00Z"))))
    timed = {m.sha256: m.ttft_ms for m in models}
    own = candidate_latency(timed, base)
    assert own.ttft_ms == models[0].ttft_ms and len(own.ttft_ms) == 6
    missing = candidate_latency(timed, cand)
    assert not missing.ttft_ms and "no model with the candidate's sha256" in missing.missing
    assert "timed no request" in candidate_latency({base.manifest.model.sha256: ()}, base).missing
    assert candidate_latency(None, base) == Latency()
