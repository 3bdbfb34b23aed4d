"""The report decides in its first line, in words, and fits a reviewer's screen above its fold.

The comparisons are the gate's own verdicts on hand-built records (no model): a PASS, a
REGRESSION, an INCONCLUSIVE for too few examples (issue #27's first small baseline) and a
golden-set REGRESSION.
"""

import dataclasses
import functools
import re
from types import SimpleNamespace

import pytest

from regress.checks import CheckOptions, check, with_texts
from regress.core.fingerprint import RuntimeFingerprint
from regress.core.manifest import Manifest, ModelInfo, Run, TaskInfo
from regress.core.records import Record
from regress.core.requests import LoglikelihoodRequest
from regress.gate.compare import compare
from regress.gate.policy import Policy
from regress.gate.results import Flip, Verdict
from regress.report.github import comment_body
from regress.report.json_report import render_json
from regress.report.markdown import FOLD_LINES, MARKER, render_markdown
from regress.run.engine import TaskSpec, prepare
from regress.tasks.base import DataSource, Example
from regress.tasks.catalog import BUILTIN

RIGHT, WRONG = [-1.0, -2.0], [-2.0, -1.0]
"""Log-likelihoods over two choices, target 0: argmax right or wrong."""


def record(task, doc_id, correct, must_pass=False):
    metrics = {"acc": float(correct), **({"must_pass": 1.0} if must_pass else {})}
    return Record(
        task=task,
        doc_id=doc_id,
        doc_hash=f"{task}-{doc_id}",
        prompt_hash="x",
        target=0,
        pred=0 if correct else 1,
        correct=int(correct),
        metrics=metrics,
        scores={"loglik": RIGHT if correct else WRONG},
    )


def make_run(name, records, ref=None):
    tasks = sorted({r.task for r in records})
    manifest = Manifest(
        name=name,
        created="2026-01-01T00:00:00Z",
        regress_version="0.1.0",
        model=ModelInfo(ref=ref or f"models/{name}.gguf", sha256=name[0] * 64),
        backend=RuntimeFingerprint("llama_cpp", "0.3.36", {"n_ctx": 2048}),
        suite_name="builtin",
        tasks={
            t: TaskInfo(t, None, 0, 0, "acc", "loglikelihood", "d" * 64, "p" * 64) for t in tasks
        },
        command="regress check --baseline main --model smollm2-q4_0.gguf",
    )
    by_task = {t: [r for r in records if r.task == t] for t in tasks}
    return Run(manifest, by_task)


def pair_of_runs(spec, must_pass=()):
    """Baseline and candidate from {task: (n, broke, fixed)}: the rest agree, half right."""
    base, cand = [], []
    for task, (n, broke, fixed) in spec.items():
        outcomes = [(1, 0)] * broke + [(0, 1)] * fixed
        outcomes += [(i % 2, i % 2) for i in range(n - broke - fixed)]
        for i, (ours, theirs) in enumerate(outcomes):
            flagged = (task, i) in must_pass
            base.append(record(task, i, ours, flagged))
            cand.append(record(task, i, theirs, flagged))
    return make_run("main", base), make_run("candidate", cand, "/tmp/smollm2-q4_0.gguf")


@functools.cache
def gate(spec, must_pass=frozenset()):
    """The gate's comparison of {task: (n, broke, fixed)} (as `((task, (n, broke, fixed)), ...)`
    so it can be cached: the exact tests take a second per unit)."""
    base, cand = pair_of_runs(dict(spec), must_pass)
    return compare(base, cand, Policy())


def first(comparison):
    return render_markdown(comparison).splitlines()[0]


def cells(row):
    """A table row's cells, split at unescaped pipes as GitHub does."""
    return re.findall(r"(?:\\.|[^|\\])+", row.strip().strip("|"))


def above_the_fold(text):
    return text[: text.index("<details>")].splitlines()


PASSING = (("arc_easy", (300, 0, 0)), ("boolq", (400, 3, 1)), ("piqa", (300, 0, 0)))
SMALL = (("arc_easy", (40, 0, 0)), ("boolq", (40, 6, 1)), ("piqa", (40, 1, 1)))


def test_a_pass_names_the_unit_closest_to_its_limit_and_its_bound():
    result = gate(PASSING)
    assert result.verdict is Verdict.PASS
    boolq = next(u for u in result.units if u.name == "boolq")
    assert max(result.units, key=lambda u: u.bounds.at_most) is boolq
    assert first(result) == (
        "## regress: ✅ PASS: every unit within its limit; closest: boolq dropped 0.5 pts; "
        f"the drop is at most {boolq.bounds.at_most * 100:.1f} pts, within the 2.0-pt limit"
    )


def test_a_regression_names_the_unit_its_drop_and_its_bound():
    result = gate((("arc_easy", (300, 0, 0)), ("boolq", (400, 60, 10)), ("piqa", (400, 30, 10))))
    assert result.verdict is Verdict.REGRESSION
    boolq, piqa = (next(u for u in result.units if u.name == n) for n in ("boolq", "piqa"))
    assert boolq.verdict is Verdict.REGRESSION
    assert boolq.bounds.at_least > 0.02
    expected = (
        "## regress: ❌ REGRESSION: boolq dropped 12.5 pts (60 broke, 10 fixed); the drop is at "
        f"least {boolq.bounds.at_least * 100:.1f} pts, beyond the 2.0-pt limit"
    )
    # piqa's 5-point drop may regress or not: it is counted after boolq, never named first.
    more = "; 1 more unit regressed" if piqa.verdict is Verdict.REGRESSION else ""
    assert first(result) == expected + more


def test_too_few_examples_says_so_first_with_the_n_that_would_decide():
    """Issue #27: 40 examples per task, boolq down 12.5 points (6 broke, 1 fixed)."""
    result = gate(SMALL)
    assert result.verdict is Verdict.INCONCLUSIVE and result.exit_code == 0
    needed = max(u.n_needed for u in result.units)
    assert needed > 1000  # a 4-point drop needs thousands of examples, not 100
    about = f"{round(needed, -(len(str(needed)) - 2)):,}"
    assert first(result) == (
        "## regress: ⚠️ INCONCLUSIVE (not blocking): only 40 examples per unit; 100 needed; a new "
        f"check over about {about} examples would detect a 4.0-pt drop. Largest change: boolq "
        "dropped 12.5 pts (6 broke, 1 fixed)"
    )


def test_a_golden_set_regression_says_so_first():
    spec = (("arc_easy", (300, 0, 0)), ("boolq", (400, 2, 1)), ("golden_support", (30, 1, 0)))
    result = gate(spec, frozenset({("golden_support", 0)}))
    assert result.verdict is Verdict.REGRESSION
    assert all(u.verdict is not Verdict.REGRESSION for u in result.units)
    text = render_markdown(result)
    assert text.splitlines()[0] == (
        "## regress: ❌ REGRESSION in golden set golden_support: must-pass item doc 0 regressed"
    )
    assert text.splitlines()[2].startswith(
        "**candidate** vs baseline **main**, suite `builtin`: golden set golden_support failed, "
    )
    assert "- ❌ **golden set golden_support**: must-pass item doc 0 regressed" in (
        "\n".join(above_the_fold(text))
    )


def test_check_labels_the_candidate_by_its_model_file_or_its_name():
    base, cand = pair_of_runs({"boolq": (100, 0, 0)})
    result = check(base, cand).comparison
    assert (result.candidate.label, result.candidate.run) == ("smollm2-q4_0.gguf", "candidate")
    assert result.baseline.label == "main"
    assert "**smollm2-q4_0.gguf** vs baseline **main**" in render_markdown(result)
    named = check(base, cand, CheckOptions(candidate_name="pr-42")).comparison
    assert "**pr-42** vs baseline **main**" in render_markdown(named)
    assert '"label": "pr-42"' in render_json(named)


def hostile_flips(count):
    """Flips whose texts a hostile dataset and model wrote: every cell must stay one cell."""
    texts = ["<img src=x onerror=alert(1)>", "a | b\n\n</details>", "@octocat ![x](http://e/p)"]
    return tuple(
        Flip(
            "boolq",
            i,
            0,
            1,
            0,
            True,
            "ok",
            question=texts[i % 3] * 20,
            baseline_answer="yes",
            candidate_answer=texts[(i + 1) % 3],
            target_answer="yes",
        )
        for i in range(count)
    )


@pytest.mark.parametrize("warnings", [0, 1, 5])
def test_three_units_fit_thirty_lines_above_the_fold(warnings):
    """The worst three-unit case: none passes, flips to show, warnings."""
    result = gate(SMALL[:2] + (("piqa", (400, 30, 10)),))
    result = dataclasses.replace(
        result,
        flips=hostile_flips(30),
        n_flips=30,
        warnings=tuple(f"warning {i}" for i in range(warnings)),
    )
    text = render_markdown(result)
    top = above_the_fold(text)
    assert len(top) <= FOLD_LINES
    # The first flips are above the fold, with their question, not their choice indices.
    rows = [line for line in top if line.startswith("| boolq | ") and "broke |" in line]
    assert rows and rows[0].startswith("| boolq | 0 | &lt;img src=x onerror=alert(1)>&lt;img")
    assert "| yes | a \\| b &lt;/details> | yes | ❌ broke |" in rows[0]
    # The jargon sits below the fold.
    for term in ("adj. p", "MDE", "b / c", "KL", "ECE"):
        assert term not in "\n".join(top)
    assert "Glossary" in top[-2]
    # Posted as a comment, every flip row keeps its seven cells.
    body = comment_body(text)
    assert "<img" not in body and "@octocat" not in body and "![" not in body
    # A question's `</details>` is text: the report's own folds stay balanced.
    assert body.count("<details>") == body.count("</details>") == text.count("<details>") > 0
    shown = [line for line in body.splitlines() if line.endswith("❌ broke |")]
    assert len(shown) == 25 and all(len(cells(line)) == 7 for line in shown)
    assert text.endswith(f"\n{MARKER}\n")


def test_an_empty_answer_shows_as_empty_and_a_stored_run_falls_back_to_indices():
    result = gate(PASSING)
    flips = (
        Flip("boolq", 3, "", "x", "y", True, "ok"),
        Flip("boolq", 4, 0, 1, 0, True, "ok", "Is it?", "", "no", "yes"),
    )
    text = render_markdown(dataclasses.replace(result, flips=flips, n_flips=2))
    assert "| boolq | 3 | – | (empty) | x | y | ❌ broke |" in text
    assert "| boolq | 4 | Is it? | (empty) | no | yes | ❌ broke |" in text
    # A check of a stored run has no documents: the flips keep the recorded predictions.
    stored = gate(PASSING)
    assert all(f.question is None for f in stored.flips)
    assert "| task | doc | baseline | candidate | expected |  |" in render_markdown(stored)


def test_flips_carry_the_question_and_both_answers_texts_from_the_documents():
    [task] = BUILTIN.get(["builtin_arithmetic"])
    prepared = prepare([TaskSpec(task, limit=3)], DataSource())
    example = prepared[0][1][0]
    wrong = (example.target + 1) % len(example.requests)
    flips = (
        Flip(task.name, example.doc_id, example.target, wrong, example.target, True, "ok"),
        Flip(task.name, 999, 0, 1, 0, True, "ok"),  # not among the documents: indices stay
    )
    filled = with_texts(flips, prepared)
    right = example.requests[example.target].continuation.strip()
    assert filled[0].question == example.doc["question"]
    assert filled[0].baseline_answer == filled[0].target_answer == right
    assert filled[0].candidate_answer == example.requests[wrong].continuation.strip() != right
    assert filled[1] == flips[1]


def test_a_lettered_choice_shows_its_option_and_a_prompt_stands_in_for_a_question():
    context = "Question: 1 + 1?\nAnswer: 2\n\nWhere is the Louvre?\nA. Paris\nB. Rome\nAnswer:"
    requests = (LoglikelihoodRequest(context, " A"), LoglikelihoodRequest(context, " B"))
    lettered = Example(0, {"choices": ["Paris", "Rome"]}, requests, 0)
    spec = TaskSpec(SimpleNamespace(name="mmlu_x"))  # only the task's name is read
    [flip] = with_texts((Flip("mmlu_x", 0, 0, 1, 0, True, "ok"),), [(spec, [lettered])])
    assert (flip.baseline_answer, flip.candidate_answer) == ("A. Paris", "B. Rome")
    assert flip.question == "Where is the Louvre?\nA. Paris\nB. Rome\nAnswer:"
