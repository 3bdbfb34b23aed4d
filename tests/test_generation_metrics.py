"""pass@k, failure classes, thinking, --gen-kwargs and the repeated-sampling test: pure logic,
checked against brute force and by seeded simulation."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from regress.core.errors import BadInput
from regress.core.requests import GenerateRequest, GenerateResult
from regress.run.engine import TaskSpec, evaluate
from regress.run.failures import FailureClass, Generation, classify
from regress.run.generation import GenerationSettings, parse_gen_kwargs, read_answer
from regress.run.passk import majority, pass_at_k, repeat_aggregate, sample_metrics
from regress.stats import paired_mean_test
from regress.tasks import DataSource, get_tasks


@pytest.mark.parametrize(("n", "c"), [(1, 0), (1, 1), (5, 0), (5, 2), (6, 3), (7, 7), (8, 1)])
def test_pass_at_k_equals_enumerating_every_draw(n: int, c: int) -> None:
    outcomes = [1] * c + [0] * (n - c)
    for k in range(1, n + 1):
        draws = list(itertools.combinations(range(n), k))
        brute = sum(any(outcomes[i] for i in d) for d in draws) / len(draws)
        assert pass_at_k(n, c, k) == pytest.approx(brute, abs=1e-12)


def test_pass_at_k_is_stable_where_binomials_overflow() -> None:
    # C(2000, 1000) overflows a float; the product form does not.
    value = pass_at_k(2000, 3, 1000)
    assert value == pytest.approx(1 - math.comb(1997, 1000) / math.comb(2000, 1000), rel=1e-9)
    assert pass_at_k(2000, 0, 1000) == 0.0


def test_pass_at_k_refuses_impossible_counts() -> None:
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)


def test_majority_keeps_the_first_seen_on_a_tie() -> None:
    assert majority(["7", "8", "8", "7"]) == "7"
    assert sample_metrics([0, 1, 1], voted_right=True) == pytest.approx(
        {"pass@1": 2 / 3, "pass@2": 1.0, "pass@3": 1.0, "maj@3": 1.0}
    )


def test_task_level_figures_are_clustered_by_document() -> None:
    correct = np.array([[1, 1, 1], [0, 0, 0], [1, 0, 1], [0, 1, 0]])
    per_doc = [sample_metrics(row.tolist(), bool(row.sum() >= 2)) for row in correct]
    out = repeat_aggregate(per_doc, correct)
    item_means = correct.mean(axis=1)
    assert out["pass@1"] == pytest.approx(item_means.mean())
    # The spread of the per-document means, not of the 12 samples as if independent.
    assert out["pass@1_stderr"] == pytest.approx(item_means.std(ddof=1) / 2)
    assert out["pass@1_ci_low"] < out["pass@1"] < out["pass@1_ci_high"]
    assert out["repeat_sd"] == pytest.approx(correct.mean(axis=0).std(ddof=1))


def _gen(text: str, finish: str = "stop", n: int = 20, thought: int | None = 0, pred="7"):
    settings = GenerationSettings(think_end_token="</think>")
    return Generation(read_answer(text, ("\n\n",), settings), finish, n, thought, pred)


@pytest.mark.parametrize(
    ("generation", "expected"),
    [
        (_gen("<think>add them</think> The answer is 7"), FailureClass.ANSWERED),
        (_gen("<think>" + "hmm " * 50, finish="length", n=3000, thought=3000), "reasoning_cap"),
        (_gen("<think>ok</think>7", thought=2500), FailureClass.REASONING_CAP),
        (_gen("<think>and then I", finish="eos"), FailureClass.UNTERMINATED_THINK),
        (_gen("<think>x</think> 7 is the", finish="length"), FailureClass.TRUNCATED),
        (_gen("<think>x</think>   ", pred="[invalid]"), FailureClass.EMPTY_AFTER_THINK),
        (_gen("I'm sorry, but I can't help with that.", pred="[invalid]"), "refusal"),
        (_gen("The weather is nice", pred="[invalid]"), FailureClass.NO_ANSWER),
    ],
)
def test_failure_classes_of_crafted_outputs(generation: Generation, expected: str) -> None:
    assert classify(generation, reasoning_cap=2000, output_cap=1000) == expected


def test_thinking_is_stripped_as_lm_eval_does() -> None:
    settings = GenerationSettings(think_end_token="</think>")
    read = read_answer("<think>a\n\nb</think>  #### 4\n\nQuestion: next", ("\n\n",), settings)
    # Stop strings inside the thinking do not cut it; the answer is cut at the first one.
    assert read.answer == "#### 4" and read.thinking == "<think>a\n\nb"
    plain = read_answer("#### 4\n\nmore", ("\n\n",), GenerationSettings())
    assert plain.answer == "#### 4\n\nmore"  # without thinking the backend already stopped


def test_gen_kwargs_parse_like_lm_eval_and_refuse_typos() -> None:
    assert parse_gen_kwargs("temperature=0.8,top_p=0.95,seed=1,do_sample=true") == {
        "temperature": 0.8,
        "top_p": 0.95,
        "seed": 1,
        "do_sample": True,
    }
    for bad in ("temprature=0.8", "top_p=2", "temperature", "max_gen_toks=0", "seed=x"):
        with pytest.raises(BadInput):
            parse_gen_kwargs(bad)


def test_repeats_get_consecutive_seeds_and_need_sampling() -> None:
    request = GenerateRequest("Q", until=("\n",), max_tokens=32)
    settings = GenerationSettings(gen_kwargs={"temperature": 0.7, "seed": 5}, repeats=3)
    samples = settings.samples(request)
    assert [s.seed for s in samples] == [5, 6, 7] and {s.temperature for s in samples} == {0.7}
    with pytest.raises(BadInput, match="greedy"):
        GenerationSettings(repeats=2).samples(request)
    thinking = GenerationSettings(think_end_token="</think>").apply(request)
    assert thinking.until == () and thinking.max_tokens == 2000 + 1000


def _simulate(rng: np.random.Generator, n: int, k: int, drop: float) -> tuple[np.ndarray, ...]:
    """Per-document success rates of k samples, the candidate's true rates lower by `drop`."""
    p = rng.beta(0.6, 0.6, size=n)  # documents from always-wrong to always-right
    q = np.clip(p - drop, 0, 1)
    return rng.binomial(k, p) / k, rng.binomial(k, q) / k


def test_the_repeated_sampling_test_holds_its_size_by_simulation() -> None:
    """The gate's test for pass@1 units (bootstrap-t on per-document success rates): with no
    true change it says "worse" about alpha of the time, and at a true drop equal to the
    margin it says "worse by more than the margin" about alpha of the time."""
    rng = np.random.default_rng(20261201)
    runs, n, k, margin = 400, 200, 5, 0.02
    no_change = at_margin = 0
    for _ in range(runs):
        base, cand = _simulate(rng, n, k, 0.0)
        no_change += paired_mean_test(base, cand, margin, resamples=999).pvalue < 0.05
        base, cand = _simulate(rng, n, k, margin)
        at_margin += paired_mean_test(base, cand, margin, resamples=999).margin_pvalue < 0.05
    assert 0.025 <= no_change / runs <= 0.075
    assert 0.02 <= at_margin / runs <= 0.075


def test_refusal_patterns_are_the_run_s_own() -> None:
    own = GenerationSettings(refusals=(r"\bnope\b",))
    read = read_answer("Nope, not today.", (), own)
    answer = Generation(read, "stop", 5, 0, "[invalid]")
    assert classify(answer, None, None, own.refusals) == FailureClass.REFUSAL
    assert classify(answer, None, None) == FailureClass.NO_ANSWER  # not a built-in phrasing
    assert GenerationSettings.from_dict(own.to_dict()) == own
    with pytest.raises(BadInput, match="not a regex"):
        GenerationSettings(refusals=("(unclosed",))


class _WordCounter:
    """Counts tokens as words: enough for the engine to measure thinking."""

    @staticmethod
    def count_tokens(text: str) -> int:
        return len(text.split())


@pytest.mark.parametrize(("words", "right"), [(50, True), (2500, False)])
def test_an_answer_past_the_reasoning_cap_scores_zero_everywhere(
    data_dir, words: int, right: bool
) -> None:
    [gsm8k] = get_tasks(["gsm8k"])
    settings = GenerationSettings(think_end_token="</think>")
    [example] = gsm8k.examples(DataSource(data_dir), 0, 1)
    text = "<think>" + "hmm " * words + f"</think> #### {example.target}"

    def answer(requests, progress):
        return [GenerateResult(text, words + 4, finish="eos") for _ in requests]

    [run] = evaluate(
        [TaskSpec(gsm8k, 0, 1, generation=settings)],
        _WordCounter(),
        DataSource(data_dir),
        run=answer,
    )
    [record] = run.records
    assert record.tokens["reasoning"] >= words
    assert record.scores["failure"] == ["answered" if right else "reasoning_cap"]
    # The primary metric follows the verdict: a budget would have cut this answer off.
    assert record.correct == int(right)
    assert record.metrics["exact_match"] == float(right)
    assert run.metrics["exact_match"] == float(right)
