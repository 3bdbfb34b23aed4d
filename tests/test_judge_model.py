"""Gemma 3 270M, in process, judges SmolLM2-135M's answers against its own: the whole judged
gate on real models, with every verdict checked against log-probs computed here by
llama-cpp-python directly.

The oracle scores each verdict token after the rendered prompt with one plain `Llama.eval`;
regress computes the same log-probabilities through its backend's batched loglikelihood
requests. The two agree to float noise on one machine (the test allows 0.02 nats, ample for
a 270M model's kernels on one CPU build); a verdict is compared only where its margin over
the runner-up exceeds that.
"""

from __future__ import annotations

import itertools
import json
import re

import numpy as np
import pytest
from scipy.special import log_softmax

from regress.backends.llama_cpp import MIN_ROWS
from regress.backends.models import file_sha256, resolve_model_path
from regress.checks import CheckOptions, check
from regress.gate.policy import Policy
from regress.gate.results import Verdict
from regress.run.engine import TaskSpec
from regress.run.generation import GenerationSettings
from regress.run.judge import JudgeSpec, Outcome, outcome_of
from regress.run.runner import RunPlan, execute
from regress.tasks import get_tasks
from regress.tasks.base import DataSource
from regress.tasks.catalog import load_catalog
from regress.tasks.conversation import conversation_task, judge_answer, turn_answer, turn_question
from regress.tasks.judge_templates import BUILTIN

pytestmark = pytest.mark.model

N = 4
TOLERANCE = 0.02


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory):
    """SmolLM2 (baseline) and Gemma (candidate) answering 4 open questions, judged by Gemma."""
    # Short answers keep the judge's prompts short: the plumbing is the same.
    short = GenerationSettings(gen_kwargs={"max_gen_toks": 24})
    specs = (TaskSpec(get_tasks(["open_answers"])[0], 0, N, generation=short),)
    base = execute(RunPlan(specs, "smollm2-135m", name="base")).run
    cand = execute(RunPlan(specs, "gemma3-270m", name="cand")).run
    spec = JudgeSpec("gemma3-270m", model_args={"n_ctx": 2048}, min_consistency=0.0)
    policy = Policy(min_examples=N, judge=spec)
    cache = tmp_path_factory.mktemp("judge-cache")
    result = check(base, cand, CheckOptions(policy=policy, cache_dir=cache))
    return base, cand, result, policy, cache


def _oracle(prompts: list[str]) -> list[dict[str, float]]:
    """log P(verdict | prompt + "[[") for A, B and C, from one pass per prompt."""
    import llama_cpp

    llm = llama_cpp.Llama(
        str(resolve_model_path("gemma3-270m")), n_ctx=2048, logits_all=True, verbose=False
    )
    out = []
    for prompt in prompts:
        context = llm.tokenize((prompt + "[[").encode(), add_bos=True, special=False)
        scores = {}
        for choice in "ABC":
            whole = llm.tokenize((prompt + "[[" + choice).encode(), add_bos=True, special=False)
            # The verdict is one token after the prompt's own: no merge across the boundary.
            assert whole[: len(context)] == context and len(whole) == len(context) + 1
            scores[choice] = whole[-1]
        llm.reset()
        # Decode calls as the backend makes them: at most n_batch tokens, none of fewer than
        # MIN_ROWS (the rows of a call choose llama.cpp's kernels: regress/backends/llama_cpp.py).
        bounds = [*range(0, len(context), llm.n_batch), len(context)]
        if len(bounds) > 2 and bounds[-1] - bounds[-2] < MIN_ROWS:
            bounds[-2] = len(context) - MIN_ROWS
        for lo, hi in itertools.pairwise(bounds):
            llm.eval(context[lo:hi])
        logprobs = log_softmax(np.asarray(llm.scores[llm.n_tokens - 1], dtype=np.float64))
        out.append({c: float(logprobs[t]) for c, t in scores.items()})
    llm.close()
    return out


def test_a_real_judge_reads_verdicts_from_log_probs_in_both_orders(judged) -> None:
    base, cand, result, _, _ = judged
    judgements = result.judgements
    assert len(judgements) == N
    template = BUILTIN["pairwise"]
    prompts = [
        template.render(j.question, answer_a=a, answer_b=b)
        for j in judgements
        for a, b in ((j.baseline, j.candidate), (j.candidate, j.baseline))
    ]
    oracle = _oracle(prompts)
    for k, j in enumerate(judgements):
        record_b = base.records["open_answers"][k]
        record_c = cand.records["open_answers"][k]
        assert (j.baseline, j.candidate) == (record_b.pred, record_c.pred)
        sides = []
        expected_both = oracle[2 * k : 2 * k + 2]
        for order, (reply, expected) in enumerate(zip(j.replies, expected_both, strict=True)):
            found = dict(re.findall(r"([ABC]) (-?\d+\.\d+)", reply))
            for choice in "ABC":
                assert float(found[choice]) == pytest.approx(expected[choice], abs=TOLERANCE)
            ranked = sorted(expected.values(), reverse=True)
            verdict = max(expected, key=expected.get)
            if ranked[0] - ranked[1] > TOLERANCE:
                shown = ("baseline", "candidate") if order == 0 else ("candidate", "baseline")
                side = {"A": shown[0], "B": shown[1], "C": "tie"}[verdict]
                assert j.verdicts[order] == side
            sides.append(j.verdicts[order])
        assert (j.outcome, j.consistent) == outcome_of(*sides)


def test_the_gate_counts_what_the_judge_said(judged) -> None:
    _, _, result, _, _ = judged
    (unit,) = result.comparison.units
    outcomes = [j.outcome for j in result.judgements]
    wins, losses = outcomes.count(Outcome.WIN), outcomes.count(Outcome.LOSS)
    assert (unit.n, unit.b, unit.c) == (N, losses, wins)
    assert unit.judged.ties == outcomes.count(Outcome.TIE)
    assert unit.judged.identity["read"] == "logprobs"
    assert unit.judged.identity["model_sha256"] == file_sha256(resolve_model_path("gemma3-270m"))
    # Four examples decide nothing at any judge: never a PASS from so little.
    assert unit.verdict in (Verdict.INCONCLUSIVE, Verdict.REGRESSION)


def test_a_rerun_replays_the_real_judge_from_the_cache(judged) -> None:
    base, cand, result, policy, cache = judged
    again = check(base, cand, CheckOptions(policy=policy, cache_dir=cache))
    assert again.judgements == result.judgements
    (use,) = [u for u in again.comparison.cache if u.run == "judge"]
    assert (use.replayed, use.computed) == (2 * N * 3, 0)


def test_a_real_judge_reads_whole_conversations(tmp_path) -> None:
    """A built-in conversation run on SmolLM2, judged whole by Gemma (the same run on both
    sides: the plumbing, not a verdict): the judge's question holds every user turn, each
    answer every real reply turn by turn, and its verdicts are the oracle's log-probs."""
    specs = (TaskSpec(get_tasks(["conversations"])[0], 0, 1),)
    base = execute(RunPlan(specs, "smollm2-135m", name="base")).run
    spec = JudgeSpec(
        "gemma3-270m", model_args={"n_ctx": 2048}, min_consistency=0.0, units=("conversations",)
    )
    result = check(base, base, CheckOptions(policy=Policy(min_examples=1, judge=spec)))
    records = base.records["conversations"]
    assert [j.doc_id for j in result.judgements] == [r.doc_id for r in records]
    docs = {e.doc_id: e.doc for e in get_tasks(["conversations"])[0].examples(DataSource())}
    prompts = []
    for j, record in zip(result.judgements, records, strict=True):
        assert j.baseline == j.candidate == judge_answer(record.pred)
        assert len(record.pred) == len(docs[j.doc_id]["turns"]) >= 3
        for turn in docs[j.doc_id]["turns"]:
            assert turn["user"] in j.question
        prompts += [
            BUILTIN["pairwise"].render(j.question, answer_a=j.baseline, answer_b=j.baseline)
        ]
    for j, expected in zip(result.judgements, _oracle(prompts), strict=True):
        for reply in j.replies:  # both orders show the same texts: the same prompt
            found = dict(re.findall(r"([ABC]) (-?\d+\.\d+)", reply))
            for choice in "ABC":
                assert float(found[choice]) == pytest.approx(expected[choice], abs=TOLERANCE)
    (unit,) = result.comparison.units
    assert unit.name == "conversations" and unit.judged is not None and unit.n == 1


def _graded_oracle(prompts: list[str]) -> list[dict[str, float]]:
    """log P(grade + "]]" | prompt + "[[") for grades 1-10, from one eval per grade: a
    multi-token continuation is the sum of its tokens' log-probs. It evaluates what regress
    does, as lm-eval does: the context and every continuation token but the last, in one
    batch. A pass one token longer moves earlier positions' floats on this build (0.09 nats
    measured on Gemma's `10]]`: llama.cpp picks its matrix kernels by the batch's rows)."""
    import llama_cpp

    llm = llama_cpp.Llama(
        str(resolve_model_path("gemma3-270m")),
        n_ctx=2048,
        n_batch=2048,
        n_ubatch=2048,
        logits_all=True,
        verbose=False,
    )
    out = []
    for prompt in prompts:
        context = llm.tokenize((prompt + "[[").encode(), add_bos=True, special=False)
        scores = {}
        for grade in range(1, 11):
            whole = llm.tokenize(f"{prompt}[[{grade}]]".encode(), add_bos=True, special=False)
            assert whole[: len(context)] == context
            llm.reset()
            llm.eval(whole[:-1])
            logits = np.asarray(llm.scores[: llm.n_tokens], dtype=np.float64)
            scores[str(grade)] = sum(
                float(log_softmax(logits[i - 1])[whole[i]]) for i in range(len(context), len(whole))
            )
        out.append(scores)
    llm.close()
    return out


def test_a_real_judge_grades_judged_conversation_turns(tmp_path) -> None:
    """SmolLM2 answers a two-turn conversation whose second turn the judge checks;
    Gemma grades it 1-10 from log-probs (the same run on both sides: the plumbing, not a
    verdict). Every grade is the oracle's most likely `k]]`, and the conversation passes
    exactly when its code-checked first turn passed and its grade reached `min` (one
    conversation: the oracle's ten full passes per graded turn are most of this test's time)."""
    items = [
        {
            "id": f"c{k}",
            "turns": [
                {
                    "user": f"My favourite number is {k + 3}. Repeat it.",
                    "check": {"expected": str(k + 3), "match": "contains"},
                    "max_tokens": 12,
                },
                {
                    "user": "Now explain why numbers matter, in one sentence.",
                    "check": {"judge": {"min": 5}},
                    "max_tokens": 16,
                },
            ],
        }  # fmt: skip
        for k in range(1)
    ]
    path = tmp_path / "numbers.jsonl"
    path.write_text("".join(json.dumps(item) + "\n" for item in items), encoding="utf-8")
    task = conversation_task(path)
    base = execute(RunPlan((TaskSpec(task),), "smollm2-135m", name="base")).run
    spec = JudgeSpec("gemma3-270m", model_args={"n_ctx": 2048}, template="single")
    options = CheckOptions(
        policy=Policy(min_examples=1, judge=spec), tasks=load_catalog(golden=[path])
    )
    result = check(base, base, options)
    records = base.records[task.name]
    assert [(j.doc_id, j.turn) for j in result.judgements] == [(0, 2)]
    prompts = []
    for j, record in zip(result.judgements, records, strict=True):
        assert j.baseline == j.candidate == turn_answer(task.items[j.doc_id], record.pred, 1)
        assert j.question == turn_question(task.items[j.doc_id], 1)
        prompts.append(BUILTIN["single"].render(j.question, answer=j.baseline))
    expected_passes = []
    for j, record, expected in zip(
        result.judgements, records, _graded_oracle(prompts), strict=True
    ):
        found = dict(re.findall(r"(\d+) (-?\d+\.\d+)", j.replies[0]))
        for grade, logprob in expected.items():
            assert float(found[grade]) == pytest.approx(logprob, abs=TOLERANCE)
        ranked = sorted(expected.values(), reverse=True)
        if ranked[0] - ranked[1] > TOLERANCE:
            assert j.verdicts == (max(expected, key=expected.get),) * 2
        first = record.scores["turn_pass"][0]
        expected_passes.append(int(first == 1 and int(j.verdicts[0]) >= 5))
    (unit,) = result.comparison.units
    assert unit.judged.per_turn and (unit.n, unit.b, unit.c) == (1, 0, 0)
    assert unit.baseline == pytest.approx(sum(expected_passes))
