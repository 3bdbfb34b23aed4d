"""Scoring one example and aggregating a task, from given model outputs (no model needed)."""

from __future__ import annotations

import math

import pytest

from regress.core.requests import GenerateResult, LoglikelihoodResult, RollingResult
from regress.tasks import get_tasks, group_aggregate
from regress.tasks.base import Example, Scored
from regress.tasks.gsm8k import FLEXIBLE, STRICT, extract, normalize
from regress.tasks.metrics import mean_with_stderr


def results(*logliks: float) -> list[LoglikelihoodResult]:
    return [LoglikelihoodResult(logprob=ll, is_greedy=False, n_tokens=1) for ll in logliks]


def arc_example(choices: list[str], gold: int) -> Example:
    labels = list("ABCDE"[: len(choices)])
    doc = {
        "id": "x",
        "question": "Which?",
        "choices": {"text": choices, "label": labels},
        "answerKey": labels[gold],
    }
    return Example(doc_id=0, doc=doc, requests=(), target=gold)


def test_acc_and_acc_norm_can_disagree() -> None:
    [arc] = get_tasks(["arc_easy"])
    # Summed, "a" wins; per character (-2/1 vs -5/10), the long choice wins.
    scored = arc.score(arc_example(["a", "bbbbbbbbbb"], gold=1), results(-2.0, -5.0))
    assert scored.metrics == {"acc": 0.0, "acc_norm": 1.0}
    assert (scored.pred, scored.correct) == (0, 0)
    assert scored.scores == {"loglik": [-2.0, -5.0], "is_greedy": [False, False], "chars": [1, 10]}


def test_ties_go_to_the_first_choice() -> None:
    [arc] = get_tasks(["arc_easy"])
    scored = arc.score(arc_example(["yes", "yes!", "no"], gold=0), results(-1.0, -1.0, -3.0))
    assert (scored.pred, scored.correct, scored.metrics["acc"]) == (0, 1, 1.0)


def test_hellaswag_predicts_and_gates_on_acc_norm() -> None:
    [hellaswag] = get_tasks(["hellaswag"])
    doc = {"query": "q", "choices": ["a", "bbbbbbbbbb", "cc", "dd"], "gold": 1}
    scored = hellaswag.score(Example(0, doc, (), 1), results(-2.0, -5.0, -9.0, -9.0))
    assert scored.metrics == {"acc": 0.0, "acc_norm": 1.0}
    assert (scored.pred, scored.correct) == (1, 1)


def test_mmlu_reports_acc_only() -> None:
    [anatomy] = get_tasks(["mmlu_anatomy"])
    doc = {"question": "q", "subject": "anatomy", "choices": ["1", "2", "3", "4"], "answer": 2}
    scored = anatomy.score(Example(0, doc, (), 2), results(-4.0, -3.0, -1.5, -2.0))
    assert scored.metrics == {"acc": 1.0}
    assert scored.scores["chars"] == [1, 1, 1, 1]


def truthful_doc() -> dict:
    targets = {"choices": ["t1", "t2", "f1"], "labels": [1, 1, 0]}
    return {"question": "q", "mc1_targets": targets, "mc2_targets": targets}


def test_truthfulqa_mc2_is_the_normalised_mass_on_true_answers() -> None:
    [mc2] = get_tasks(["truthfulqa_mc2"])
    logliks = [math.log(0.2), math.log(0.1), math.log(0.3)]
    scored = mc2.score(Example(0, truthful_doc(), (), 0), results(*logliks))
    assert scored.metrics["acc"] == pytest.approx(0.5)  # (0.2 + 0.1) / 0.6
    assert (scored.pred, scored.correct) == (2, None)
    # Very unlikely answers still give a mass (no 0/0).
    far = mc2.score(Example(0, truthful_doc(), (), 0), results(-900.0, -2000.0, -901.0))
    assert far.metrics["acc"] == pytest.approx(1 / (1 + math.exp(-1)))


def test_truthfulqa_mc1_is_plain_accuracy() -> None:
    [mc1] = get_tasks(["truthfulqa_mc1"])
    scored = mc1.score(Example(0, truthful_doc(), (), 0), results(-1.0, -0.5, -2.0))
    assert (scored.pred, scored.correct, scored.metrics) == (1, 0, {"acc": 0.0})


def test_multiple_choice_aggregate_is_mean_with_sample_stderr() -> None:
    [arc] = get_tasks(["arc_easy"])
    scored = [Scored(pred=0, correct=c, metrics={"acc": c, "acc_norm": 1.0}) for c in (1, 0, 1, 1)]
    assert arc.aggregate(scored) == {
        "acc": 0.75,
        "acc_stderr": pytest.approx(0.25),  # stdev(ddof=1) = 0.5, over sqrt(4)
        "acc_norm": 1.0,
        "acc_norm_stderr": 0.0,
    }
    assert math.isnan(mean_with_stderr("acc", [1.0])["acc_stderr"])


@pytest.mark.parametrize(
    ("text", "strict", "flexible"),
    [
        ("Janet sells 9 eggs.\n#### 18", "18", "18"),
        ("The answer is $1,234.50.", "[invalid]", "$1,234.50."),
        ("#### -7.5\nQuestion", "-7.5", "-7.5"),
        ("so 12 and then 7 apples", "[invalid]", "7"),
        ("no number", "[invalid]", "[invalid]"),
    ],
)
def test_gsm8k_filters(text: str, strict: str, flexible: str) -> None:
    assert extract(text, STRICT, last=False) == strict
    assert extract(text, FLEXIBLE, last=True) == flexible


def test_gsm8k_exact_match_ignores_commas_dollars_and_a_final_period() -> None:
    [gsm8k] = get_tasks(["gsm8k"])
    gold = normalize("She makes 9 * 2 = $<<9*2=18>>1,234.5.\n#### 1,234.5")
    assert gold == "1234.5"
    example = Example(0, {"question": "q", "answer": "#### 1,234.5"}, (), gold)
    scored = gsm8k.score(example, [GenerateResult(text="It is $1,234.5.", n_tokens=5)])
    assert scored.metrics == {"exact_match": 0.0, "exact_match_flexible": 1.0}
    assert (scored.pred, scored.correct) == ("[invalid]", 0)
    strict = gsm8k.score(example, [GenerateResult(text="#### 1234.5\n", n_tokens=5)])
    assert (strict.pred, strict.correct) == ("1234.5", 1)


def test_wikitext_perplexity_is_corpus_level() -> None:
    [wikitext] = get_tasks(["wikitext"])
    pages = [" = A = \n x y z \n", " = B = \n \u00e9 \n"]
    scored = [
        wikitext.score(Example(i, {"page": p}, (), None), [RollingResult(ll, 9)])
        for i, (p, ll) in enumerate(zip(pages, (-10.0, -20.0), strict=True))
    ]
    # Words split on whitespace runs (empty ends included); bytes in UTF-8.
    assert [(s.metrics["n_words"], s.metrics["n_bytes"]) for s in scored] == [(8, 16), (6, 13)]
    assert scored[0].metrics["word_perplexity"] == pytest.approx(math.exp(10 / 8))
    assert scored[0].correct is None
    assert wikitext.aggregate(scored) == {
        "word_perplexity": pytest.approx(math.exp(30 / 14)),
        "byte_perplexity": pytest.approx(math.exp(30 / 29)),
        "bits_per_byte": pytest.approx(30 / 29 / math.log(2)),
    }


def test_group_aggregate_weights_by_size_and_pools_stderr() -> None:
    results_by_task = {
        "mmlu_a": {"acc": 0.5, "acc_stderr": 0.1},
        "mmlu_b": {"acc": 0.7, "acc_stderr": 0.05},
    }
    out = group_aggregate(results_by_task, {"mmlu_a": 10, "mmlu_b": 30})
    assert out["acc"] == pytest.approx(0.65)
    pooled = (9 * 0.1**2 * 10 + 29 * 0.05**2 * 30) / (40 - 2)
    assert out["acc_stderr"] == pytest.approx(math.sqrt(pooled / 40))
