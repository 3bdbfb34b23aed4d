# ruff: noqa: F811 (tests take the imported judge_server fixture as an argument)
"""A conversation turn checked by the judge: parsed, left open at run time, graded at check
time by the scripted judge of test_judge (5 of 10, a point more per "+" in the answer it
reads), and gated per conversation (pure logic; a real judge in test_judge_model.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from test_compare import run
from test_conversations import Scripted, evaluate_one, write
from test_judge import _spec, judge_server  # noqa: F401 (importing registers the fixture)

from regress.checks import CheckOptions, check
from regress.core.errors import BadInput
from regress.gate.judge_audit import read_judgements
from regress.gate.policy import Policy
from regress.gate.results import Verdict
from regress.report.markdown import render_markdown
from regress.run.engine import TaskSpec, prepare
from regress.run.generation import GenerationSettings
from regress.tasks.base import DataSource
from regress.tasks.catalog import load_catalog
from regress.tasks.conversation import JUDGE_PENDING, conversation_task

N = 12


def _items(n: int = N, history: str = "own") -> list[dict]:
    """n conversations: turn 1 checked by code, turn 2 by the judge (min 6 of 10)."""
    items = []
    for k in range(n):
        turns = [
            {"user": f"Name a colour, {k}.", "check": {"expected": "blue", "match": "contains"}},
            {"user": f"Describe it, {k}.", "check": {"judge": {"min": 6}}},
        ]
        if history == "reference":
            turns[0]["assistant"] = "blue"
        items.append({"id": f"c{k}", "turns": turns, "history": history})
    return items


def _replies(second: str, first: str = "blue", n: int = N) -> dict[str, str]:
    out = {}
    for k in range(n):
        out[f"Name a colour, {k}."] = first
        out[f"Describe it, {k}."] = f"{second} {k}"
    return out


def _gate(tmp_path: Path, items: list[dict], base: dict, cand: dict, policy: Policy):
    """Baseline and candidate runs of the set on scripted models, gated by `check`."""
    path = write(tmp_path / "colours.jsonl", items)
    task = conversation_task(path)
    runs = []
    for name, replies in (("base", base), ("cand", cand)):
        task_run = evaluate_one(task, Scripted(replies))
        runs.append(run(name, {task.name: task_run.records}, [task_run.info]))
    options = CheckOptions(policy=policy, tasks=load_catalog(golden=[path]))
    return check(runs[0], runs[1], options)


def _policy(url: str, template: str = "single") -> Policy:
    return Policy(min_examples=1, judge=_spec(url, template=template))


def test_a_judge_check_is_parsed_and_makes_a_set_only_a_judge_scores(tmp_path: Path) -> None:
    task = conversation_task(write(tmp_path / "c.jsonl", _items(2)))
    assert task.primary_metric == "judged" and task.judged
    assert task.items[0]["turns"][1]["check"] == {"judge": {"min": 6}}
    plain = [{"id": "p", "turns": [{"user": "hi"}, {"user": "2+2?", "check": {"expected": "4"}}]}]
    assert conversation_task(write(tmp_path / "p.jsonl", plain)).primary_metric == "conv_pass"


@pytest.mark.parametrize(
    ("judge", "message"),
    [
        ({"min": 0}, "`min` must be a score of 1 or more"),
        ({"min": True}, "`min` must be a score of 1 or more"),
        (7, "a judge check is an object with `min`"),
        ({"min": 6, "rubric": "x"}, "unknown key 'rubric'"),
        ({"min": 6, "reference": ""}, "`reference` must be a non-empty string"),
    ],
)
def test_a_bad_judge_check_is_one_clear_error(tmp_path: Path, judge, message: str) -> None:
    items = _items(1)
    items[0]["turns"][1]["check"] = {"judge": judge}
    with pytest.raises(BadInput, match=message):
        conversation_task(write(tmp_path / "c.jsonl", items))


def test_a_must_pass_conversation_cannot_wait_for_the_judge(tmp_path: Path) -> None:
    items = [_items(1)[0] | {"must_pass": True}]
    with pytest.raises(BadInput, match="a must-pass conversation cannot have a judged turn"):
        conversation_task(write(tmp_path / "c.jsonl", items))


def test_a_run_leaves_judged_turns_open_and_reports_what_code_checked(tmp_path: Path) -> None:
    items = _items(2)
    items[1]["turns"][1]["check"] = {"judge": {"min": 6}, "expected": "red"}
    task = conversation_task(write(tmp_path / "c.jsonl", items))
    replies = _replies("cobalt", n=2)
    task_run = evaluate_one(task, Scripted(replies))
    first, second = task_run.records
    assert first.correct is None and second.correct is None
    assert first.scores["turn_pass"] == [1, None]
    assert first.scores["reason"] == ["", JUDGE_PENDING]
    # Its code check failed, so the judge cannot save it: failed now, whatever it says later.
    assert second.scores["turn_pass"] == [1, 0]
    assert second.scores["reason"][1] == "expected exact 'red'"
    assert "conv_pass" not in task_run.metrics
    assert task_run.metrics["turn_pass"] == pytest.approx(2 / 3)
    assert task_run.metrics["turn1_pass"] == 1.0 and task_run.metrics["turn2_pass"] == 0.0
    assert task_run.info.metric == "judged"


def test_a_judged_set_cannot_be_repeated(tmp_path: Path) -> None:
    task = conversation_task(write(tmp_path / "c.jsonl", _items(1)))
    settings = GenerationSettings(gen_kwargs={"temperature": 0.8}, repeats=3)
    with pytest.raises(BadInput, match="judged turns cannot be repeated"):
        prepare([TaskSpec(task, generation=settings)], DataSource())


def test_the_judge_grades_each_judged_turn_and_the_gate_tests_conversations(
    tmp_path: Path, judge_server
) -> None:
    """The baseline's second replies hold a "+" (6 of 10: pass at min 6), the candidate's
    do not (5: fail): every conversation breaks at turn 2, and the gate says so."""
    url, server = judge_server
    result = _gate(tmp_path, _items(), _replies("bright +"), _replies("bright"), _policy(url))
    judgements = result.judgements
    assert [(j.doc_id, j.turn, j.min_score) for j in judgements] == [(k, 2, 6.0) for k in range(N)]
    assert {j.verdicts for j in judgements} == {("6", "5")}
    assert server.calls == 2 * N  # each side's turn, once: no order to swap
    (unit,) = result.comparison.units
    assert unit.metric == "conversation pass (turns judged single)"
    assert (unit.n, unit.baseline, unit.candidate, unit.b, unit.c) == (N, 1.0, 0.0, N, 0)
    assert unit.verdict is Verdict.REGRESSION
    assert unit.judged.per_turn and unit.judged.losses == N
    (turn1, turn2) = result.comparison.turns
    assert (turn1.broke, turn2.broke, turn2.n) == (0, N, N)
    # The judge saw the conversation up to the turn and each side's own earlier reply.
    prompt = next(p for p in server.prompts if "Describe it, 3." in p and "bright + 3" in p)
    assert "User, turn 1 of 2: Name a colour, 3." in prompt
    assert "Assistant, turn 1: blue\n\nAssistant, turn 2: bright + 3" in prompt
    focus = "(Grade only the assistant's reply to turn 2; its earlier replies are context.)"
    assert focus in prompt
    line = judgements[0].to_dict()
    assert (line["turn"], line["min"], line["mode"]) == (2, 6.0, "single")
    # The report's judged table: a header cell for every cell of the row, the grades shown.
    report = render_markdown(result.comparison)
    section = report[report.index("### Judged units") :].splitlines()
    header, row = section[2], section[4]
    assert header.count("|") == row.count("|") == 12
    assert "| single |" in row and "6.00 → 5.00" in row
    assert "each judged turn's reply graded" in report and "sha256 aaaaaaaaaaaa" in report


def test_a_code_failure_is_not_undone_by_the_judge(tmp_path: Path, judge_server) -> None:
    """The baseline fails turn 1's code check; the judge rates both second replies alike."""
    url, _ = judge_server
    base = _replies("bright +", first="green")
    result = _gate(tmp_path, _items(), base, _replies("bright +"), _policy(url))
    (unit,) = result.comparison.units
    assert (unit.baseline, unit.candidate, unit.c) == (0.0, 1.0, N)


def test_with_reference_history_the_judge_reads_the_given_replies(
    tmp_path: Path, judge_server
) -> None:
    url, server = judge_server
    items = _items(history="reference")
    result = _gate(tmp_path, items, _replies("a +", first="x"), _replies("b +"), _policy(url))
    prompt = next(p for p in server.prompts if "a + 0" in p)
    assert "(Given assistant reply to turn 1: blue)" in prompt
    assert "[Answer]\nAssistant, turn 2: a + 0\n\n" in prompt  # the turn's reply alone
    (unit,) = result.comparison.units
    assert (unit.baseline, unit.candidate) == (0.0, 1.0)  # the baseline's "x" failed turn 1


def test_a_judged_turn_needs_a_grading_judge_within_its_scale(tmp_path: Path, judge_server) -> None:
    url, server = judge_server
    pairwise = Policy(min_examples=1, judge=_spec(url))
    wanted = "conv_colours has turns checked by the judge: they need a grading judge"
    with pytest.raises(BadInput, match=wanted):
        _gate(tmp_path, _items(2), _replies("a"), _replies("b"), pairwise)
    items = _items(2)
    items[0]["turns"][1]["check"] = {"judge": {"min": 6, "reference": "A deep blue."}}
    rubric = _policy(url, template="rubric")
    wanted = "item 'c0' turn 2: judge min 6 is above the rubric scale's top \\(5\\)"
    with pytest.raises(BadInput, match=wanted):
        _gate(tmp_path, items, _replies("a"), _replies("b"), rubric)
    assert server.calls == 0  # refused before the judge is asked


def test_without_a_judge_the_set_is_left_out_and_said_so(tmp_path: Path) -> None:
    result = _gate(tmp_path, _items(), _replies("a"), _replies("b"), Policy(min_examples=1))
    assert result.comparison.units == ()
    warnings = result.comparison.warnings
    assert any("unit conv_colours: only a judge can score it" in w for w in warnings)


def test_a_judge_error_on_a_turn_leaves_its_conversation_out(tmp_path: Path, judge_server) -> None:
    url, _ = judge_server
    cand = _replies("b +")
    cand["Describe it, 0."] = "GARBLE"
    result = _gate(tmp_path, _items(), _replies("a +"), cand, _policy(url))
    (unit,) = result.comparison.units
    assert unit.n == N - 1 and unit.candidate_failures == {"judge_error": 1}


def test_the_audit_refuses_turn_judgements_as_graded(tmp_path: Path, judge_server) -> None:
    url, _ = judge_server
    result = _gate(tmp_path, _items(2), _replies("a +"), _replies("b"), _policy(url))
    path = tmp_path / "judged.jsonl"
    path.write_text("".join(json.dumps(j.to_dict()) + "\n" for j in result.judgements))
    with pytest.raises(BadInput, match='mode "single": only pairwise judgements are audited'):
        read_judgements(path)


def test_whole_conversation_judging_is_unchanged_for_a_set_without_judged_turns(
    tmp_path: Path, judge_server
) -> None:
    """A conversation set whose checks are all code, named in judge.units, is still judged
    whole: one judgement per conversation, no turn."""
    url, _ = judge_server
    items = _items()
    for item in items:
        item["turns"][1]["check"] = {"expected": "bright", "match": "contains"}
    policy = Policy(min_examples=1, judge=replace(_spec(url), units=("conv_colours",)))
    result = _gate(tmp_path, items, _replies("bright"), _replies("bright +"), policy)
    assert [j.turn for j in result.judgements] == [None] * N
    assert "turn" not in result.judgements[0].to_dict()
