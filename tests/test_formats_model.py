"""Prompt formats on a real model (docs/tasks.md#prompt-formats): `eval --formats` prints the
spread its saved records give, and a baseline made in two formats gates a rerun of the same
model format by format."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from regress.cli import cli
from regress.core.errors import ExitCode
from regress.core.hashes import instruction_key
from regress.core.store import read_run
from regress.gate.format_spread import format_spreads

pytestmark = pytest.mark.model

N = 10
"""Arithmetic questions per format: the mechanics, not a measurement."""


def _run(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == ExitCode.OK, result.output
    return result.output


def test_eval_in_three_formats_reports_the_spread_of_its_own_records(tmp_path):
    saved = tmp_path / "run"
    text = _run(
        "eval", "-m", "smollm2-135m", "-t", "builtin_arithmetic", "--limit", str(N),
        "--formats", "3", "--save-run", str(saved), "--no-cache",
    )  # fmt: skip
    run = read_run(saved)
    assert sorted(run.records) == [f"builtin_arithmetic@fmt{i}" for i in range(3)]
    # Each format's accuracy, from the records themselves.
    accuracy = [
        sum(r.right for r in run.records[f"builtin_arithmetic@fmt{i}"]) / N for i in range(3)
    ]
    [spread] = format_spreads(run.manifest.tasks, run.records)
    assert spread.unit == "builtin" and spread.n == N
    assert spread.accuracy == pytest.approx(accuracy)
    row = re.search(r"builtin .* f0 ([\d.]+)%\s+f1 ([\d.]+)%\s+f2 ([\d.]+)%", text)
    assert row and [float(x) / 100 for x in row.groups()] == pytest.approx(accuracy, abs=5e-4)
    assert f"{spread.spread * 100:.1f} pts" in text
    # The prompts differ between formats: different prompt hashes, same documents.
    hashes = {run.manifest.tasks[t].prompt_hash for t in run.records}
    docs = {run.manifest.tasks[t].dataset_hash for t in run.records}
    assert len(hashes) == 3 and len(docs) == 1


def test_a_baseline_in_two_formats_gates_each_format(tmp_path):
    store = tmp_path / "store"
    _run(
        "baseline", "create", "--name", "main", "-m", "smollm2-135m", "-t", "builtin_arithmetic",
        "--limit", str(N), "--formats", "2", "--store", str(store), "--no-cache",
    )  # fmt: skip
    report = tmp_path / "r.json"
    result = CliRunner().invoke(
        cli,
        ["check", "-b", "main", "-m", "smollm2-135m", "--store", str(store), "--no-cache",
         "--report-json", str(report)],
    )  # fmt: skip
    # N examples per unit, under min_examples: INCONCLUSIVE, exit 0.
    assert result.exit_code == ExitCode.OK, result.output
    data = json.loads(report.read_text())
    assert [u["name"] for u in data["units"]] == ["builtin@fmt0", "builtin@fmt1"]
    # The same model file rerun on the machine that made the baseline: its answers.
    base = read_run(store / "main")
    for unit in data["units"]:
        task = f"builtin_arithmetic@{unit['name'].split('@')[1]}"
        right = sum(r.right for r in base.records[task]) / len(base.records[task])
        assert unit["baseline"] == pytest.approx(right) and unit["n"] == N
        assert unit["b"] == unit["c"] == 0


def test_a_suites_own_instruction_is_evaluated_stored_and_gated_as_a_unit(tmp_path):
    """docs/tasks.md#your-own-instructions: the suite's text becomes `TASK@insKEY`; eval shows
    it beside the task as it is; the baseline keeps the text, and check rebuilds the same
    prompts from it (a changed prompt would be refused)."""
    text = "Work out the sum, then answer."
    key = instruction_key(text)
    suite = tmp_path / "s.yaml"
    suite.write_text(
        f"tasks: [{{task: builtin_arithmetic, limit: {N}}}]\n"
        f"instructions: {{builtin_arithmetic: ['{text}']}}\n"
    )
    saved = tmp_path / "run"
    shown = _run("eval", "-m", "smollm2-135m", "--suite", str(suite), "--save-run", str(saved))
    run = read_run(saved)
    names = ["builtin_arithmetic", f"builtin_arithmetic@ins{key}"]
    assert sorted(run.records) == names and run.manifest.instructions == {key: text}
    accuracy = [sum(r.right for r in run.records[name]) / N for name in names]
    row = re.search(rf"builtin .* as is ([\d.]+)%\s+ins{key} ([\d.]+)%", shown)
    assert row and [float(x) / 100 for x in row.groups()] == pytest.approx(accuracy, abs=5e-4)
    # The instruction changed the prompts, so the model's log-probs moved.
    plain, ours = (run.records[name] for name in names)
    assert run.manifest.tasks[names[0]].prompt_hash != run.manifest.tasks[names[1]].prompt_hash
    assert [r.scores["loglik"] for r in plain] != [r.scores["loglik"] for r in ours]

    store = tmp_path / "store"
    _run("baseline", "create", "--name", "main", "-m", "smollm2-135m", "--suite", str(suite),
         "--store", str(store))  # fmt: skip
    report = tmp_path / "r.json"
    # No suite and no instruction given: check reads the text from the baseline.
    _run("check", "-b", "main", "-m", "smollm2-135m", "--store", str(store),
         "--report-json", str(report))  # fmt: skip
    data = json.loads(report.read_text())
    assert [u["name"] for u in data["units"]] == ["builtin", f"builtin@ins{key}"]
    assert [u["baseline"] for u in data["units"]] == pytest.approx(accuracy)
    assert all(u["b"] == u["c"] == 0 for u in data["units"])
