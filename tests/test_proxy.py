"""Proxy baselines on hand-built runs: the design, its storage, and how the gate reads it.

The statistics are checked by simulation in test_stratified.py; the real-model path in
test_proxy_model.py.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pytest
from click.testing import CliRunner

from regress.checks import CheckOptions, check
from regress.cli import cli
from regress.core.errors import BadInput, ExitCode
from regress.core.fingerprint import RuntimeFingerprint
from regress.core.hashes import digest
from regress.core.manifest import Manifest, ModelInfo, Run, TaskInfo
from regress.core.records import Record
from regress.core.store import Store
from regress.gate.compare import compare
from regress.gate.drift import drift_report
from regress.gate.drift import parse_age as age
from regress.gate.integrity import proxy_parent_problems, proxy_problems
from regress.gate.policy import Policy
from regress.gate.results import Verdict
from regress.proxy.build import ProxyOptions, build_proxy
from regress.proxy.flip_rates import DEFAULT, load_calibration
from regress.proxy.selftest import SelftestOptions, judge_counts, overall_verdicts, unit_groups
from regress.stats import Rule


def _record(task: str, doc: int, margin: float, right: bool) -> Record:
    """Two choices, target 0; the reference's margin is `margin`."""
    loglik = [-1.0, -1.0 - margin] if right else [-1.0 - margin, -1.0]
    return Record(
        task=task,
        doc_id=doc,
        doc_hash=f"{task}-{doc}",
        prompt_hash=f"p-{task}-{doc}",
        target=0,
        pred=0 if right else 1,
        correct=int(right),
        metrics={"acc": float(right)},
        scores={"loglik": loglik, "chars": [1, 1]},
    )


def _run(name: str, records: dict[str, list[Record]], output_type="loglikelihood") -> Run:
    tasks = {
        task: TaskInfo(
            task,
            None,
            len(recs),
            0,
            "acc",
            output_type,
            digest([r.doc_hash for r in recs]),
            digest([r.prompt_hash for r in recs]),
        )
        for task, recs in records.items()
    }
    manifest = Manifest(
        name=name,
        created="2026-12-01T00:00:00+00:00",
        regress_version="0.1.0",
        model=ModelInfo(ref=f"{name}.gguf", sha256="a" * 64),
        backend=RuntimeFingerprint("llama_cpp", "0.3.36", {"n_ctx": 2048}),
        suite_name="full",
        tasks=tasks,
    )
    return Run(manifest, records)


def _parent(seed: int = 0, n: int = 600) -> Run:
    rng = np.random.default_rng(seed)
    records = {
        task: [
            _record(task, i, float(rng.exponential(1.0)), bool(rng.random() < 0.6))
            for i in range(n)
        ]
        for task in ("arc_easy", "piqa")
    }
    return _run("full", records)


def _flipped(run: Run, flip: set[tuple[str, int]], name: str = "cand") -> Run:
    records = {
        task: [
            _record(task, r.doc_id, 0.5, not r.correct) if (task, r.doc_id) in flip else r
            for r in recs
        ]
        for task, recs in run.records.items()
    }
    return _run(name, records)


@pytest.fixture(scope="module")
def parent() -> Run:
    return _parent()


def test_the_design_samples_the_budget_by_margin_with_known_inclusion_probabilities(parent):
    proxy = build_proxy(parent, "proxy", ProxyOptions(budget=300))
    design = proxy.manifest.proxy
    assert sum(len(recs) for recs in proxy.records.values()) == 300
    for unit in ("arc_easy", "piqa"):
        strata = design.unit_strata(unit)
        assert [s.index for s in strata] == list(range(10))
        assert sum(s.population for s in strata) == 600
        # Horvitz-Thompson: the sampled examples' 1/π add up to the parent's size.
        assert sum(s.sampled / s.inclusion_probability for s in strata) == pytest.approx(600)
        # Unsure strata (more flips in the calibration) get more of the budget.
        assert strata[0].sampled > strata[-1].sampled
        highs = [s.margin_high for s in strata]
        assert highs == sorted(highs)
    kept = {r.doc_id for r in proxy.records["arc_easy"]}
    assert kept == {d for s in design.unit_strata("arc_easy") for d in s.docs["arc_easy"]}
    again = build_proxy(parent, "proxy", ProxyOptions(budget=300))
    assert again.records == proxy.records  # the seed decides the sample


def test_a_proxy_round_trips_through_the_store(parent, tmp_path):
    store = Store(tmp_path)
    store.save(parent)
    proxy = build_proxy(store.load("full"), "proxy", ProxyOptions(budget=300))
    store.save(proxy)
    loaded = store.load("proxy")
    assert loaded.manifest.proxy == proxy.manifest.proxy
    assert loaded.manifest.proxy.parent_records_sha256 == store.load("full").manifest.records_sha256
    assert "proxy" not in (tmp_path / "full" / "manifest.json").read_text()


def test_check_on_a_proxy_estimates_the_parent_suites_change(parent):
    proxy = build_proxy(parent, "proxy", ProxyOptions(budget=300))
    design = proxy.manifest.proxy
    flips = {("arc_easy", d) for d in range(0, 600, 7)}
    full_candidate = _flipped(parent, flips)
    sampled = {
        task: [r for r in recs if r.doc_id in {x.doc_id for x in proxy.records[task]}]
        for task, recs in full_candidate.records.items()
    }
    result = compare(proxy, _run("cand", sampled), Policy())
    unit = next(u for u in result.units if u.name == "arc_easy")
    # The oracle: Σ_h N_h / N × mean change of the stratum's sampled examples.
    expected = 0.0
    for s in design.unit_strata("arc_easy"):
        ids = s.docs["arc_easy"]
        before = {r.doc_id: r.correct for r in parent.records["arc_easy"]}
        after = {r.doc_id: r.correct for r in full_candidate.records["arc_easy"]}
        expected += s.population / 600 * np.mean([after[d] - before[d] for d in ids])
    assert unit.delta == pytest.approx(expected)
    assert unit.proxy.population == 600 and unit.n == sum(
        s.sampled for s in design.unit_strata("arc_easy")
    )
    assert unit.proxy.se > unit.proxy.se_full > 0
    assert unit.ci[0] < unit.delta < unit.ci[1]
    untouched = next(u for u in result.units if u.name == "piqa")
    assert untouched.delta == 0 and untouched.verdict is Verdict.PASS


def test_a_proxy_refuses_to_be_gated_on_part_of_its_sample_or_as_a_plain_baseline(parent):
    proxy = build_proxy(parent, "proxy", ProxyOptions(budget=300))
    partial = {task: recs[:-1] for task, recs in proxy.records.items()}
    with pytest.raises(BadInput, match="dataset hash differs"):
        compare(proxy, _run("cand", partial), Policy())
    # Pairing only identical documents is fine for a plain baseline, never for a proxy.
    with pytest.raises(BadInput, match="proxy of full: its estimate needs every sampled"):
        compare(proxy, _run("cand", partial), Policy(), allow_mismatch=True)
    # Without its design the same records would be gated as a plain baseline: the manifest
    # cannot lose it silently, and drift (which counts raw flips) refuses a proxy outright.
    data = proxy.manifest.to_dict()
    assert data["proxy"]["parent"] == "full"
    with pytest.raises(BadInput, match="check drift on the parent"):
        drift_report(proxy, proxy, Policy(), age("30d"))
    with pytest.raises(BadInput, match="itself a proxy"):
        build_proxy(proxy, "proxy2", ProxyOptions(budget=100))


def test_build_refuses_what_a_proxy_cannot_estimate(parent):
    with pytest.raises(BadInput, match="covers all 1200"):
        build_proxy(parent, "proxy", ProxyOptions(budget=1200))
    generative = _run("gen", {"gsm8k": parent.records["arc_easy"]}, output_type="generate_until")
    with pytest.raises(BadInput, match="multiple-choice"):
        build_proxy(generative, "proxy", ProxyOptions(budget=100))


@pytest.mark.parametrize("proxied", [False, True])
@pytest.mark.parametrize("rule", list(Rule))
def test_selftest_judges_simulated_counts_as_compare_judges_records(parent, proxied, rule):
    """For random candidates, selftest's vectorised verdict is the gate's own verdict."""
    baseline = build_proxy(parent, "proxy", ProxyOptions(budget=300)) if proxied else parent
    policy = Policy(max_drop=0.01, rule=rule)
    groups = unit_groups(baseline, DEFAULT)
    rng = np.random.default_rng(11)
    seen = Counter()
    for trial in range(20):
        rate = rng.uniform(0.0, 0.1)
        flips = {
            (task, r.doc_id)
            for task, recs in baseline.records.items()
            for r in recs
            if rng.random() < (rate if r.correct else rate / 3)
        }
        candidate = _flipped(baseline, flips, name=f"c{trial}")
        expected = compare(baseline, candidate, policy).verdict
        draws = []
        for name, g in groups.items():
            b, c = _group_counts(baseline, candidate, g, name, proxied)
            draws.append(judge_counts(g, b, c, 0.01, policy.rule, policy))
        got = overall_verdicts(draws, [True] * len(draws), [policy.rule] * 2, [0.01] * 2, policy)
        assert got[0] == expected.value, trial
        seen[expected] += 1
    assert len(seen) >= 2  # the trials reached more than one verdict


def _group_counts(baseline: Run, candidate: Run, groups, unit: str, proxied: bool):
    """Per-group b and c of a candidate, grouped as selftest groups the baseline."""
    from regress.proxy.flip_rates import BINS, margin_ranks

    after = {r.doc_id: r.correct for r in candidate.records[unit]}
    size = len(groups.right)
    b, c = np.zeros((1, size), dtype=int), np.zeros((1, size), dtype=int)
    if proxied:
        where = {
            d: h
            for h, s in enumerate(baseline.manifest.proxy.unit_strata(unit))
            for d in s.docs[unit]
        }
    else:
        ranks = margin_ranks(baseline, [unit])
        where = {d: min(BINS - 1, int(ranks[unit, d] * BINS)) for d in after}
    for r in baseline.records[unit]:
        h = where[r.doc_id]
        b[0, h] += r.correct > after[r.doc_id]
        c[0, h] += r.correct < after[r.doc_id]
    return b, c


def test_selftest_options_default_to_the_shipped_calibration():
    assert SelftestOptions().calibration == DEFAULT
    assert dataclasses.is_dataclass(SelftestOptions)


def test_proxy_commands_write_show_and_refuse_with_exit_2(parent, tmp_path):
    from click.testing import CliRunner

    from regress.cli import cli

    Store(tmp_path).save(parent)

    def run(*args: str) -> tuple[int, str]:
        result = CliRunner().invoke(cli, [*args, "--store", str(tmp_path)])
        return result.exit_code, result.output + (result.stderr if result.stderr_bytes else "")

    code, text = run("proxy", "build", "--baseline", "full", "--budget", "200", "--name", "px")
    assert code == 0, text
    assert "200 examples written" in text
    assert Store(tmp_path).load("px").manifest.proxy.budget == 200
    code, text = run("proxy", "build", "--baseline", "full", "--budget", "5000", "--name", "p2")
    assert code == 2 and "covers all 1200 examples" in text
    code, text = run("plan", "--baseline", "px")
    assert code == 2 and "regress selftest --baseline px" in text
    code, text = run("selftest", "--baseline", "px", "--runs", "100", "--inject-drop", "0.9")
    assert code == 2 and "needs more" in text


def test_calibrate_measures_flip_rates_by_margin_decile_and_build_uses_them(parent, tmp_path):
    from click.testing import CliRunner

    from regress.cli import cli
    from regress.core.store import write_run

    Store(tmp_path / "b").save(parent)
    # Flip exactly the least sure tenth of arc_easy: the calibration must see only decile 0.
    ranked = sorted(
        parent.records["arc_easy"],
        key=lambda r: (r.scores["loglik"][0] - r.scores["loglik"][1]) * (1 if r.correct else -1),
    )
    flips = {("arc_easy", r.doc_id) for r in ranked[:60]}
    write_run(_flipped(parent, flips), tmp_path / "cand")
    out = tmp_path / "cal.json"
    result = CliRunner().invoke(
        cli,
        ["proxy", "calibrate", "--baseline", "full", "--run", str(tmp_path / "cand"),
         "--name", "mine", "-o", str(out), "--store", str(tmp_path / "b")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    measured = load_calibration(out)
    rates = [rate for _, rate in measured.points]
    # arc_easy's lowest decile all flipped, piqa untouched: (1 + 0) / 2 per candidate mean.
    assert rates[0] == pytest.approx(0.5) and rates[1:] == [0.0] * 9
    result = CliRunner().invoke(
        cli,
        ["proxy", "build", "--baseline", "full", "--budget", "400", "--name", "px",
         "--calibration", str(out), "--store", str(tmp_path / "b")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    strata = Store(tmp_path / "b").load("px").manifest.proxy.unit_strata("arc_easy")
    assert strata[0].sampled > strata[5].sampled


def test_a_design_that_contradicts_its_proxy_is_refused(parent, tmp_path):
    """An edited population (125 -> 125,000) once passed `baseline verify` and moved a verdict
    from INCONCLUSIVE to PASS: every stratum weighs the estimates, so it is checked in full."""
    store = Store(tmp_path)
    store.save(parent)
    proxy = build_proxy(store.load("full"), "proxy", ProxyOptions(budget=300))
    assert proxy_problems(proxy) == []
    store.save(proxy)
    verify = ["baseline", "verify", "proxy", "--store", str(tmp_path)]
    assert CliRunner().invoke(cli, verify).exit_code == 0
    design = proxy.manifest.proxy
    first = design.strata[0]
    inflated = dataclasses.replace(first, population=first.population * 1000)
    tampered = dataclasses.replace(
        proxy,
        manifest=dataclasses.replace(
            proxy.manifest,
            proxy=dataclasses.replace(design, strata=(inflated, *design.strata[1:])),
        ),
    )
    (problem,) = proxy_problems(tampered)
    assert problem.startswith(f"unit {first.unit}: its strata hold ")
    with pytest.raises(BadInput, match="its strata hold"):
        check(tampered, _run("cand", proxy.records), CheckOptions())
    # Stored, the design no longer holds its strata's equal cuts: refused when read.
    store.save(tampered)
    done = CliRunner().invoke(cli, verify)
    assert done.exit_code == ExitCode.BAD_INPUT
    assert f"stratum {first.unit}/0 holds {first.population * 1000} of the unit's" in done.output
    # A record moved to another stratum, and a parent whose records changed.
    moved = dataclasses.replace(
        design,
        strata=(
            dataclasses.replace(
                first, margin_low=first.margin_high + 1, margin_high=first.margin_high + 2
            ),
            *design.strata[1:],
        ),
    )
    outside = proxy_problems(
        dataclasses.replace(proxy, manifest=dataclasses.replace(proxy.manifest, proxy=moved))
    )
    assert len(outside) == first.sampled and all("outside its stratum" in p for p in outside)
    sampled = proxy.records["arc_easy"][0].doc_id
    changed = _flipped(store.load("full"), {("arc_easy", sampled)})
    found = proxy_parent_problems(proxy, changed)
    assert found[0].endswith("its records changed since the proxy")
    assert found[1:] == [f"arc_easy doc {sampled}: not the parent's record of that example"]
