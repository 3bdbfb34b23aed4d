"""Pairing, units and verdicts on small hand-built runs."""

import dataclasses
import json
import math

import pytest

from regress.checks import plan_baseline
from regress.core.errors import BadInput, ExitCode
from regress.core.fingerprint import RuntimeFingerprint
from regress.core.manifest import Manifest, ModelInfo, Run, TaskInfo
from regress.core.records import Record, Status
from regress.gate.compare import compare
from regress.gate.outcomes import ROLLING
from regress.gate.policy import Inconclusive, Policy, UnitPolicy
from regress.gate.results import MAX_FLIPS, UnitKind, Verdict
from regress.report.markdown import render_markdown
from regress.stats import (
    PassRequires,
    Rule,
    Side,
    accuracy_mde,
    accuracy_n,
    adjust_pvalues,
    drop_bound,
    kl_divergence_choices,
    margin_pvalue,
    mcnemar_pvalue,
    paired_diff_ci,
    pass_n,
)

RIGHT, WRONG = [-1.0, -2.0], [-2.0, -1.0]
"""Log-likelihoods over two choices, target 0: argmax right or wrong."""


def info(name, group=None, metric="acc", output_type="loglikelihood", prompt_hash="p" * 64):
    return TaskInfo(name, group, 0, 0, metric, output_type, "d" * 64, prompt_hash)


def record(task, doc_id, correct, status=Status.OK, doc_hash=None, metrics=None):
    failed = status in (Status.ERROR, Status.TIMEOUT, Status.REFUSED)
    return Record(
        task=task,
        doc_id=doc_id,
        doc_hash=doc_hash or f"{task}-{doc_id}",
        prompt_hash="x",
        target=0,
        pred=None if failed else (0 if correct else 1),
        correct=None if failed else correct,
        metrics=metrics if metrics is not None else ({} if failed else {"acc": float(correct)}),
        scores={} if failed else {"loglik": RIGHT if correct else WRONG},
        status=status,
    )


def run(name, records, infos):
    manifest = Manifest(
        name=name,
        created="2026-01-01T00:00:00Z",
        regress_version="0.1.0",
        model=ModelInfo(ref=f"{name}.gguf", sha256=name[0] * 64),
        backend=RuntimeFingerprint("llama_cpp", "0.3.36", {"n_ctx": 2048}),
        suite_name="test",
        tasks={i.name: i for i in infos},
        command=f"regress check --model {name}.gguf",
    )
    return Run(manifest, records)


def outcomes(n, b, c):
    """Baseline and candidate 0/1 lists: b regressions, c fixes, the rest alternate agreeing."""
    rest = [(i % 2, i % 2) for i in range(n - b - c)]
    pairs = [(1, 0)] * b + [(0, 1)] * c + rest
    return [p[0] for p in pairs], [p[1] for p in pairs]


def runs(spec, groups=None, candidate_infos=None):
    """Baseline and candidate runs from {task: (n, b, c)} and {task: group}."""
    base_records, cand_records = {}, {}
    for task, (n, b, c) in spec.items():
        ours, theirs = outcomes(n, b, c)
        base_records[task] = [record(task, i, x) for i, x in enumerate(ours)]
        cand_records[task] = [record(task, i, y) for i, y in enumerate(theirs)]
    infos = [info(task, (groups or {}).get(task)) for task in spec]
    return (
        run("base", base_records, infos),
        run("cand", cand_records, candidate_infos or infos),
    )


def test_identical_runs_pass_with_no_flip():
    base, _ = runs({"arc_easy": (300, 0, 0)})
    result = compare(base, base, Policy())
    (unit,) = result.units
    assert result.verdict is Verdict.PASS and result.exit_code is ExitCode.OK
    assert (unit.n, unit.b, unit.c, unit.delta, unit.change_pvalue) == (300, 0, 0, 0.0, 1.0)
    # 300 unchanged answers show the drop within 2 points: at most the exact test's bound.
    bound = drop_bound(0, 0, 300, 0.05, Side.WITHIN)
    assert unit.pvalue > 0.99 and unit.bounds.at_most == bound < 0.02
    assert unit.reason == (
        f"Δ +0.0 pts: the drop is at most {bound * 100:.1f} pts (95% one-sided), "
        "within max_drop 2.0 pts"
    )
    assert unit.baseline == unit.candidate == 0.5
    assert unit.kl_divergence == 0.0 and unit.top1_agreement == 1.0
    assert result.flips == () and result.n_flips == 0 and result.warnings == ()


def test_big_drop_is_a_regression_with_exit_1():
    base, cand = runs({"arc_easy": (300, 40, 5)})
    result = compare(base, cand, Policy())
    (unit,) = result.units
    assert result.verdict is Verdict.REGRESSION and result.exit_code is ExitCode.REGRESSION
    assert unit.verdict is Verdict.REGRESSION and unit.kind is UnitKind.ACCURACY
    assert unit.delta == pytest.approx(-35 / 300)
    # The default rule is margin: p tests H0 "drop <= max_drop"; the no-drop p comes along.
    assert unit.rule is Rule.MARGIN
    assert unit.pvalue == margin_pvalue(40, 5, 300, 0.02, Side.BEYOND)
    # The bound beside the verdict is the test's own inversion, at the level it was held to.
    assert unit.bounds.at_least == drop_bound(40, 5, 300, 0.05, Side.BEYOND) > 0.02
    assert unit.change_pvalue == mcnemar_pvalue(40, 5)
    assert unit.adjusted_pvalue == unit.pvalue
    assert unit.change_adjusted_pvalue == unit.change_pvalue
    assert unit.mde == accuracy_mde(300, 45 / 300, 0.02, Rule.MARGIN, 0.05, 0.8)
    assert unit.n_needed is None and unit.plan_drop is None
    assert unit.ci == paired_diff_ci(40, 5, 300)
    assert unit.discordance == pytest.approx(45 / 300)
    assert unit.kl_divergence == pytest.approx(45 / 300 * kl_divergence_choices(RIGHT, WRONG))
    assert unit.top1_agreement == pytest.approx(255 / 300)
    assert result.n_flips == 45
    assert [f.regressed for f in result.flips] == [True] * 40 + [False] * 5
    first = result.flips[0]
    assert (first.task, first.doc_id, first.baseline_pred, first.candidate_pred) == (
        "arc_easy",
        0,
        0,
        1,
    )


def test_a_drop_neither_shown_beyond_nor_within_is_inconclusive():
    base, cand = runs({"arc_easy": (300, 28, 19)})
    result = compare(base, cand, Policy())
    (unit,) = result.units
    assert unit.verdict is Verdict.INCONCLUSIVE and result.exit_code is ExitCode.OK
    upper = drop_bound(28, 19, 300, 0.05, Side.WITHIN)
    assert upper > 0.02 and unit.bounds.at_most == upper
    # The drop seen (3 pts) is beyond the limit: the one plan is the n that detects twice it.
    assert unit.n_to_pass is None and unit.plan_drop == 0.04
    assert unit.n_needed == accuracy_n(47 / 300, 0.04, 0.02, Rule.MARGIN, 0.05, 0.8) > 300
    assert unit.reason == (
        f"Δ -3.0 pts: the drop may be up to {upper * 100:.1f} pts (95% one-sided), "
        "not shown within max_drop 2.0 pts"
    )


def test_an_undecided_drop_within_its_limit_plans_the_n_that_shows_it_within():
    """One meaning for "the examples that would decide": a drop seen within the limit plans
    the n that would show an unchanged model within it, and only that, offered to a new
    sequential check: rerunning a fixed check on more examples would read its verdict twice
    (issue 50)."""
    base, cand = runs({"arc_easy": (300, 12, 10)})
    result = compare(base, cand, Policy())
    (unit,) = result.units
    assert unit.verdict is Verdict.INCONCLUSIVE and unit.n_needed is None
    assert unit.n_to_pass == pass_n(22 / 300, 0.02, 0.05, 0.8) > 300
    assert unit.reason.endswith(
        f"; a new sequential check over about {unit.n_to_pass:,} or more examples "
        "(`regress check --sequential`) could show an unchanged model within it; rerunning "
        "this one on more would test twice"
    )
    first = render_markdown(result).splitlines()[0]
    assert first.startswith("## regress: ⚠️ INCONCLUSIVE (not blocking): arc_easy")
    step = 10 ** (len(str(unit.n_to_pass)) - 2)  # the headline gives two significant digits
    about = round(unit.n_to_pass / step) * step
    assert f"a new sequential check over about {about:,} or more examples" in first
    assert "would show" not in first and "would test twice" in first


def test_a_drop_that_is_not_significant_passes_when_pass_requires_no_evidence_of_harm():
    base, cand = runs({"arc_easy": (300, 28, 19)})
    policy = Policy(pass_requires=PassRequires.NO_EVIDENCE_OF_HARM)
    result = compare(base, cand, policy)
    (unit,) = result.units
    assert unit.verdict is Verdict.PASS and result.exit_code is ExitCode.OK
    assert unit.reason.startswith("drop of 3.0 pts > max_drop 2.0 pts is not significant")
    assert unit.mde == accuracy_mde(300, 47 / 300, 0.02, Rule.MARGIN, 0.05, 0.8)
    assert unit.mde > 0.05 and unit.n_needed is None and unit.n_to_pass is None


def test_significantly_worse_but_maybe_within_max_drop_is_inconclusive():
    base, cand = runs({"arc_easy": (1000, 90, 60)})
    result = compare(base, cand, Policy())
    (unit,) = result.units
    assert unit.change_pvalue < 0.05 and unit.pvalue >= 0.05 and -unit.ci[0] > 0.02
    assert unit.verdict is Verdict.INCONCLUSIVE
    assert unit.plan_drop == 0.04
    assert unit.n_needed == accuracy_n(0.15, 0.04, 0.02, Rule.MARGIN, 0.05, 0.8)
    assert result.verdict is Verdict.INCONCLUSIVE and result.exit_code is ExitCode.OK
    strict = compare(base, cand, Policy(inconclusive=Inconclusive.FAIL))
    assert strict.exit_code is ExitCode.REGRESSION
    # The same counts under the change rule: a significant drop beyond max_drop.
    change = compare(base, cand, Policy(units={"arc_easy": UnitPolicy(rule=Rule.CHANGE)}))
    assert change.units[0].rule is Rule.CHANGE
    assert change.units[0].pvalue == change.units[0].change_pvalue == mcnemar_pvalue(90, 60)
    assert change.units[0].verdict is Verdict.REGRESSION


def test_a_significant_drop_within_max_drop_passes():
    base, cand = runs({"mmlu_x": (10_000, 150, 50)})
    (unit,) = compare(base, cand, Policy()).units
    assert unit.change_pvalue < 1e-10 and unit.delta == pytest.approx(-0.01)
    assert unit.verdict is Verdict.PASS and unit.bounds.at_most < 0.02
    assert unit.reason.startswith("Δ -1.0 pts: the drop is at most 1.")
    legacy = Policy(pass_requires=PassRequires.NO_EVIDENCE_OF_HARM)
    (unit,) = compare(base, cand, legacy).units
    assert unit.reason == "worse than the baseline, but within max_drop 2.0 pts (95% CI)"


def test_too_few_examples_is_inconclusive():
    base, cand = runs({"arc_easy": (40, 0, 0)})
    (unit,) = compare(base, cand, Policy()).units
    planned = accuracy_n(0.04, 0.04, 0.02, Rule.MARGIN, 0.05, 0.8)
    assert unit.verdict is Verdict.INCONCLUSIVE and unit.n_needed == max(100, planned)
    # Enough examples for the policy, too few to show 40 unchanged answers within 2 points.
    (unit,) = compare(base, cand, Policy(min_examples=40)).units
    assert unit.verdict is Verdict.INCONCLUSIVE and unit.bounds.at_most > 0.02
    legacy = Policy(min_examples=40, pass_requires=PassRequires.NO_EVIDENCE_OF_HARM)
    (unit,) = compare(base, cand, legacy).units
    assert unit.verdict is Verdict.PASS


def test_an_empty_unit_is_never_a_pass():
    base, cand = runs({"arc_easy": (200, 0, 0)})
    cand = Run(cand.manifest, {"arc_easy": []})
    result = compare(base, cand, Policy(min_examples=1), allow_mismatch=True)
    (unit,) = result.units
    assert unit.n == 0 and unit.verdict is Verdict.INCONCLUSIVE
    assert unit.reason == "no paired example on both sides"
    assert result.verdict is Verdict.INCONCLUSIVE


def test_different_prompt_hash_is_refused_unless_allowed():
    other = [info("arc_easy", prompt_hash="q" * 64)]
    base, cand = runs({"arc_easy": (200, 0, 0)}, candidate_infos=other)
    with pytest.raises(BadInput) as error:
        compare(base, cand, Policy())
    assert "task arc_easy: prompt hash differs (baseline pppppppppppp, candidate qqqqqqqqqqqq)" in (
        str(error.value)
    )
    assert error.value.exit_code is ExitCode.BAD_INPUT
    result = compare(base, cand, Policy(), allow_mismatch=True)
    assert result.units[0].n == 200
    assert "prompt hash differs" in result.warnings[0]


def test_missing_task_is_refused_unless_allowed():
    base, _ = runs({"arc_easy": (200, 0, 0), "piqa": (200, 0, 0)})
    cand, _ = runs({"arc_easy": (200, 0, 0), "boolq": (200, 0, 0)})
    with pytest.raises(BadInput, match="task piqa: in the baseline but not in the candidate"):
        compare(base, cand, Policy())
    result = compare(base, cand, Policy(), allow_mismatch=True)
    assert [u.name for u in result.units] == ["arc_easy"]
    assert any("boolq: only in the candidate" in w for w in result.warnings)


def test_documents_with_another_hash_or_missing_are_left_unpaired():
    base, cand = runs({"arc_easy": (200, 0, 0)})
    records = list(cand.records["arc_easy"])
    records[3] = record("arc_easy", 3, records[3].correct, doc_hash="changed")
    records[7] = record("arc_easy", 7, records[7].correct, doc_hash="changed")
    del records[10:13]
    cand = Run(cand.manifest, {"arc_easy": records})
    result = compare(base, cand, Policy())
    assert result.unpaired == 5 and result.units[0].n == 195
    assert result.warnings == (
        "task arc_easy: 3 baseline examples missing from the candidate, "
        "2 with a different doc_hash; left unpaired",
    )


def test_candidate_failures_count_as_wrong_and_too_many_are_an_error():
    base, cand = runs({"arc_easy": (300, 0, 0)})
    records = list(cand.records["arc_easy"])
    # Odd doc ids are right in both runs (see `outcomes`): fail 5 of them.
    for i in range(1, 10, 2):
        records[i] = record("arc_easy", i, None, status=Status.ERROR)
    records[0] = record("arc_easy", 0, 0, status=Status.TRUNCATED)
    result = compare(base, Run(cand.manifest, {"arc_easy": records}), Policy())
    (unit,) = result.units
    assert (unit.b, unit.c) == (5, 0)
    assert unit.candidate_failures == {"error": 5, "truncated": 1}
    assert unit.baseline_failures == {}
    assert unit.error_rate == pytest.approx(5 / 300)
    assert all(f.candidate_status == "error" for f in result.flips)
    # Failures on examples both got wrong change no outcome, only the error rate.
    for i in range(10, 40, 2):
        records[i] = record("arc_easy", i, None, status=Status.TIMEOUT)
    result = compare(base, Run(cand.manifest, {"arc_easy": records}), Policy())
    assert result.units[0].verdict is Verdict.ERROR
    assert result.verdict is Verdict.ERROR and result.exit_code is ExitCode.RUN_FAILED


def test_group_is_one_unit_with_subjects_and_holm_across_units():
    spec = {"mmlu_a": (400, 30, 10), "mmlu_b": (400, 10, 10), "arc_easy": (300, 28, 19)}
    base, cand = runs(spec, groups={"mmlu_a": "mmlu", "mmlu_b": "mmlu"})
    result = compare(base, cand, Policy())
    arc, mmlu = result.units
    assert (mmlu.name, mmlu.tasks, mmlu.n, mmlu.b, mmlu.c) == (
        "mmlu",
        ("mmlu_a", "mmlu_b"),
        800,
        40,
        20,
    )
    assert [(s.task, s.n, s.b, s.c, s.delta) for s in mmlu.subjects] == [
        ("mmlu_a", 400, 30, 10, -0.05),
        ("mmlu_b", 400, 10, 10, 0.0),
    ]
    assert arc.subjects == ()
    expected = adjust_pvalues([arc.pvalue, mmlu.pvalue])
    assert [arc.adjusted_pvalue, mmlu.adjusted_pvalue] == pytest.approx(expected)
    # Holm on the no-drop family too: the smaller p is doubled, the larger kept.
    assert mmlu.change_adjusted_pvalue == pytest.approx(2 * mmlu.change_pvalue)
    assert arc.change_adjusted_pvalue == pytest.approx(arc.change_pvalue)
    # mmlu is significantly worse (2.5 points) but may be within max_drop: INCONCLUSIVE, and
    # with two gated units its MDE and n that would decide are planned at alpha / 2.
    assert mmlu.verdict is Verdict.INCONCLUSIVE
    assert mmlu.n_needed == accuracy_n(60 / 800, 0.04, 0.02, Rule.MARGIN, 0.025, 0.8)
    assert mmlu.mde == accuracy_mde(800, 60 / 800, 0.02, Rule.MARGIN, 0.025, 0.8)


def test_ungated_unit_is_reported_but_does_not_decide():
    base, cand = runs({"arc_easy": (300, 40, 5)})
    policy = Policy(units={"arc_easy": UnitPolicy(gate=False), "nope": UnitPolicy()})
    result = compare(base, cand, policy)
    (unit,) = result.units
    assert unit.verdict is Verdict.REGRESSION and not unit.gated
    assert unit.adjusted_pvalue is None
    assert result.verdict is Verdict.PASS and result.exit_code is ExitCode.OK
    assert result.warnings == ("policy names unit 'nope', which is not in this suite",)


def test_metric_override_pairs_on_that_metric():
    base, cand = runs({"arc_easy": (200, 0, 0)})
    # acc_norm says the candidate got the first 30 wrong; acc (correct) says nothing changed.
    records = [
        record("arc_easy", r.doc_id, r.correct, metrics={"acc_norm": 0.0 if r.doc_id < 30 else 1.0})
        for r in cand.records["arc_easy"]
    ]
    base_records = [
        record("arc_easy", r.doc_id, r.correct, metrics={"acc_norm": 1.0})
        for r in base.records["arc_easy"]
    ]
    base = Run(base.manifest, {"arc_easy": base_records})
    cand = Run(cand.manifest, {"arc_easy": records})
    assert compare(base, cand, Policy()).units[0].b == 0
    unit = compare(base, cand, Policy(metric="acc_norm")).units[0]
    assert (unit.metric, unit.b, unit.c) == ("acc_norm", 30, 0)
    assert unit.verdict is Verdict.REGRESSION


def test_non_binary_metric_is_bad_input():
    base, _ = runs({"arc_easy": (200, 0, 0)})
    records = [record("arc_easy", 0, 1, metrics={"mc2": 0.7}), *base.records["arc_easy"][1:]]
    base = Run(base.manifest, {"arc_easy": records})
    with pytest.raises(BadInput, match="task arc_easy doc 0: mc2 is 0.7, not 0/1"):
        compare(base, base, Policy(metric="mc2"))


def perplexity_runs(shift, failed=()):
    """60 documents of 100 words; the candidate's loglik is lower by shift * (1 + i % 3)."""
    task = info("wikitext", metric="word_perplexity", output_type="loglikelihood_rolling")

    def doc(i, loglik, status=Status.OK):
        metrics = {} if status != Status.OK else {"loglik": loglik, "n_words": 100.0}
        return Record("wikitext", i, f"w{i}", "x", None, None, None, metrics, {}, status)

    ours = [doc(i, -300.0 - i) for i in range(60)]
    theirs = [
        doc(i, -300.0 - i - shift * (1 + i % 3), Status.ERROR if i in failed else Status.OK)
        for i in range(60)
    ]
    return run("base", {"wikitext": ours}, [task]), run("cand", {"wikitext": theirs}, [task])


def test_perplexity_unit_regresses_on_a_significant_relative_increase():
    base, cand = perplexity_runs(shift=4.0)
    result = compare(base, cand, Policy())
    (unit,) = result.units
    assert unit.kind is UnitKind.PERPLEXITY and unit.metric == "word_perplexity"
    assert unit.n == 60 and unit.b is None and unit.ci[0] < unit.delta < unit.ci[1]
    # Mean extra loss 8 nats over 100 words: perplexity grows by e^0.08 - 1.
    assert unit.delta == pytest.approx(0.0833, abs=1e-4)
    # Every document worse, by more than the margin: no sign-flip resample reaches the data.
    assert unit.pvalue == unit.change_pvalue == pytest.approx(1e-4)
    assert unit.ci[0] > 0.02 and unit.mde > 0.02
    assert unit.verdict is Verdict.REGRESSION and result.exit_code is ExitCode.REGRESSION
    assert result.n_flips == 0


def test_perplexity_pass_and_failed_documents_left_out():
    base, cand = perplexity_runs(shift=0.5, failed={0, 1})
    (unit,) = compare(base, cand, Policy()).units
    assert unit.n == 58 and unit.candidate_failures == {"error": 2}
    assert unit.delta == pytest.approx(0.01, abs=1e-3)
    # Significantly worse, but the whole interval sits below max_relative_increase.
    assert unit.change_pvalue < 0.05 and unit.ci[1] < 0.02
    assert unit.verdict is Verdict.PASS
    (unit,) = compare(base, base, Policy()).units
    assert unit.delta == 0 and unit.pvalue == 1.0 and unit.verdict is Verdict.PASS
    # Not one document changed: the sign-flip test alone decides, and shows it within.
    assert unit.reason == (
        "word_perplexity +0.00%: the word_perplexity increase is at most +0.00% "
        "(95% one-sided), within max_relative_increase 2.00%"
    )


def test_flips_are_capped_and_the_comparison_is_json():
    base, cand = runs({"arc_easy": (1000, 150, 100)})
    result = compare(base, cand, Policy())
    assert result.n_flips == 250 and len(result.flips) == MAX_FLIPS
    data = json.loads(json.dumps(result.to_dict()))
    assert data["verdict"] == "REGRESSION" and data["exit_code"] == 1
    assert data["units"][0]["b"] == 150 and data["policy"]["correction"] == "holm"
    assert data["candidate"]["sha256"] == "c" * 64
    assert data["command"] == "regress check --model cand.gguf"


def score_runs(shift, n=200):
    """TruthfulQA MC2-like records: no 0/1 `correct`, a probability mass in `acc`."""
    task = info("truthfulqa_mc2")

    def doc(i, mass):
        return Record("truthfulqa_mc2", i, f"t{i}", "x", 0, 0, None, {"acc": mass}, {})

    masses = [0.2 + 0.6 * ((i * 37) % 100) / 100 for i in range(n)]
    # The candidate loses `shift` on most examples, gains a little on every fifth.
    moved = [m + (0.01 if i % 5 == 0 else -shift) for i, m in enumerate(masses)]
    return (
        run("base", {"truthfulqa_mc2": [doc(i, m) for i, m in enumerate(masses)]}, [task]),
        run("cand", {"truthfulqa_mc2": [doc(i, m) for i, m in enumerate(moved)]}, [task]),
    )


def test_score_unit_pairs_means_with_a_bootstrap_t_test():
    base, cand = score_runs(shift=0.05)
    result = compare(base, cand, Policy())
    (unit,) = result.units
    assert unit.kind is UnitKind.SCORE and unit.metric == "acc"
    assert (unit.n, unit.b, unit.c) == (200, 160, 40)
    assert unit.delta == pytest.approx((40 * 0.01 - 160 * 0.05) / 200)
    assert unit.ci[0] < unit.delta < unit.ci[1]
    assert unit.pvalue <= 1e-3 and unit.verdict is Verdict.REGRESSION
    assert result.n_flips == 0
    (unit,) = compare(base, base, Policy()).units
    assert unit.verdict is Verdict.PASS and unit.pvalue == 1.0


def test_a_group_mixing_kinds_is_bad_input():
    base, cand = runs({"a": (200, 0, 0)}, groups={"a": "mixed"})
    wiki, _ = perplexity_runs(shift=0.0)
    infos = [info("a", "mixed"), info("wikitext", "mixed", "word_perplexity", ROLLING)]
    mixed = run("base", {**base.records, **wiki.records}, infos)
    with pytest.raises(BadInput, match="unit mixed: mixes accuracy and perplexity tasks"):
        compare(mixed, mixed, Policy())


def test_perplexity_metric_named_by_the_policy():
    base, cand = perplexity_runs(shift=4.0)
    bytes_ = [
        dataclasses.replace(r, metrics={**r.metrics, "n_bytes": 400.0})
        for r in base.records["wikitext"]
    ]
    base = Run(base.manifest, {"wikitext": bytes_})
    policy = Policy(units={"wikitext": UnitPolicy(metric="bits_per_byte")})
    (unit,) = compare(base, cand, policy).units
    # Σll = -(300 + ... + 359) = -19770 over 60 * 400 bytes.
    assert unit.metric == "bits_per_byte"
    assert unit.baseline == pytest.approx(19770 / 24000 / math.log(2))
    policy = Policy(units={"wikitext": UnitPolicy(metric="perplexity")})
    with pytest.raises(BadInput, match="unknown perplexity metric 'perplexity'"):
        compare(base, cand, policy)


def test_plan_baseline_gives_each_unit_its_mde_and_n():
    spec = {"mmlu_a": (300, 0, 0), "mmlu_b": (300, 0, 0), "arc_easy": (500, 0, 0)}
    base, _ = runs(spec, groups={"mmlu_a": "mmlu", "mmlu_b": "mmlu"})
    policy = Policy(units={"mmlu": UnitPolicy(max_drop=0.03, rule=Rule.CHANGE)})
    arc, mmlu = plan_baseline(base, policy, discordance=0.12)
    assert (arc.name, arc.n, arc.rule, arc.baseline, arc.drop) == (
        "arc_easy",
        500,
        Rule.MARGIN,
        0.5,
        0.04,
    )
    # Two gated units share alpha; each unit plans with its own rule and max_drop.
    assert arc.mde == accuracy_mde(500, 0.12, 0.02, Rule.MARGIN, 0.025, 0.8)
    assert arc.n_needed == accuracy_n(0.12, 0.04, 0.02, Rule.MARGIN, 0.025, 0.8)
    assert (mmlu.n, mmlu.rule, mmlu.threshold) == (600, Rule.CHANGE, 0.03)
    assert mmlu.n_needed == accuracy_n(0.12, 0.06, 0.03, Rule.CHANGE, 0.025, 0.8)
    # A PASS needs every unit's within test, each at the full alpha (an intersection).
    assert arc.n_to_pass == pass_n(0.12, 0.02, 0.05, 0.8) < pass_n(0.12, 0.02, 0.025, 0.8)
    (arc,) = plan_baseline(runs({"arc_easy": (500, 0, 0)})[0], Policy(), 0.12, drop=0.05)
    assert arc.n_needed == accuracy_n(0.12, 0.05, 0.02, Rule.MARGIN, 0.05, 0.8)


def test_a_policy_built_from_strings_judges_as_one_built_from_enums():
    """A library caller's `Policy(rule="margin")` once mixed the two rules (the gate compares
    rules by identity): n=300, b=12, c=1 came out REGRESSION instead of INCONCLUSIVE."""
    base, cand = runs({"arc_easy": (300, 12, 1)})
    typed = compare(base, cand, Policy(rule=Rule.MARGIN)).units[0]
    spelled = compare(base, cand, Policy(rule="margin", correction="holm", test="midp")).units
    assert typed.verdict is Verdict.INCONCLUSIVE
    assert spelled[0] == typed
    assert Policy(units={"arc_easy": UnitPolicy(rule="change")}).for_unit("arc_easy").rule is (
        Rule.CHANGE
    )
    with pytest.raises(BadInput, match="rule must be one of margin, change, not 'marginal'"):
        Policy(rule="marginal")
    with pytest.raises(BadInput, match="inconclusive must be one of warn, fail"):
        Policy(inconclusive="maybe")
