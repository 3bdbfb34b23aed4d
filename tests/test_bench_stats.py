"""llama-bench's rate summary, vLLM's latency summary, the paired Hodges-Lehmann shift and the
latency gate's rule: pure functions, checked against their definitions and by simulation."""

from __future__ import annotations

import itertools
import math
import statistics

import numpy as np
import pytest

from regress.bench.latency import RequestTiming, summarise
from regress.bench.shift import bound_rank, paired_shift
from regress.bench.speed_gate import SpeedVerdict, _pairs, decide
from regress.bench.summary import Summary, llama_bench_name, rate_stat
from regress.core.errors import BadInput
from regress.gate.policy import Policy, parse_policy


def test_rate_stat_is_the_mean_of_per_repetition_rates_with_n_minus_1_sd():
    samples_ns = [1_000_000_000, 2_000_000_000, 4_000_000_000]
    stat = rate_stat(512, 0, samples_ns)
    rates = [512 / 1, 512 / 2, 512 / 4]  # tokens per second of each repetition
    assert stat.test == "pp512"
    assert stat.mean_ts == pytest.approx(statistics.mean(rates))  # not 512 * 3 / 7 s
    assert stat.sd_ts == pytest.approx(statistics.stdev(rates))  # n - 1
    assert stat.samples_ts == pytest.approx(tuple(rates))
    assert rate_stat(0, 128, [10**9]).sd_ts == 0.0
    assert llama_bench_name(512, 128) == "pp512+tg128" and llama_bench_name(0, 128) == "tg128"


def test_summary_follows_numpy_like_vllm():
    values = list(np.random.default_rng(1).lognormal(3, 1, 200))
    s = Summary.of(values)
    assert s.n == 200
    assert s.mean == pytest.approx(np.mean(values)) and s.sd == pytest.approx(np.std(values))
    assert (s.p50, s.p95, s.p99) == pytest.approx(tuple(np.percentile(values, [50, 95, 99])))
    assert s.p50 <= s.p95 <= s.p99
    assert math.isnan(Summary.of([]).mean)


def test_request_metrics_follow_vllm_definitions():
    a = RequestTiming(0, 10, 4, ttft_ms=100.0, e2el_ms=160.0, itl_ms=(20.0, 20.0, 20.0))
    b = RequestTiming(1, 30, 1, ttft_ms=300.0, e2el_ms=300.0, itl_ms=())
    assert a.tpot_ms == pytest.approx(20.0)  # (E2EL - TTFT) / (output - 1)
    assert math.isnan(b.tpot_ms)
    result = summarise([a, b], duration_s=0.5)
    assert result.tpot.n == 1  # one-token outputs have no TPOT, as in vLLM
    assert result.itl.n == 3 and result.e2el.mean == pytest.approx(230.0)
    assert result.request_throughput == pytest.approx(4.0)
    assert result.output_throughput == pytest.approx(10.0)
    assert result.total_token_throughput == pytest.approx(90.0)


def test_bound_rank_matches_the_exact_signed_rank_distribution():
    """Brute force over all sign patterns for small n."""
    for n in range(1, 11):
        sums = [
            sum(r for r, s in zip(range(1, n + 1), signs, strict=True) if s)
            for signs in itertools.product((0, 1), repeat=n)
        ]
        cdf = [sum(1 for t in sums if t <= k) / 2**n for k in range(n * (n + 1) // 2 + 1)]
        expected = sum(1 for p in cdf if p <= 0.05)
        assert bound_rank(n, 0.05) == expected, n


def test_hodges_lehmann_is_the_median_of_walsh_averages():
    d = [0.1, -0.2, 0.3, 0.05, 0.4, 0.0]
    walsh = [(d[i] + d[j]) / 2 for i in range(len(d)) for j in range(i, len(d))]
    shift = paired_shift(d, 0.05)
    assert shift.ratio == pytest.approx(math.exp(statistics.median(walsh)))
    assert shift.low <= shift.ratio <= shift.high
    assert paired_shift([0.1] * 3, 0.05).low == 0.0  # 3 pairs cannot bound at 5%


def test_lower_bound_covers_at_the_stated_level():
    """Seeded simulation: heavy-tailed noise around a true 20% slowdown; the 95% lower bound
    lies above the truth in about 5% of runs (the simulation's error is about 0.35%)."""
    rng = np.random.default_rng(7)
    truth = math.log(1.2)
    misses = sum(
        paired_shift(truth + 0.1 * rng.standard_t(3, size=20), 0.05).low > 1.2 for _ in range(4000)
    )
    assert misses / 4000 < 0.05 + 3 * 0.0035


def _aa(rng, n):
    return list(0.05 * rng.standard_normal(n))


def test_decide_passes_a_a_and_flags_a_real_slowdown():
    rng = np.random.default_rng(3)
    aa = _aa(rng, 24)
    same = decide(_aa(rng, 48), aa, 0.10, 0.05)
    assert same.verdict == SpeedVerdict.PASS
    slower = decide([math.log(1.5) + x for x in _aa(rng, 48)], aa, 0.10, 0.05)
    assert slower.verdict == SpeedVerdict.SLOWER and slower.ratio.low > 1.1
    assert "significantly slower" in slower.reason
    # 15% slower is not flagged at a 20% margin
    assert decide([math.log(1.15) + x for x in _aa(rng, 48)], aa, 0.20, 0.05).verdict == "PASS"


def test_decide_is_inconclusive_when_the_machine_is_noisier_than_the_slowdown():
    rng = np.random.default_rng(4)
    noisy = list(0.6 * rng.standard_normal(12))
    result = decide([math.log(1.3) + 0.01 * x for x in _aa(rng, 24)], noisy, 0.10, 0.05)
    assert result.noise_floor > 0.3
    assert result.verdict == SpeedVerdict.INCONCLUSIVE


def test_a_a_false_alarm_rate_in_simulation_is_far_below_alpha():
    """No true difference, lognormal noise of 10%: the gate never fails at a 10% margin."""
    rng = np.random.default_rng(5)
    alarms = sum(
        decide(_aa(rng, 48), _aa(rng, 24), 0.10, 0.05).verdict == SpeedVerdict.SLOWER
        for _ in range(500)
    )
    assert alarms == 0


def test_pairs_come_from_abab_quadruples():
    order = [("A", 0, 100.0), ("B", 0, 200.0), ("A", 0, 110.0), ("B", 0, 220.0)]
    ab, aa = _pairs(order)
    assert ab == pytest.approx([math.log(2), math.log(2)])
    assert aa == pytest.approx([math.log(1.1)])


def test_policy_reads_speed_max_slowdown():
    assert Policy().max_slowdown == 0.10
    policy = parse_policy({"speed": {"max_slowdown": 0.25}})
    assert policy.max_slowdown == 0.25
    assert parse_policy(policy.to_dict()) == policy
    with pytest.raises(BadInput, match="unknown policy key 'speed.max_slowdow'"):
        parse_policy({"speed": {"max_slowdow": 0.1}})
    with pytest.raises(BadInput, match="speed.max_slowdown must be a positive number"):
        parse_policy({"speed": {"max_slowdown": 0}})
