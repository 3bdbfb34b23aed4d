"""A golden set and a task YAML through the real CLI on SmolLM2: stored, rerun, gated, reported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from regress.cli import cli

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output + (result.stderr if result.stderr_bytes else "")


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """A baseline of 5 world capitals and 7 golden items (one generated), and its options."""
    root = tmp_path_factory.mktemp("golden")
    lines = (EXAMPLES / "golden" / "assistant.jsonl").read_text().splitlines()
    golden = root / "must.jsonl"
    golden.write_text("\n".join([*lines[:6], lines[28]]) + "\n")
    options = ["--include-path", str(EXAMPLES / "tasks"), "--golden", str(golden)]
    code, text = run(
        "baseline", "create", "--name", "ours", "--model", "smollm2-135m", "-t",
        "world_capitals", "--limit", "5", "--store", str(root), "--no-cache", *options,
    )  # fmt: skip
    assert code == 0, text
    assert "12 examples in 2 tasks" in text
    return root, options


def test_the_same_model_passes_the_golden_rules(made, tmp_path: Path) -> None:
    root, options = made
    code, text = run(
        "check", "-b", "ours", "--model", "smollm2-135m", "--store", str(root), "--no-cache",
        "--report-json", str(tmp_path / "r.json"), "--report-md", str(tmp_path / "r.md"),
        *options,
    )  # fmt: skip
    assert code == 0, text
    [golden] = json.loads((tmp_path / "r.json").read_text())["golden"]
    assert (golden["task"], golden["n"], golden["must_pass"]) == ("golden_must", 7, 5)
    assert golden["baseline_rate"] == golden["candidate_rate"] and not golden["regressed"]
    report = (tmp_path / "r.md").read_text()
    assert "### Golden sets" in report and "| golden_must | 7 | 5 |" in report
    assert "### Calibration (multiple choice)" in report


def test_check_without_the_task_files_says_which_options(made) -> None:
    root, _ = made
    code, text = run("check", "-b", "ours", "--model", "smollm2-135m", "--store", str(root))
    assert code == 2
    assert "golden_must, world_capitals that are not built in" in text
    assert "--include-path / --golden" in text
