"""The built-in generated suite: deterministic, distinct splits, answers that are right."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from regress.run.runner import suite_specs
from regress.run.suite import load_suite
from regress.tasks import DataSource, get_tasks
from regress.tasks.base import doc_hash
from regress.tasks.builtin import DAYS, MONTHS, UNITS, builtin_task, generate

ROOT = Path(__file__).resolve().parents[1]

KINDS = ["arithmetic", "comparison", "ordering", "dates", "units"]
NO_DATA = DataSource()


@pytest.mark.parametrize("kind", KINDS)
def test_same_seed_same_documents_other_seed_other_documents(kind: str) -> None:
    assert generate(kind, "test", seed=0) == generate(kind, "test", seed=0)
    assert generate(kind, "test", seed=0) != generate(kind, "test", seed=1)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", [0, 7])
def test_splits_hold_distinct_questions_and_never_share_one(kind: str, seed: int) -> None:
    """A pool of 400 test questions and 100 train ones, none in both."""
    test, train = generate(kind, "test", seed), generate(kind, "train", seed)
    questions = [d["question"] for d in test]
    assert len(test) == 400 == len(set(questions)) and len(train) == 100
    assert not set(questions) & {d["question"] for d in train}
    for doc in test + train:
        assert len(set(doc["choices"])) == len(doc["choices"]) in (2, 4)
    # The right answer is not parked at one position, in the first 100 or the rest.
    for part in (test[:100], test[100:]):
        assert len({d["answer"] for d in part}) == (2 if kind == "comparison" else 4)


@pytest.mark.parametrize("kind", KINDS)
def test_the_first_100_are_the_embedded_defaults_questions(kind: str) -> None:
    """The pool only adds questions: its first 100 per skill are the ones baselines/main was
    made on, document for document, and suites/builtin.yaml takes exactly those."""
    stored = (ROOT / "baselines" / "main" / "records" / f"builtin_{kind}.jsonl").read_text()
    hashes = [json.loads(line)["doc_hash"] for line in stored.splitlines()]
    assert hashes == [doc_hash(d) for d in generate(kind, "test", 0)[:100]]
    assert generate(kind, "test", 0, 100) == generate(kind, "test", 0)[:100]
    for suite, n in (("builtin.yaml", 100), ("builtin-pool.yaml", 400)):
        [spec] = [
            s for s in suite_specs(load_suite(ROOT / "suites" / suite)) if kind in s.task.name
        ]
        assert len(spec.task.examples(NO_DATA, limit=spec.limit)) == n


def answer(doc: dict) -> str:
    return doc["choices"][doc["answer"]]


def test_arithmetic_answers_are_correct() -> None:
    for doc in generate("arithmetic", "test", 0) + generate("arithmetic", "train", 3):
        a, op, b = re.fullmatch(r"What is (\d+) (\+|-|times) (\d+)\?", doc["question"]).groups()
        expected = {"+": int(a) + int(b), "-": int(a) - int(b), "times": int(a) * int(b)}[op]
        assert answer(doc) == str(expected)
        assert all(int(c) > 0 for c in doc["choices"])


def test_comparison_answers_are_correct() -> None:
    for doc in generate("comparison", "test", 0):
        word, x, y = re.fullmatch(
            r"Which is (larger|smaller): (\S+) or (\S+)\?", doc["question"]
        ).groups()
        pick = max if word == "larger" else min
        assert float(answer(doc)) == pick(float(x), float(y))


def test_ordering_and_dates_answers_are_correct() -> None:
    for doc in generate("ordering", "test", 0):
        kind, direction, item = re.fullmatch(
            r"Which (\w+) comes (after|before) (\w+)\?", doc["question"]
        ).groups()
        items = {"day": DAYS, "month": MONTHS}.get(kind)
        if items is None:
            letters = kind == "letter"
            items = [chr(c) for c in range(65, 91)] if letters else [str(n) for n in range(1, 1000)]
        step = 1 if direction == "after" else -1
        assert answer(doc) == items[(items.index(item) + step) % len(items)]
    for doc in generate("dates", "test", 0):
        if m := re.fullmatch(
            r"If today is (\w+), what day will it be in (\d+) days\?", doc["question"]
        ):
            assert answer(doc) == DAYS[(DAYS.index(m[1]) + int(m[2])) % 7]
        elif m := re.fullmatch(
            r"Which month is (\d+) months (after|before) (\w+)\?", doc["question"]
        ):
            sign = 1 if m[2] == "after" else -1
            assert answer(doc) == MONTHS[(MONTHS.index(m[3]) + sign * int(m[1])) % 12]
        else:
            month = re.fullmatch(r"How many days are there in (\w+)\?", doc["question"])[1]
            assert answer(doc) == str(
                [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31][MONTHS.index(month)]
            )


def test_units_answers_are_correct() -> None:
    factor = {(big, small): f for big, small, f in UNITS}
    for doc in generate("units", "test", 0):
        m = re.fullmatch(r"How many (\w+) are in (\d+) (\w+)\?", doc["question"])
        asked, q, given = m[1], int(m[2]), m[3]
        if (given, asked) in factor:
            assert answer(doc) == str(q * factor[(given, asked)])
        else:
            assert answer(doc) == str(q // factor[(asked, given)])


def test_builtin_group_renders_arc_style_prompts_without_data() -> None:
    tasks = get_tasks(["builtin"])
    assert [t.name for t in tasks] == [f"builtin_{k}" for k in KINDS]
    [example] = tasks[0].examples(NO_DATA, limit=1)
    question = example.doc["question"]
    assert example.requests[0].context == f"Question: {question}\nAnswer:"
    assert [r.continuation for r in example.requests] == [" " + c for c in example.doc["choices"]]
    shot = builtin_task("arithmetic").examples(NO_DATA, num_fewshot=2, limit=1)[0]
    context = shot.requests[0].context
    assert context.count("Question: ") == 3 and context.endswith(f"Question: {question}\nAnswer:")
    assert builtin_task("units", seed=5).examples(NO_DATA) != tasks[4].examples(NO_DATA)
