"""`regress eval` end to end on the real model: files, determinism, and every bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from regress.cli import cli
from regress.core.errors import ExitCode


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output + (result.stderr if result.stderr_bytes else "")


@pytest.fixture(scope="module")
def eval_out(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("eval")
    code, text = run(
        "eval",
        "-m",
        "smollm2-135m",
        "-t",
        "builtin_arithmetic,builtin_comparison",
        "--limit",
        "10",
        "-o",
        str(out / "lm"),
        "--log-samples",
        "--save-run",
        str(out / "run"),
        "--no-cache",
    )
    assert code == 0, text
    (out / "output.txt").write_text(text)
    return out


@pytest.mark.model
def test_header_line_and_model_folder_as_lm_eval(eval_out):
    """lm-eval's line above the table, and its `<output_path>/<model>/` layout."""
    lines = (eval_out / "output.txt").read_text().splitlines()
    header = next(line for line in lines if line.startswith("llama_cpp ("))
    assert header == (
        "llama_cpp (pretrained=smollm2-135m), gen_kwargs: (None), limit: 10.0, "
        "num_fewshot: None, batch_size: 1"
    )
    assert [p.name for p in (eval_out / "lm").iterdir()] == ["smollm2-135m"]


@pytest.mark.model
def test_results_file_has_lm_eval_shape(eval_out):
    [path] = (eval_out / "lm" / "smollm2-135m").glob("results_*.json")
    doc = json.loads(path.read_text())
    task = doc["results"]["builtin_arithmetic"]
    assert 0.0 <= task["acc,none"] <= 1.0 and task["acc_stderr,none"] > 0
    assert "acc_norm,none" in task
    assert doc["group_subtasks"]["builtin"] == ["builtin_arithmetic", "builtin_comparison"]
    assert doc["n-samples"]["builtin_arithmetic"] == {"original": 10, "effective": 10}
    assert doc["n-shot"]["builtin_arithmetic"] == 0
    assert doc["higher_is_better"]["builtin_arithmetic"]["acc"] is True
    assert set(doc["configs"]) == {"builtin_arithmetic", "builtin_comparison"}


@pytest.mark.model
def test_samples_match_records(eval_out):
    [samples] = (eval_out / "lm" / "smollm2-135m").glob("samples_builtin_arithmetic_*.jsonl")
    lines = [json.loads(x) for x in samples.read_text().splitlines()]
    records = [
        json.loads(x)
        for x in (eval_out / "run" / "records" / "builtin_arithmetic.jsonl")
        .read_text()
        .splitlines()
    ]
    assert len(lines) == len(records) == 10
    first = lines[0]
    assert set(first) >= {
        "doc_id",
        "doc",
        "target",
        "arguments",
        "resps",
        "filtered_resps",
        "doc_hash",
        "prompt_hash",
        "target_hash",
        "acc",
        "acc_norm",
    }
    args = first["arguments"]["gen_args_0"]
    assert args["arg_0"].startswith("Question:") and args["arg_1"].startswith(" ")
    logliks = [float(r[0][0]) for r in first["resps"]]
    assert logliks == records[0]["scores"]["loglik"]
    assert first["acc"] == records[0]["metrics"]["acc"]
    assert records[0]["correct"] == int(records[0]["pred"] == records[0]["target"])


@pytest.mark.model
def test_two_runs_give_byte_identical_records(eval_out, tmp_path):
    code, text = run(
        "eval",
        "-m",
        "smollm2-135m",
        "-t",
        "builtin_arithmetic,builtin_comparison",
        "--limit",
        "10",
        "--save-run",
        str(tmp_path / "again"),
        "--no-cache",
    )
    assert code == 0, text
    for name in ("builtin_arithmetic", "builtin_comparison"):
        first = (eval_out / "run" / "records" / f"{name}.jsonl").read_bytes()
        assert (tmp_path / "again" / "records" / f"{name}.jsonl").read_bytes() == first


def test_unknown_task_lists_known():
    code, text = run("eval", "-m", "smollm2-135m", "-t", "arc_eazy")
    assert code == ExitCode.BAD_INPUT
    assert "unknown task 'arc_eazy'" in text and "arc_easy" in text
    assert "Traceback" not in text


def test_missing_data_dir(tmp_path):
    code, text = run(
        "eval", "-m", "smollm2-135m", "-t", "arc_easy", "--data-dir", str(tmp_path / "nope")
    )
    assert code == ExitCode.BAD_INPUT and "nope" in text and "Traceback" not in text


@pytest.mark.model
def test_malformed_csv_row_names_file_and_line(tmp_path, data_dir):
    for split in ("test", "dev"):
        (tmp_path / "mmlu" / split).mkdir(parents=True)
        src = data_dir / "mmlu" / split / f"anatomy_{split}.csv"
        (tmp_path / "mmlu" / split / src.name).write_bytes(src.read_bytes())
    bad = tmp_path / "mmlu" / "test" / "anatomy_test.csv"
    lines = bad.read_text().splitlines(keepends=True)
    lines[2] = "a question with too few columns,A,B\n"
    bad.write_text("".join(lines))
    code, text = run(
        "eval", "-m", "smollm2-135m", "-t", "mmlu_anatomy", "--data-dir", str(tmp_path)
    )
    assert code == ExitCode.BAD_INPUT, text
    assert "anatomy_test.csv" in text and ":3" in text and "Traceback" not in text


def test_non_gguf_model(tmp_path):
    fake = tmp_path / "m.gguf"
    fake.write_text("hello")
    code, text = run("eval", "-m", str(fake), "-t", "builtin_arithmetic", "--limit", "2")
    assert code == ExitCode.BAD_INPUT and "not a GGUF file" in text


def test_missing_model():
    code, text = run("eval", "-m", "/nonexistent/model.gguf", "-t", "builtin_arithmetic")
    assert code == ExitCode.BAD_INPUT and "not found" in text


@pytest.mark.model
def test_n_ctx_overflow():
    code, text = run(
        "eval",
        "-m",
        "smollm2-135m",
        "-t",
        "builtin_arithmetic",
        "--limit",
        "2",
        "--model-args",
        "n_ctx=100000",
        "--no-cache",
    )
    assert code == ExitCode.BAD_INPUT and "exceeds" in text and "training context" in text


def test_help_teaches():
    code, text = run("eval", "--help")
    assert code == 0 and "Examples:" in text and "--num-fewshot" in text
