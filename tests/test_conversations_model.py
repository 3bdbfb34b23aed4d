"""Conversations on real models (docs/generation.md#conversations): each turn's prompt holds
the model's own earlier replies through its chat template, prefix reuse changes nothing,
Gemma 3 runs through a shipped template, and a baseline of conversations gates a rerun."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from llama_cpp.llama_chat_format import Jinja2ChatFormatter

from regress.backends import load_backend
from regress.backends.chat import SHIPPED
from regress.cli import cli
from regress.core.errors import BadInput, ExitCode
from regress.core.requests import GenerateRequest
from regress.core.store import read_run
from regress.run.engine import TaskSpec, evaluate
from regress.tasks import get_tasks
from regress.tasks.base import DataSource
from regress.tasks.conversation import conversation_task

TURNS = [
    {"user": "My name is Ana. Say hello to me.", "check": {"expected": "Ana", "match": "contains"}},
    {"user": "What is my name?", "check": {"expected": "Ana", "match": "contains"}},
]


def _conversations(backend, limit: int, task=None):
    """The first `limit` conversations of `task` (the built-in set), with every request the
    run sent."""
    [task] = [task] if task else get_tasks(["conversations"])
    sent: list[GenerateRequest] = []

    def run(requests, progress):
        sent.extend(requests)
        from regress.backends import dispatch

        return dispatch(backend, requests, progress)

    [task_run] = evaluate([TaskSpec(task, limit=limit)], backend, DataSource(), run=run)
    return task_run, sent


def test_each_turn_holds_the_models_own_replies_and_prefix_reuse_changes_nothing() -> None:
    reuse = load_backend("llama_cpp", "smollm2-135m", {})
    assert reuse.prefix_reuse  # SmolLM2 has no sliding window: reuse is on by default
    task_run, sent = _conversations(reuse, 2)
    by_history = {r.messages: r for r in sent}
    for example, record in zip(task_run.examples, task_run.records, strict=True):
        assert record.ok and len(record.pred) == len(example.requests)
        for turn in range(1, len(example.requests)):
            replies = record.pred[:turn]
            request = task_run.task.turn_request(example, turn, replies)
            assert request.messages in by_history  # this exact history was sent
            # The chat template put each earlier reply, verbatim, into the prompt's tokens.
            prompt = reuse._llm.detokenize(reuse._prompt(request), special=True).decode()
            assert all(f"<|im_start|>assistant\n{reply}<|im_end|>" in prompt for reply in replies)
    reuse.close()
    fresh = load_backend("llama_cpp", "smollm2-135m", {"prefix_reuse": False})
    again, _ = _conversations(fresh, 2)
    fresh.close()
    assert [r.to_json() for r in again.records] == [r.to_json() for r in task_run.records]


def test_gemma_converses_through_the_shipped_template_and_refuses_without_one(
    tmp_path: Path,
) -> None:
    short = [{**turn, "max_tokens": 12} for turn in TURNS]
    file = tmp_path / "short.jsonl"
    file.write_text(
        json.dumps({"id": "c", "system": "You are a helpful assistant.", "turns": short})
    )
    task = conversation_task(file)
    bare = load_backend("llama_cpp", "gemma3-270m", {})
    with pytest.raises(BadInput, match="chat_template=NAME"):
        _conversations(bare, 1, task)
    bare.close()
    gemma = load_backend("llama_cpp", "gemma3-270m", {"chat_template": "gemma"})
    task_run, sent = _conversations(gemma, 1, task)
    prompt = gemma._llm.detokenize(gemma._prompt(sent[-1]), special=True).decode()
    fingerprint = gemma.fingerprint()
    gemma.close()
    [record] = task_run.records
    assert record.ok and len(record.pred) == len(sent)
    assert prompt.startswith("<bos><start_of_turn>user\nYou are a helpful assistant.")
    assert prompt.endswith("<end_of_turn>\n<start_of_turn>model\n")
    assert fingerprint.params["chat_template"] == "gemma"
    assert len(fingerprint.build["chat_template_sha256"]) == 64


def test_the_gemma_template_writes_gemmas_turns() -> None:
    render = Jinja2ChatFormatter(SHIPPED["gemma"], eos_token="<eos>", bos_token="<bos>")
    chat = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello "},
        {"role": "user", "content": "Bye"},
    ]
    assert render(messages=chat).prompt == (
        "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
        "<start_of_turn>model\nHello<end_of_turn>\n"
        "<start_of_turn>user\nBye<end_of_turn>\n<start_of_turn>model\n"
    )


def test_a_baseline_of_conversations_gates_a_rerun_per_conversation(tmp_path: Path) -> None:
    convs = tmp_path / "support.jsonl"
    items = [{"id": f"c{i}", "system": "Be brief.", "turns": TURNS} for i in range(2)]
    convs.write_text("".join(json.dumps(i) + "\n" for i in items))
    store, report = tmp_path / "store", tmp_path / "r.json"
    made = CliRunner().invoke(
        cli,
        ["baseline", "create", "--name", "main", "-m", "smollm2-135m", "--golden", str(convs),
         "-t", "conv_support", "--store", str(store), "--no-cache"],
    )  # fmt: skip
    assert made.exit_code == ExitCode.OK, made.output
    checked = CliRunner().invoke(
        cli,
        ["check", "-b", "main", "-m", "smollm2-135m", "--golden", str(convs), "--store",
         str(store), "--no-cache", "--report-json", str(report)],
    )  # fmt: skip
    # Two conversations, under min_examples: INCONCLUSIVE, exit 0.
    assert checked.exit_code == ExitCode.OK, checked.output
    data = json.loads(report.read_text())
    [unit] = data["units"]
    base = read_run(store / "main").records["conv_support"]
    assert unit["name"] == "conv_support" and unit["n"] == 2 and unit["b"] == unit["c"] == 0
    assert unit["baseline"] == sum(r.right for r in base) / 2
    # The same model on the same machine: each turn as the baseline had it.
    for turn in data["turns"]:
        rows = [r.scores["turn_pass"][turn["turn"] - 1] for r in base]
        assert turn["baseline"] == turn["candidate"] == sum(rows) / 2
