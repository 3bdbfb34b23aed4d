"""The issue-13 probes, rerun through the real CLI: each ends in one line and exit 2 or 3, and
nothing already stored (or not ours) is touched.

Tests that load SmolLM2 keep to a handful of examples of the built-in suite.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import stat
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import REPO
from test_store import make_manifest, make_records

from regress.cli import cli
from regress.core.errors import ExitCode
from regress.core.manifest import Run
from regress.core.store import write_run


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def one_line_error(text: str) -> bool:
    return text.startswith("regress: error: ") and text.count("\n") == 1


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """A copy of the committed baseline store."""
    copy = tmp_path / "store"
    shutil.copytree(REPO / "baselines", copy)
    return copy


# --- 1: nothing lost ------------------------------------------------------------------------------


def test_save_run_into_a_folder_with_other_files_is_refused_before_running(
    tmp_path: Path, store: Path
) -> None:
    keep = tmp_path / "v" / "src" / "keep.py"
    keep.parent.mkdir(parents=True)
    keep.write_text("print('mine')\n")
    before = snapshot(store)
    code, text = run(
        "baseline", "create", "--name", "sr", "-m", "smollm2-135m",
        "--suite", str(REPO / "suites" / "builtin.yaml"),
        "--store", str(store), "--save-run", str(tmp_path / "v"),
    )  # fmt: skip
    assert code == ExitCode.BAD_INPUT and one_line_error(text), text
    assert "is not empty and not a regress run" in text
    assert keep.read_text() == "print('mine')\n" and snapshot(store) == before


def shards(tmp_path: Path) -> list[Path]:
    paths = []
    records = make_records(n=6)
    for i, part in enumerate((records[:3], records[3:])):
        manifest = dataclasses.replace(make_manifest(tasks={"arc_easy": 3}), shard=f"{i}/2")
        paths.append(tmp_path / f"s{i}")
        write_run(Run(manifest, {"arc_easy": part}), paths[-1])
    return paths


def test_merge_output_refuses_other_folders_and_replaces_a_run(tmp_path: Path) -> None:
    s0, s1 = shards(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.md").write_text("mine\n")
    code, text = run("merge", str(s0), str(s1), "-o", str(out))
    assert code == ExitCode.BAD_INPUT and one_line_error(text), text
    assert [p.name for p in out.iterdir()] == ["notes.md"]
    (out / "notes.md").unlink()
    for _ in range(2):  # an empty folder, then the run written there
        code, text = run("merge", str(s0), str(s1), "-o", str(out))
        assert code == 0, text
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "records"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "s0", "s1"]


# --- 4: one line, never a traceback ---------------------------------------------------------------


def test_store_that_is_a_file(tmp_path: Path) -> None:
    file = tmp_path / "baselines"
    file.write_text("x\n")
    code, text = run("baseline", "list", "--store", str(file))
    assert code == ExitCode.BAD_INPUT and one_line_error(text), text
    code, text = run(
        "baseline", "create", "--name", "m", "-m", "smollm2-135m", "-t", "builtin_dates",
        "--limit", "2", "--store", str(file),
    )  # fmt: skip
    assert code == ExitCode.BAD_INPUT and one_line_error(text), text
    code, text = run(
        "baseline", "promote", "--run", str(REPO / "baselines" / "main"), "--name", "m",
        "--store", str(file / "sub"),
    )  # fmt: skip
    assert code == ExitCode.BAD_INPUT and "is a file, not a folder" in text, text
    assert file.read_text() == "x\n"


def test_list_says_what_it_found(tmp_path: Path, store: Path) -> None:
    code, text = run("baseline", "list", "--store", str(tmp_path / "nope"))
    assert code == ExitCode.BAD_INPUT and "no store folder" in text
    (tmp_path / "empty").mkdir()
    code, text = run("baseline", "list", "--store", str(tmp_path / "empty"))
    assert code == 0 and "no baselines in" in text


# --- 9: crash leftovers ---------------------------------------------------------------------------


@pytest.mark.model
def test_list_ignores_crash_leftovers(store: Path) -> None:
    shutil.copytree(store / "main", store / ".main.tmp-x1y2z3")
    shutil.copytree(store / "main", store / ".main.old")
    code, text = run("baseline", "list", "--store", str(store))
    assert code == 0, text
    assert [line.split()[1] for line in text.splitlines() if "smollm2" in line] == ["main"]
    assert not (store / ".main.old").exists()  # repaired when main was read
    code, text = run("baseline", "verify", "main", "--store", str(store))
    assert code == 0, text


# --- 10: path traversal from a manifest -----------------------------------------------------------


def test_promote_refuses_a_task_name_that_escapes(tmp_path: Path, store: Path) -> None:
    bad = tmp_path / "run"
    shutil.copytree(store / "main", bad)
    manifest = json.loads((bad / "manifest.json").read_text())
    manifest["tasks"]["../../../escaped"] = manifest["tasks"].pop("builtin_dates")
    del manifest["records_sha256"]
    (bad / "manifest.json").write_text(json.dumps(manifest))
    (bad / "records" / "builtin_dates.jsonl").rename(bad / "escaped.jsonl")
    promote = ("baseline", "promote", "--run", str(bad), "--name", "main", "--force")
    for args in (
        (*promote, "--store", str(store)),
        ("baseline", "verify", "run", "--store", str(tmp_path)),
        ("baseline", "list", "--store", str(tmp_path)),
    ):
        code, text = run(*args)
        assert code == ExitCode.BAD_INPUT and "bad task name '../../../escaped'" in text, text
    assert not list(tmp_path.parent.glob("escaped*")) and not (tmp_path / "escaped").exists()
    assert json.loads((store / "main" / "manifest.json").read_text())["tasks"].keys() == {
        "builtin_arithmetic", "builtin_comparison", "builtin_dates", "builtin_ordering",
        "builtin_units",
    }  # fmt: skip


# --- 6: verify and check see edited records -------------------------------------------------------


def flip_correct(path: Path, count: int) -> None:
    lines = path.read_text().splitlines(keepends=True)
    for i in range(count):
        record = json.loads(lines[i])
        record["correct"] = 1 - record["correct"]
        lines[i] = json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n"
    path.write_text("".join(lines))


@pytest.mark.model
def test_committed_baseline_verifies() -> None:
    code, text = run("baseline", "verify", "main", "--store", str(REPO / "baselines"))
    assert code == 0, text
    assert "baseline 'main' ok: 5 tasks, 500 records, model sha256 ok" in text


@pytest.mark.model
def test_flipped_records_fail_verify_and_check(store: Path) -> None:
    records = store / "main" / "records" / "builtin_dates.jsonl"
    flip_correct(records, 10)
    code, text = run("baseline", "verify", "main", "--store", str(store))
    assert code == ExitCode.BAD_INPUT and one_line_error(text), text
    assert "builtin_dates.jsonl: content does not match the sha256 in its manifest" in text
    baseline = str(REPO / "baselines" / "main")
    code, text = run("check", "-b", "main", "--store", str(store), "--candidate-run", baseline)
    assert code == ExitCode.BAD_INPUT and "does not match the sha256" in text, text
    # Whoever also rewrites the stored hash is caught by the records themselves.
    manifest = json.loads((store / "main" / "manifest.json").read_text())
    manifest["records_sha256"]["builtin_dates"] = hashlib.sha256(records.read_bytes()).hexdigest()
    (store / "main" / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
    code, text = run("baseline", "verify", "main", "--store", str(store))
    assert code == ExitCode.BAD_INPUT and one_line_error(text), text
    assert "builtin_dates: 10 inconsistent record(s), first: builtin_dates doc 0: correct=" in text
    # And whoever drops the hashes is told the baseline is not protected.
    del manifest["records_sha256"]
    (store / "main" / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
    code, text = run("baseline", "verify", "main", "--store", str(store))
    assert code == ExitCode.BAD_INPUT and "no stored sha256 for the records of" in text


# --- 3: broken runs are not stored (real model) ---------------------------------------------------


def nan_model(src: Path, out: Path) -> Path:
    """A copy of SmolLM2 whose output norm is NaN: every log-likelihood comes out NaN."""
    import gguf

    shutil.copyfile(src, out)
    reader = gguf.GGUFReader(out, "r+")
    [norm] = [t for t in reader.tensors if t.name == "output_norm.weight"]
    assert norm.tensor_type == gguf.GGMLQuantizationType.F32
    norm.data[...] = np.nan
    reader.data.flush()
    del reader
    return out


@pytest.mark.model
@pytest.mark.parametrize("command", ["create", "eval"])
def test_nan_model_run_is_refused_and_not_stored(
    tmp_path: Path, smollm2_path: Path, command: str
) -> None:
    model = nan_model(smollm2_path, tmp_path / "nan.gguf")
    common = ["-m", str(model), "-t", "builtin_dates", "--limit", "5", "--no-cache"]
    if command == "create":
        args = ["baseline", "create", "--name", "nan", *common, "--store", str(tmp_path / "s")]
    else:
        args = ["eval", *common, "-o", str(tmp_path / "out"), "--save-run", str(tmp_path / "r")]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == ExitCode.RUN_FAILED, result.output
    assert "non-finite score (NaN or inf)" in result.output and "Traceback" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nan.gguf"]


@pytest.mark.model
def test_run_with_failed_examples_is_refused_and_not_stored(tmp_path: Path, data_dir: Path) -> None:
    # In a 16-token context no GSM8K prompt leaves room to generate: every example fails.
    code, text = run(
        "baseline", "create", "--name", "tiny", "-m", "smollm2-135m", "-t", "gsm8k", "-k", "0",
        "--limit", "5", "--model-args", "n_ctx=16", "--no-cache", "--store", str(tmp_path / "s"),
        "--data-dir", str(data_dir),
    )  # fmt: skip
    assert code == ExitCode.RUN_FAILED, text
    assert text.splitlines()[-1] == (
        "regress: error: task gsm8k: 5 of 5 examples failed (> max_error_rate 0.05), first: "
        "doc 0 truncated: max_tokens 256 leaves no room for a prompt in n_ctx 16; not stored"
    )
    assert not (tmp_path / "s").exists()


@pytest.mark.model
def test_suite_selecting_no_examples_is_refused(tmp_path: Path) -> None:
    suite = tmp_path / "s.yaml"
    suite.write_text("name: none\ntasks:\n  - {task: builtin_dates, docs: [999999]}\n")
    code, text = run(
        "baseline", "create", "--name", "none", "-m", "smollm2-135m", "--suite", str(suite),
        "--no-cache", "--store", str(tmp_path / "s"),
    )  # fmt: skip
    assert code == ExitCode.BAD_INPUT and "has no examples" in text, text
    assert not (tmp_path / "s" / "none").exists()


# --- 14: quantize writes a file others can read ---------------------------------------------------


@pytest.mark.model
def test_quantized_file_mode_follows_the_umask(tmp_path: Path, smollm2_path: Path) -> None:
    old = os.umask(0o022)
    try:
        code, text = run("quantize", str(smollm2_path), "--type", "Q8_0", "-o", str(tmp_path / "q"))
    finally:
        os.umask(old)
    assert code == 0, text
    assert stat.S_IMODE((tmp_path / "q").stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["q"]


# --- 4: places that cannot take a cache or a report ----------------------------------------------


@pytest.mark.model  # resolves a packaged model
@pytest.mark.parametrize("kind", ["a file", "a corrupt database"])
def test_cache_dir_that_cannot_hold_a_cache(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # --cache-dir sets $REGRESS_CACHE_DIR for the process: restored after this test.
    monkeypatch.setenv("REGRESS_CACHE_DIR", str(tmp_path / "default-cache"))
    cache = tmp_path / "cache"
    if kind == "a file":
        cache.write_text("x\n")
    else:
        cache.mkdir()
        (cache / "results.sqlite").write_bytes(b"this is not an sqlite database\n" * 200)
    code, text = run(
        "eval", "-m", "smollm2-135m", "-t", "builtin_dates", "--limit", "2",
        "--cache-dir", str(cache),
    )  # fmt: skip
    # The progress bar may have drawn its line first: the error is the one line after it.
    assert code in (ExitCode.BAD_INPUT, ExitCode.RUN_FAILED) and "Traceback" not in text, text
    assert text.splitlines()[-1].startswith("regress: error: ")


def test_report_md_that_is_a_folder(tmp_path: Path, store: Path) -> None:
    folder = tmp_path / "report.md"
    folder.mkdir()
    baseline = str(REPO / "baselines" / "main")
    code, text = run(
        "check", "-b", "main", "--store", str(store), "--candidate-run", baseline,
        "--report-md", str(folder),
    )  # fmt: skip
    assert code in (ExitCode.BAD_INPUT, ExitCode.RUN_FAILED), text
    assert text.splitlines()[-1].startswith("regress: error: ") and "Traceback" not in text
    assert list(folder.iterdir()) == []


def test_policy_file_that_is_not_utf8(tmp_path: Path, store: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_bytes(b"alpha: 0.05\n# r\xe9sum\xe9\n")
    baseline = str(REPO / "baselines" / "main")
    code, text = run(
        "check", "-b", "main", "--store", str(store), "--candidate-run", baseline,
        "--policy", str(policy),
    )  # fmt: skip
    assert code in (ExitCode.BAD_INPUT, ExitCode.RUN_FAILED) and one_line_error(text), text
    assert "policy.yaml" in text or "UnicodeDecodeError" in text
