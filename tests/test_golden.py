"""Golden sets: the file format, how items are prompted and judged, and the gate's two rules
(a must-pass regression fails an otherwise passing gate; the 5% relative-drop rule)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from test_compare import run

from regress.checks import CheckOptions, check
from regress.core.errors import BadInput, ExitCode
from regress.core.manifest import Run, TaskInfo
from regress.core.records import Record, Status
from regress.core.requests import GenerateRequest, GenerateResult, LoglikelihoodResult
from regress.gate.golden_rules import fragile_items
from regress.gate.policy import Policy, UnitPolicy, parse_policy
from regress.gate.results import Verdict
from regress.report.markdown import render_markdown
from regress.stats import Side, margin_pvalue
from regress.tasks import DataSource
from regress.tasks.catalog import load_catalog
from regress.tasks.golden import golden_task, matches, read_golden


def write_items(path: Path, items: list[dict]) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in items))
    return path


ITEMS = [
    {
        "id": "capital-fr",
        "input": "Question: What is the capital of France?\nAnswer:",
        "choices": ["Paris", "Lyon"],
        "answer": "Paris",
        "tags": ["geo"],
        "must_pass": True,
    },
    {
        "id": "two-plus-two",
        "input": "2 + 2 =",
        "expected": ["4", "four"],
        "match": "startswith",
        "ignore_case": True,
        "max_tokens": 4,
    },
]


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"id": "a", "input": "x", "expected": "y", "grader": "llm"}, "unknown key 'grader'"),
        ({"id": "a", "input": "x"}, "needs `choices` and `answer`, or `expected`"),
        ({"id": "a", "input": "x", "choices": ["y", "z"], "answer": "w"}, "`answer` must be"),
        ({"id": "a", "input": "x", "expected": "(", "match": "regex"}, "regex '\\('"),
        ({"id": "a", "input": "x", "expected": "y", "must_pass": "yes"}, "`must_pass` must be"),
        ({"id": "", "input": "x", "expected": "y"}, "`id` must be a non-empty string"),
    ],
)
def test_malformed_items_name_file_and_item(tmp_path: Path, bad: dict, message: str) -> None:
    path = write_items(tmp_path / "golden.jsonl", [ITEMS[1], bad])
    with pytest.raises(BadInput, match=message) as caught:
        read_golden(path)
    assert "golden.jsonl: item 2" in str(caught.value)


def test_repeated_ids_are_refused(tmp_path: Path) -> None:
    path = write_items(tmp_path / "g.jsonl", [ITEMS[1], ITEMS[1]])
    with pytest.raises(BadInput, match="'two-plus-two' repeats item 1"):
        read_golden(path)


def test_items_become_requests_and_scores(tmp_path: Path) -> None:
    task = golden_task(write_items(tmp_path / "support.jsonl", ITEMS))
    assert task.name == "golden_support" and task.output_type == "generate_until"
    choice, generate = task.examples(DataSource())
    assert [r.continuation for r in choice.requests] == [" Paris", " Lyon"]
    assert choice.requests[0].context == ITEMS[0]["input"] and choice.target == 0
    assert generate.requests == (GenerateRequest("2 + 2 =", ("\n\n",), 4),)
    right = task.score(
        choice, [LoglikelihoodResult(-1.0, True, 1), LoglikelihoodResult(-3.0, False, 1)]
    )
    assert right.metrics == {"pass": 1.0, "must_pass": 1.0} and right.pred == 0
    wrong = task.score(generate, [GenerateResult(" 5, not Four", 3)])
    assert wrong.metrics == {"pass": 0.0, "must_pass": 0.0} and wrong.correct == 0
    assert task.score(generate, [GenerateResult(" FOUR.", 3)]).correct == 1


def test_matching_rules() -> None:
    item = {"expected": ["30 days"], "match": "contains", "ignore_case": False}
    assert matches("  within 30 days of purchase", item)
    assert not matches("within 30 Days", item)
    assert matches("within 30 Days", item | {"ignore_case": True})
    assert matches(" 30 days", item | {"match": "exact"})
    assert not matches("30 days.", item | {"match": "exact"})
    assert matches("Refunds: 30", {"expected": [r"\b30\b"], "match": "regex", "ignore_case": False})


# -- the gate ---------------------------------------------------------------------------------

N_GOLDEN = 40


def golden_items() -> list[dict]:
    items = []
    for i in range(N_GOLDEN):
        items.append(
            {"id": f"item-{i:02d}", "input": f"Q{i}", "choices": ["a", "b"], "answer": 0,
             "must_pass": i < 10}
        )  # fmt: skip
    return items


def golden_record(i: int, passed: bool, status: Status = Status.OK) -> Record:
    failed = status is not Status.OK
    return Record(
        task="golden_support",
        doc_id=i,
        doc_hash=f"g{i}",
        prompt_hash="p",
        target=0,
        pred=None if failed else (0 if passed else 1),
        correct=None if failed else int(passed),
        metrics={} if failed else {"pass": float(passed), "must_pass": float(i < 10)},
        scores={} if failed else {"loglik": [-1.0, -2.0] if passed else [-2.0, -1.0]},
        status=status,
    )


def arc_record(i: int, right: bool) -> Record:
    return Record(
        task="arc_easy",
        doc_id=i,
        doc_hash=f"a{i}",
        prompt_hash="p",
        target=0,
        pred=0 if right else 1,
        correct=int(right),
        metrics={"acc": float(right)},
        scores={"loglik": [-1.0, -1.5] if right else [-1.5, -1.0]},
    )


def make_run(name: str, golden: list[Record]) -> Run:
    arc = [arc_record(i, i % 3 != 0) for i in range(300)]
    tasks = {
        "arc_easy": TaskInfo("arc_easy", None, 300, 0, "acc", "loglikelihood", "d", "p"),
        "golden_support": TaskInfo(
            "golden_support", None, N_GOLDEN, 0, "pass", "loglikelihood", "d", "p"
        ),
    }
    return run(name, {"arc_easy": arc, "golden_support": golden}, tasks.values())


BASE_PASSES = [i % 4 != 3 for i in range(N_GOLDEN)]
"""The baseline passes 30 of 40 items (every must-pass item but 3 and 7)."""


def gate(tmp_path: Path, candidate_passes: list[bool], policy: Policy | None = None):
    catalog = load_catalog(golden=[write_items(tmp_path / "support.jsonl", golden_items())])
    baseline = make_run("base", [golden_record(i, p) for i, p in enumerate(BASE_PASSES)])
    candidate = make_run("cand", [golden_record(i, p) for i, p in enumerate(candidate_passes)])
    # The golden set's own statistical unit is reported only, so the verdict below comes
    # from the golden rules alone.
    policy = policy or Policy(units={"golden_support": UnitPolicy(gate=False)})
    return check(baseline, candidate, CheckOptions(policy=policy, tasks=catalog)).comparison


def test_unchanged_golden_set_passes(tmp_path: Path) -> None:
    result = gate(tmp_path, BASE_PASSES)
    assert (result.verdict, result.exit_code) == (Verdict.PASS, ExitCode.OK)
    [golden] = result.golden
    assert (golden.n, golden.must_pass, golden.baseline_rate) == (N_GOLDEN, 10, 0.75)
    assert not golden.failed and not golden.regressed
    assert [i.name for i in golden.still_failing] == ["item-03", "item-07"]


def test_one_must_pass_regression_fails_an_otherwise_passing_gate(tmp_path: Path) -> None:
    passes = list(BASE_PASSES)
    passes[5] = False  # must-pass item-05: baseline right, candidate wrong
    result = gate(tmp_path, passes)
    assert all(u.verdict is Verdict.PASS for u in result.units if u.gated)
    assert (result.verdict, result.exit_code) == (Verdict.REGRESSION, ExitCode.REGRESSION)
    [golden] = result.golden
    assert golden.failed and [i.name for i in golden.regressed] == ["item-05"]
    assert golden.relative_drop == pytest.approx(1 / 30)  # within 5%: the must-pass rule alone
    report = render_markdown(result)
    assert report.splitlines()[0] == (
        "## regress: ❌ REGRESSION in golden set golden_support: must-pass item item-05 regressed"
    )
    assert "| golden_support | item-05 | a | a | b | 1.00 | ❌ regressed |" in report


def test_a_failed_run_of_a_must_pass_item_is_a_regression(tmp_path: Path) -> None:
    catalog = load_catalog(golden=[write_items(tmp_path / "support.jsonl", golden_items())])
    baseline = make_run("base", [golden_record(i, p) for i, p in enumerate(BASE_PASSES)])
    records = [golden_record(i, p) for i, p in enumerate(BASE_PASSES)]
    records[0] = golden_record(0, False, Status.TIMEOUT)  # item-00 passed, now timed out
    candidate = make_run("cand", records)
    options = CheckOptions(policy=Policy(max_error_rate=0.5), tasks=catalog)
    [golden] = check(baseline, candidate, options).comparison.golden
    assert [(i.name, i.candidate_status) for i in golden.regressed] == [("item-00", "timeout")]


@pytest.mark.parametrize(("flips", "fails"), [(1, False), (2, False), (12, True)])
def test_relative_drop_rule(tmp_path: Path, flips: int, fails: bool) -> None:
    """Flipping non-must-pass items the baseline passed: 2 of 30 is a 6.7% relative drop,
    beyond 5% but not shown beyond it by 40 items (random flips would fail such a rule
    often); 12 of 30 (40%) is shown."""
    passes = list(BASE_PASSES)
    for i in [i for i in range(10, N_GOLDEN) if passes[i]][:flips]:
        passes[i] = False
    [golden] = gate(tmp_path, passes).golden
    assert golden.failed is fails and not golden.regressed
    assert golden.relative_drop == pytest.approx(flips / 30)
    # The paired margin test on the set's items, its p in the gate's family.
    margin = 0.05 * golden.baseline_rate
    assert golden.pvalue == margin_pvalue(flips, 0, N_GOLDEN, margin, Side.BEYOND)
    assert (golden.adjusted_pvalue < 0.05) is fails
    looser = Policy(max_relative_drop=0.5, units={"golden_support": UnitPolicy(gate=False)})
    assert not gate(tmp_path, passes, looser).golden[0].failed


def test_policy_golden_key() -> None:
    assert parse_policy({"golden": {"max_relative_drop": 0.1}}).max_relative_drop == 0.1
    assert Policy().max_relative_drop == 0.05
    with pytest.raises(BadInput, match="unknown policy key 'golden.max_drop'"):
        parse_policy({"golden": {"max_drop": 0.1}})
    with pytest.raises(BadInput, match="golden.max_relative_drop must be"):
        parse_policy({"golden": {"max_relative_drop": 1.5}})


def test_fragile_must_pass_items_are_named_and_failed_ones_show_their_margin(
    tmp_path: Path,
) -> None:
    """A must-pass item the baseline gets right by a hair may flip on another CPU: named when
    the baseline is made, and its margin shown beside it when it fails."""
    records = [golden_record(i, p) for i, p in enumerate(BASE_PASSES)]
    records[0] = dataclasses.replace(records[0], scores={"loglik": [-1.0, -1.1]})
    baseline = make_run("base", records)
    assert fragile_items(baseline) == [("golden_support", 0, pytest.approx(0.1))]
    passes = list(BASE_PASSES)
    passes[0] = passes[1] = False
    catalog = load_catalog(golden=[write_items(tmp_path / "support.jsonl", golden_items())])
    candidate = make_run("cand", [golden_record(i, p) for i, p in enumerate(passes)])
    policy = Policy(units={"golden_support": UnitPolicy(gate=False)})
    result = check(baseline, candidate, CheckOptions(policy=policy, tasks=catalog)).comparison
    [golden] = result.golden
    assert [(i.name, i.baseline_margin) for i in golden.regressed] == [
        ("item-00", pytest.approx(0.1)),
        ("item-01", pytest.approx(1.0)),
    ]
    report = render_markdown(result)
    assert "| golden_support | item-00 | a | a | b | 0.10 ⚠️ | ❌ regressed |" in report
    assert "| golden_support | item-01 | a | a | b | 1.00 | ❌ regressed |" in report
