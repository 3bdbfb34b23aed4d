"""Conversation tasks: the file format, turn-by-turn runs, checks, failure classes, the gate's
per-turn table and the clustered interval (pure logic; real models in
test_conversations_model.py)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from test_compare import info, run

from regress.backends.chat import SHIPPED, chat_template
from regress.core.errors import BadInput
from regress.core.fingerprint import RuntimeFingerprint
from regress.core.records import Status
from regress.core.requests import (
    FailedResult,
    GenerateRequest,
    GenerateResult,
    request_hash,
)
from regress.gate.compare import compare
from regress.gate.policy import Policy
from regress.gate.turns import turn_changes
from regress.report.markdown import render_markdown
from regress.run.cache import ResultCache, cached_execute
from regress.run.conversation import propagated
from regress.run.engine import TaskSpec, evaluate
from regress.run.failures import FailureClass
from regress.run.generation import GenerationSettings
from regress.run.passk import pass_hat_k
from regress.tasks import get_tasks
from regress.tasks.base import DataSource
from regress.tasks.catalog import BUILTIN, load_catalog
from regress.tasks.conversation import (
    ConversationTask,
    cluster_interval,
    conversation_task,
    judge_answer,
    judge_question,
    judge_turn,
    read_conversations,
)
from regress.tasks.formats import FormattedTask, formatted_names


class Scripted:
    """A backend whose reply to a turn is looked up by the turn's last user message; it
    records every request it is sent."""

    name = "scripted"

    def __init__(self, replies: dict[str, str], fail: str | None = None) -> None:
        self.replies = replies
        self.fail = fail
        self.sent: list[GenerateRequest] = []

    def generate(self, requests: Sequence[GenerateRequest], progress=None):
        out = []
        for request in requests:
            self.sent.append(request)
            user = request.messages[-1][1]
            if user == self.fail:
                out.append(FailedResult("timeout", "the server took too long"))
            else:
                text = self.replies.get(user, f"no idea about {user!r}")
                out.append(GenerateResult(text, len(text.split()), 10, "eos"))
            if progress:
                progress(1)
        return out

    def fingerprint(self) -> RuntimeFingerprint:
        return RuntimeFingerprint("scripted", "1", {})

    def loglikelihood(self, requests, progress=None):
        raise AssertionError("a conversation only generates")

    loglikelihood_rolling = loglikelihood


def write(path: Path, items: list[dict]) -> Path:
    path.write_text("".join(json.dumps(i) + "\n" for i in items), encoding="utf-8")
    return path


NAME_TURNS = [
    {"user": "My name is Ana.", "check": {"expected": "Ana", "match": "contains"}},
    {"user": "What is my name?", "check": {"expected": "Ana", "match": "contains"}},
    {"user": "Spell it backwards.", "check": {"expected": "anA", "match": "contains"}},
]


def one_task(tmp_path: Path, turns=NAME_TURNS, **extra) -> ConversationTask:
    return conversation_task(
        write(tmp_path / "convs.jsonl", [{"id": "c1", "turns": turns, **extra}])
    )


def evaluate_one(
    task: ConversationTask, backend: Scripted, settings: GenerationSettings | None = None, run=None
):
    spec = TaskSpec(task, generation=settings or GenerationSettings())
    [task_run] = evaluate([spec], backend, DataSource(), run=run)
    return task_run


def test_the_builtin_set_has_thirty_conversations_of_three_to_five_turns() -> None:
    [task] = get_tasks(["conversations"])
    examples = task.examples(DataSource())
    assert len(examples) == 30 and len({e.target for e in examples}) == 30
    assert all(3 <= len(e.requests) <= 5 for e in examples)
    tags = {tag for e in examples for tag in e.doc["tags"]}
    assert tags == {"state", "format", "correction"}
    # Every turn's prompt holds the whole conversation so far (placeholders for own replies).
    for example in examples:
        for turn, request in enumerate(example.requests):
            assert len([m for m in request.messages if m[0] == "user"]) == turn + 1


def test_turn_two_holds_turn_ones_reply_verbatim(tmp_path: Path) -> None:
    reply = "Hello Ana!  Nice to meet you.\n"
    backend = Scripted({"My name is Ana.": reply, "What is my name?": "Ana."})
    task_run = evaluate_one(one_task(tmp_path, system="Be brief."), backend)
    first, second, third = backend.sent
    assert first.messages == (("system", "Be brief."), ("user", "My name is Ana."))
    assert second.messages == (*first.messages, ("assistant", reply), ("user", "What is my name?"))
    assert third.messages[:-1] == (*second.messages, ("assistant", "Ana."))
    [record] = task_run.records
    assert record.pred == [reply, "Ana.", "no idea about 'Spell it backwards.'"]
    assert record.scores["turn_pass"] == [1, 1, 0]
    assert record.correct == 0 and record.metrics["turns_before_failure"] == 2.0
    assert record.metrics["turn_pass"] == pytest.approx(2 / 3)


def test_the_cache_key_covers_the_whole_history(tmp_path: Path) -> None:
    task = one_task(tmp_path)
    cache = ResultCache(tmp_path / "cache")
    first = Scripted({"My name is Ana.": "Hi Ana", "What is my name?": "Ana"})

    def through(backend: Scripted):
        return lambda requests, progress: cached_execute(backend, requests, progress, cache, "m")

    evaluate_one(task, first, run=through(first))
    assert (cache.hits, cache.misses) == (0, 3)
    again = Scripted({})
    evaluate_one(task, again, run=through(again))
    assert again.sent == [] and cache.hits == 3  # the same history: every turn replayed
    # Turn 1 answered otherwise (the cached row dropped): turns 2 and 3 are new prompts, so
    # nothing after turn 1 may replay the old answers.
    other = Scripted({"My name is Ana.": "Who is Ana?", "What is my name?": "Ana"})
    cached_before = cache.hits
    changed = evaluate_one(
        task, other, run=lambda reqs, p: cached_execute(other, reqs, p, cache, "n")
    )
    assert cache.hits == cached_before and len(other.sent) == 3
    assert changed.records[0].pred[0] == "Who is Ana?"
    keys = {request_hash(r) for r in first.sent} & {request_hash(r) for r in other.sent}
    assert keys == {request_hash(first.sent[0])}


def test_a_failed_turn_ends_its_conversation_as_a_failure_not_a_wrong_answer(
    tmp_path: Path,
) -> None:
    backend = Scripted({"My name is Ana.": "Hi Ana"}, fail="What is my name?")
    [record] = evaluate_one(one_task(tmp_path), backend).records
    assert len(backend.sent) == 2  # turn 3 is never asked
    assert record.status is Status.TIMEOUT and record.correct is None
    assert not record.ok


def test_reference_history_puts_the_given_replies_in_context(tmp_path: Path) -> None:
    turns = [
        {"user": "My name is Ana.", "assistant": "Nice to meet you, Ana."},
        {"user": "What is my name?", "check": {"expected": "Ana", "match": "contains"}},
    ]
    backend = Scripted({"My name is Ana.": "WRONG", "What is my name?": "Ana"})
    [record] = evaluate_one(one_task(tmp_path, turns, history="reference"), backend).records
    assert backend.sent[1].messages[1] == ("assistant", "Nice to meet you, Ana.")
    assert record.correct == 1 and record.scores["turn_pass"] == [None, 1]


def test_a_judge_reads_what_the_model_saw_and_each_reply(tmp_path: Path) -> None:
    turns = [
        {"user": "My name is Ana.", "assistant": "Nice to meet you, Ana."},
        {"user": "What is my name?", "check": {"expected": "Ana", "match": "contains"}},
    ]
    mine = [{"user": turns[0]["user"]}, turns[1]]
    [own] = one_task(tmp_path, mine, system="Be brief.").examples(DataSource())
    assert judge_question(own.doc) == (
        "(System message: Be brief.)\n\nUser, turn 1 of 2: My name is Ana.\n\n"
        "User, turn 2 of 2: What is my name?"
    )
    # With the reference history the given reply was in the model's context: so in the question.
    [given] = one_task(tmp_path, turns, history="reference").examples(DataSource())
    assert judge_question(given.doc) == (
        "User, turn 1 of 2: My name is Ana.\n\n"
        "(Given assistant reply to turn 1: Nice to meet you, Ana.)\n\n"
        "User, turn 2 of 2: What is my name?"
    )
    assert (
        judge_answer(["Hi Ana.", "Ana."]) == "Assistant, turn 1: Hi Ana.\n\nAssistant, turn 2: Ana."
    )


def test_the_checks_a_turn_can_have() -> None:
    contains = {"expected": ["Paris"], "match": "contains", "ignore_case": True}
    assert judge_turn(contains, "It is paris.") == (True, "")
    assert judge_turn(contains, "Lyon")[0] is False
    lowercase = {"validators": [{"type": "instructions", "constraints": [{"lowercase": True}]}]}
    assert judge_turn(lowercase, "all small") == (True, "")
    assert judge_turn(lowercase, "Not small") == (False, "unmet: lowercase")
    schema = {"validators": [{"type": "json_schema", "schema": {"required": ["answer"]}}]}
    assert judge_turn(schema, 'Sure: {"answer": 4}')[0] is True
    assert judge_turn(schema, "four")[0] is False


def test_a_code_check_runs_the_replys_code_in_the_sandbox() -> None:
    check = {"tests": ["assert add(2, 3) == 5"]}
    good = "Here it is:\n```python\ndef add(a, b):\n    return a + b\n```\nDone."
    assert judge_turn(check, good) == (True, "")
    passed, why = judge_turn(check, "```python\ndef add(a, b):\n    return a - b\n```")
    assert not passed and why.startswith("code failed")


def test_failures_after_a_failure_are_propagated() -> None:
    a, t = FailureClass.ANSWERED, FailureClass.TRUNCATED
    classes = propagated([a, a, t, a, a], [1, 0, 0, None, 0])
    assert classes == [a, a, t, a, FailureClass.PROPAGATED]
    assert propagated([a, a], [0, 1]) == [a, a]  # a pass after a failure is no failure


def test_repeats_give_pass_at_k_and_pass_hat_k_per_conversation(tmp_path: Path) -> None:
    class Alternating(Scripted):
        def generate(self, requests, progress=None):
            # Odd seeds forget the name: samples 0 and 2 pass, sample 1 fails.
            return [
                GenerateResult("Ana" if r.seed % 2 == 0 else "Bob", 1, 1, "eos") for r in requests
            ]

    settings = GenerationSettings(gen_kwargs={"temperature": 0.7, "seed": 10}, repeats=3)
    task_run = evaluate_one(one_task(tmp_path, NAME_TURNS[:2]), Alternating({}), settings)
    [record] = task_run.records
    assert record.scores["correct"] == [1, 0, 1]
    assert record.metrics["pass@1"] == pytest.approx(2 / 3)
    assert record.metrics["pass^2"] == pytest.approx(1 / 3)  # C(2,2) / C(3,2)
    assert record.metrics["pass^3"] == 0.0 and record.metrics["pass@2"] == 1.0
    assert task_run.info.metric == "pass@1"


def test_pass_hat_k_is_the_share_of_k_subsets_all_right() -> None:
    from itertools import combinations
    from math import comb

    outcomes = [1, 1, 0, 1, 0, 1]
    for k in range(1, 7):
        subsets = list(combinations(outcomes, k))
        assert pass_hat_k(6, 4, k) == pytest.approx(sum(all(s) for s in subsets) / comb(6, k))


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ({"id": "a", "turns": [{"user": "hi", "check": {"expected": "x"}}]}, "two or more"),
        ({"id": "a", "turns": [{"user": "hi"}, {"user": "yo"}]}, "no turn has a `check`"),
        ({"id": "a", "turns": [{"user": "hi", "chek": {}}, {"user": "x"}]}, "unknown key 'chek'"),
        (
            {
                "id": "a",
                "history": "reference",
                "turns": [{"user": "h"}, {"user": "x", "check": {"expected": "y"}}],
            },
            "turn 1 needs `assistant`",
        ),
        (
            {
                "id": "a",
                "turns": [
                    {"user": "h", "assistant": "r"},
                    {"user": "x", "check": {"expected": "y"}},
                ],
            },
            "read with history: reference",
        ),
        (
            {"id": "a", "turns": [{"user": "h", "check": {"match": "regex"}}, {"user": "x"}]},
            "go with `expected`",
        ),
        (
            {
                "id": "a",
                "turns": [
                    {"user": "h", "check": {"validators": [{"type": "nope"}]}},
                    {"user": "x"},
                ],
            },
            "unknown validator type",
        ),
    ],
)
def test_a_bad_conversation_file_is_one_clear_error(
    tmp_path: Path, item: dict, message: str
) -> None:
    path = write(tmp_path / "bad.jsonl", [item])
    with pytest.raises(BadInput, match="item 1") as error:
        read_conversations(path)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_conversation_file_is_a_task_beside_golden_sets(tmp_path: Path) -> None:
    path = write(tmp_path / "support.jsonl", [{"id": "c", "turns": NAME_TURNS}])
    golden = write(tmp_path / "golden.jsonl", [{"id": "g", "input": "Q:", "expected": "A"}])
    catalog = load_catalog(golden=[path, golden])
    assert sorted(catalog.loaded) == ["conv_support", "golden"]
    assert isinstance(catalog.get([str(path)])[0], ConversationTask)


def test_changing_a_turn_changes_the_prompt_hash(tmp_path: Path) -> None:
    from regress.run.engine import identity

    task = one_task(tmp_path)
    turns = [dict(t) for t in NAME_TURNS]
    turns[2]["user"] = "Spell it forwards."
    changed = conversation_task(write(tmp_path / "other.jsonl", [{"id": "c1", "turns": turns}]))
    spec, other = TaskSpec(task), TaskSpec(changed)
    before = identity(spec, task.examples(DataSource()))
    after = identity(other, changed.examples(DataSource()))
    assert before[0] != after[0] and before[1] != after[1]


def test_a_conversation_has_no_prompt_formats() -> None:
    [task] = get_tasks(["conversations"])
    with pytest.raises(BadInput, match="no formats"):
        FormattedTask(task, 1).examples(DataSource(), limit=1)
    # A suite in K formats runs its conversations once, as they are.
    tasks = BUILTIN.get(formatted_names(["conversations", "builtin_dates"], 2))
    assert [t.name for t in tasks] == ["conversations", "builtin_dates@fmt0", "builtin_dates@fmt1"]


def test_chat_templates_resolve_by_name_file_or_the_models_own(tmp_path: Path) -> None:
    assert chat_template(None, "{{ x }}", "m.gguf").source == "model"
    assert chat_template(None, None, "m.gguf") is None
    gemma = chat_template("gemma", None, "m.gguf")
    assert gemma.text == SHIPPED["gemma"] and len(gemma.sha256) == 64
    # Only a named template enters the fingerprint: the model's own is part of its file.
    assert gemma.recorded() == ({"chat_template": "gemma"}, {"chat_template_sha256": gemma.sha256})
    assert chat_template(None, "{{ x }}", "m.gguf").recorded() == ({}, {})
    with pytest.raises(BadInput, match="chat_template must be str"):
        chat_template(3, None, "m.gguf")  # type: ignore[arg-type]
    file = tmp_path / "t.jinja"
    file.write_text("{{ messages[0]['content'] }}")
    assert chat_template(str(file), "own", "m.gguf").text == file.read_text()
    with pytest.raises(BadInput, match="neither a template name"):
        chat_template("no-such", None, "m.gguf")


def conversation_record(task_name: str, doc_id: int, turns: list[int | None]):
    from regress.core.records import Record

    checked = [t for t in turns if t is not None]
    return Record(
        task=task_name,
        doc_id=doc_id,
        doc_hash=f"{task_name}-{doc_id}",
        prompt_hash="x",
        target=str(doc_id),
        pred=["r"] * len(turns),
        correct=int(all(checked)),
        metrics={"conv_pass": float(all(checked))},
        scores={"turn_pass": turns, "failure": ["answered"] * len(turns)},
    )


def test_the_gate_pairs_conversations_and_reports_each_turn() -> None:
    base = [conversation_record("convs", i, [1, 1, 1]) for i in range(40)]
    cand = [conversation_record("convs", i, [1, 1, 1]) for i in range(40)]
    for i in range(12):  # 12 conversations break at turn 3, 2 at turn 2
        cand[i] = conversation_record("convs", i, [1, 1, 0])
    for i in range(12, 14):
        cand[i] = conversation_record("convs", i, [1, 0, None])
    infos = [info("convs", metric="conv_pass", output_type="generate_until")]
    comparison = compare(
        run("a", {"convs": base}, infos),
        run("b", {"convs": cand}, infos),
        Policy(max_drop=0.05, min_examples=20),
    )
    [unit] = comparison.units
    assert (unit.n, unit.b, unit.c) == (40, 14, 0)  # McNemar on conversation pass
    assert unit.verdict.value == "REGRESSION"
    turns = {t.turn: t for t in comparison.turns}
    assert (turns[1].broke, turns[2].broke, turns[3].broke) == (0, 2, 12)
    assert turns[3].n == 38 and turns[3].candidate == pytest.approx(26 / 38)
    assert (
        turn_changes("convs", [(b, c) for b, c in zip(base, cand, strict=True)]) == comparison.turns
    )
    assert comparison.to_dict()["turns"][2]["broke"] == 12
    report = render_markdown(comparison)
    assert "### Conversations, turn by turn" in report
    assert "| convs | 3 | 38 | 100.0% | 68.4% | -31.6 pts | 12 | 0 |" in report


@pytest.mark.parametrize("conversations", [10, 20, 30])
def test_cluster_interval_covers_where_a_naive_one_does_not(conversations: int) -> None:
    """Turns of one conversation share its difficulty: the clustered interval keeps 95%
    coverage at 30-85% accuracy from 10 conversations on (the percentile cluster bootstrap
    it replaced held 90-93%, issue 50), where treating turns as independent does not
    (seeded simulation; experiments/cluster_coverage.py prints docs/generation.md's table)."""
    from scipy import stats

    rng = np.random.default_rng(50)
    trials = 1500
    for truth in (0.3, 0.6, 0.85):
        covered = naive = 0
        for _ in range(trials):
            ease = rng.normal(0.0, 1.5, size=conversations)  # each conversation's difficulty
            p = stats.norm.cdf(stats.norm.ppf(truth) * np.sqrt(1 + 1.5**2) + ease)
            checked = rng.integers(2, 5, size=conversations)
            passed = rng.binomial(checked, p)
            low, high = cluster_interval(passed.tolist(), checked.tolist())
            covered += low <= truth <= high
            rate = passed.sum() / checked.sum()
            half = 1.96 * np.sqrt(rate * (1 - rate) / checked.sum())
            naive += rate - half <= truth <= rate + half
        se = np.sqrt(0.95 * 0.05 / trials)
        assert covered / trials >= 0.94 - 2 * se, (truth, covered / trials)
        assert naive / trials < covered / trials - 0.10, (truth, naive / trials)


def test_cluster_interval_of_one_rate_everywhere_is_not_a_point() -> None:
    """Every conversation passing every turn shows no spread: the interval still reaches
    below 100% by the turns' own count, where the bootstrap's collapsed to a point."""
    low, high = cluster_interval([3, 4, 2, 4], [3, 4, 2, 4])
    assert high == 1.0 and 0.5 < low < 0.9
