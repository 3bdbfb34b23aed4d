"""The gate end to end on real parts: baseline store, `check` verdicts and exit codes on real
quantizations, drift, shards and resumed runs."""

from __future__ import annotations

import json
import logging
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from regress.backends.models import file_sha256
from regress.checks import TYPICAL_DISCORDANCE, plan_baseline, small_units
from regress.cli import cli
from regress.core.errors import ExitCode
from regress.core.store import Store, read_run
from regress.gate.compare import compare
from regress.gate.policy import Policy
from regress.tasks.base import DataSource
from regress.tasks.catalog import BUILTIN

TASKS = "builtin"
LIMIT = "6"  # per task: 30 examples over the five built-in tasks, for the mechanics
EXAMPLES = 5 * int(LIMIT)
REPO = Path(__file__).resolve().parents[1]
ARC_LIMIT = "100"  # real data where SmolLM2 is well above chance, for the verdicts


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner(env=env).invoke(cli, list(args))
    return result.exit_code, result.output + (result.stderr if result.stderr_bytes else "")


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("store")
    code, text = run(
        "baseline",
        "create",
        "--name",
        "main",
        "--model",
        "smollm2-135m",
        "--tasks",
        TASKS,
        "--limit",
        LIMIT,
        "--store",
        str(root),
        "--no-cache",
    )
    assert code == 0, text
    # Under the default min_examples: said when the baseline is made.
    warning = f"warning: unit builtin has {EXAMPLES} examples, under the policy's min_examples 100"
    assert warning in text
    return root


@pytest.fixture(scope="module")
def arc_store(tmp_path_factory, data_dir) -> Path:
    root = tmp_path_factory.mktemp("arc")
    code, text = run(
        "baseline",
        "create",
        "--name",
        "arc",
        "--model",
        "smollm2-135m",
        "--tasks",
        "arc_easy",
        "--limit",
        ARC_LIMIT,
        "--data-dir",
        str(data_dir),
        "--store",
        str(root),
        "--no-cache",
    )
    assert code == 0, text
    return root


def check_json(
    store: Path, model: str, tmp_path: Path, data_dir: Path, *extra: str
) -> tuple[int, dict]:
    report = tmp_path / "r.json"
    code, text = run(
        "check",
        "--baseline",
        "arc",
        "--model",
        model,
        "--store",
        str(store),
        "--data-dir",
        str(data_dir),
        "--report-json",
        str(report),
        "--report-md",
        str(tmp_path / "r.md"),
        "--no-cache",
        *extra,
    )
    assert report.exists(), text
    return code, json.loads(report.read_text())


@pytest.fixture(scope="module")
def q8(arc_store, tmp_path_factory, data_dir) -> tuple[Path, str, int, dict]:
    """SmolLM2's Q8_0 requantization checked against `arc` once, its run saved in the same
    folder (`run/`, beside `r.md`): the model, quantize's output, the exit code and report."""
    folder = tmp_path_factory.mktemp("q8")
    model = folder / "q8.gguf"
    # llama.cpp logs every tensor through this logger (about 350 lines): only under -v.
    logging.getLogger("llama-cpp-python").setLevel(logging.NOTSET)
    code, text = run("quantize", "smollm2-135m", "--type", "Q8_0", "-o", str(model))
    assert code == 0, text
    code, data = check_json(
        arc_store, str(model), folder, data_dir, "--save-run", str(folder / "run")
    )
    return model, text, code, data


@pytest.fixture(scope="module")
def broken_model(tmp_path_factory) -> Path:
    """TQ1_0: a real requantization that destroys SmolLM2 (loss 15.9 per token, FACTS.md)."""
    out = tmp_path_factory.mktemp("models") / "smollm2-tq1_0.gguf"
    code, text = run("quantize", "smollm2-135m", "--type", "TQ1_0", "-o", str(out))
    assert code == 0, text
    return out


@pytest.mark.model
def test_baseline_list_show_verify(store):
    code, text = run("baseline", "list", "--store", str(store))
    assert code == 0 and "main" in text and "smollm2-135m" in text
    code, text = run("baseline", "show", "main", "--store", str(store))
    assert code == 0 and "builtin_arithmetic" in text
    code, text = run("baseline", "verify", "main", "--store", str(store))
    assert code == 0 and "ok" in text and f"{EXAMPLES} records" in text


@pytest.mark.model
def test_q8_requantization_passes(q8, tmp_path):
    model, text, code, data = q8
    assert len(text.strip().splitlines()) == 1, text
    assert text.startswith(f"wrote {model} (") and text.rstrip().endswith(" MB, Q8_0)")
    verbose = tmp_path / "v.gguf"
    out, text = run("quantize", "smollm2-135m", "--type", "Q8_0", "-o", str(verbose), "-v")
    assert out == 0 and len(text.splitlines()) > 100
    [unit] = data["units"]
    # Never a REGRESSION; a PASS exactly when its within-margin test says so (100 examples
    # rarely suffice to show 2 points: the verdict is then INCONCLUSIVE, exit 0).
    shown = unit["pass_adjusted_pvalue"] < 0.05
    assert code == ExitCode.OK and data["verdict"] == ("PASS" if shown else "INCONCLUSIVE")
    assert unit["b"] + unit["c"] < 0.1 * unit["n"]  # Q8_0 changes about 1% of answers here
    assert unit["n"] == int(ARC_LIMIT)
    first = (model.parent / "r.md").read_text().splitlines()[0]
    assert first.startswith("## regress: ✅ PASS" if shown else "## regress: ⚠️ INCONCLUSIVE")
    # The same model with zero flips: tests/test_cli_misc.py (the committed baseline).


@pytest.mark.model
def test_decision_gates_judge_a_real_runs_own_accuracy(q8, arc_store, tmp_path):
    """The saved Q8_0 run gated again (no model run) under `gates:`: pass@1 required 15 points
    under its measured accuracy is shown met, 15 points over it shown failing (exit 1)."""
    model, _, _, data = q8
    [unit] = data["units"]
    accuracy = unit["candidate"]
    for offset, verdict, code in ((-0.15, "PASS", ExitCode.OK), (0.15, "REGRESSION", 1)):
        policy = tmp_path / "policy.yaml"
        bound = min(max(accuracy + offset, 0.01), 0.99)
        policy.write_text(f"gates:\n  pass_at_1: {{unit: arc_easy, min: {bound}}}\n")
        report = tmp_path / "r.json"
        out, text = run(
            "check", "-b", "arc", "--candidate-run", str(model.parent / "run"), "--store",
            str(arc_store), "--policy", str(policy), "--report-json", str(report),
        )  # fmt: skip
        assert out == code, text
        [gate] = json.loads(report.read_text())["requirements"]
        assert gate["value"] == pytest.approx(accuracy) and gate["n"] == unit["n"]
        assert gate["verdict"] == verdict


@pytest.mark.model
def test_the_estimands_gate_a_real_runs_choice_probabilities(q8, arc_store, tmp_path):
    """The saved Q8_0 run gated again (no model run) on the opt-in estimands: `p_gold`'s
    change is the mean paired change of the gold choice's softmax probability and `max_kl`'s
    value the mean KL between the choice distributions, both recomputed here from the stored
    log-likelihoods; each verdict is the one its bound implies."""
    model = q8[0]
    base = {r.doc_id: r for r in Store(arc_store).load("arc").records["arc_easy"]}
    cand = {r.doc_id: r for r in read_run(model.parent / "run").records["arc_easy"]}
    assert base.keys() == cand.keys()

    def softmax(record) -> np.ndarray:  # noqa: ANN001
        values = np.exp(np.asarray(record.scores["loglik"]) - max(record.scores["loglik"]))
        return values / values.sum()

    p = {d: (softmax(base[d]), softmax(cand[d])) for d in base}
    change = np.mean([q[cand[d].target] - b[base[d].target] for d, (b, q) in p.items()])
    kl = np.mean([min(float(np.sum(b * np.log(b / q))), 1.0) for b, q in p.values()])
    policy = tmp_path / "policy.yaml"
    policy.write_text("units:\n  arc_easy: {estimand: p_gold, max_drop: 0.02, max_kl: 0.05}\n")
    report = tmp_path / "r.json"
    code, text = run(
        "check", "-b", "arc", "--candidate-run", str(model.parent / "run"), "--store",
        str(arc_store), "--policy", str(policy), "--report-json", str(report),
    )  # fmt: skip
    data = json.loads(report.read_text())
    [unit] = data["units"]
    [divergence] = data["divergence"]
    assert unit["delta"] == pytest.approx(change, abs=1e-9)
    assert divergence["mean_kl"] == pytest.approx(kl, abs=1e-9)
    # A verdict and its bound never disagree (issue 50): PASS exactly when the bound is within
    # the limit, REGRESSION exactly when the bound the other way is beyond it.
    drop = unit["bounds"]
    assert (unit["verdict"] == "PASS") == (drop["at_most"] <= 0.02)
    assert (unit["verdict"] == "REGRESSION") == (
        drop["at_least"] is not None and drop["at_least"] > 0.02
    )
    assert (divergence["verdict"] == "PASS") == (divergence["at_most"] <= 0.05)
    assert (divergence["verdict"] == "REGRESSION") == (
        divergence["at_least"] is not None and divergence["at_least"] > 0.05
    )
    assert code == (1 if "REGRESSION" in (unit["verdict"], divergence["verdict"]) else 0), text


@pytest.mark.model
def test_a_ttft_gate_reads_the_candidates_real_bench(q8, arc_store, tmp_path):
    """A real bench of the Q8_0 file (8 timed requests): `ttft_ms` is tested on the
    candidate's own requests, at bounds placed on the measured times (twice the slowest:
    shown met; half the fastest: shown failing); a bench of another model file (its sha256
    changed) leaves the gate not evaluated (INCONCLUSIVE), never a PASS."""
    model = q8[0]
    bench = tmp_path / "bench.json"
    out, text = run(
        "bench", "-m", str(model), "-p", "16", "-n", "4", "-r", "1", "--output-len", "4",
        "-o", str(bench),
    )  # fmt: skip
    assert out == 0, text
    data = json.loads(bench.read_text())
    [result] = data["results"]
    assert result["model"]["sha256"] == file_sha256(model)
    own = [q["ttft_ms"] for q in result["latency"]["requests"]]
    assert len(own) == 8
    cases = ((2 * max(own), "PASS", ExitCode.OK), (min(own) / 2, "REGRESSION", 1))
    for bound, verdict, code in cases:
        policy = tmp_path / "policy.yaml"
        policy.write_text(f"gates:\n  ttft_ms: {{max: {bound}}}\n")
        report = tmp_path / "r.json"
        out, text = run(
            "check", "-b", "arc", "--candidate-run", str(model.parent / "run"), "--store",
            str(arc_store), "--policy", str(policy), "--bench", str(bench),
            "--report-json", str(report),
        )  # fmt: skip
        assert out == code, text
        [gate] = json.loads(report.read_text())["requirements"]
        assert gate["value"] == pytest.approx(statistics.median(own)) and gate["n"] == 8
        assert gate["verdict"] == verdict
    other = tmp_path / "other.json"
    result["model"]["sha256"] = "0" * 64
    other.write_text(json.dumps(data))
    out, text = run(
        "check", "-b", "arc", "--candidate-run", str(model.parent / "run"), "--store",
        str(arc_store), "--policy", str(policy), "--bench", str(other),
        "--report-json", str(report),
    )  # fmt: skip
    [gate] = json.loads(report.read_text())["requirements"]
    assert gate["verdict"] == "INCONCLUSIVE" and "sha256" in gate["reason"]


@pytest.mark.model
def test_destroyed_model_is_a_regression(arc_store, broken_model, q8, tmp_path, data_dir):
    """TQ1_0 against `arc`, with the Q8_0 run as the creep guard's anchor (a run folder): both
    rows regress, and the anchor row is what comparing the two saved runs directly gives."""
    anchor, candidate = q8[0].parent / "run", tmp_path / "cand"
    guard = ("--anchor", str(anchor), "--save-run", str(candidate))
    code, data = check_json(arc_store, str(broken_model), tmp_path, data_dir, *guard)
    assert code == ExitCode.REGRESSION
    assert data["verdict"] == "REGRESSION"
    unit, since = data["units"]
    name = read_run(anchor).manifest.name
    [oracle] = compare(read_run(anchor), read_run(candidate), Policy(max_drop=0.03)).units
    assert (unit["name"], since["name"], since["since"]) == (
        "arc_easy",
        f"arc_easy since {name}",
        name,
    )
    assert (since["n"], since["b"], since["c"]) == (oracle.n, oracle.b, oracle.c)
    assert since["pvalue"] == pytest.approx(oracle.pvalue)
    assert since["threshold"] == 0.03 and since["verdict"] == "REGRESSION"
    assert data["policy"]["anchor"] == str(anchor)
    assert unit["b"] > unit["c"] and unit["adjusted_pvalue"] < 0.05
    assert unit["candidate"] < unit["baseline"] - 0.1
    # The report decides in its first line, names the candidate by its file, and shows each
    # flip's question and both answers' texts from the documents the check rendered.
    report = (tmp_path / "r.md").read_text().splitlines()
    drop = (unit["baseline"] - unit["candidate"]) * 100
    assert report[0].startswith(f"## regress: ❌ REGRESSION: arc_easy dropped {drop:.1f} pts (")
    assert report[2].startswith("**smollm2-tq1_0.gguf** vs baseline **arc**")
    assert data["candidate"]["label"] == "smollm2-tq1_0.gguf"
    [task] = BUILTIN.get(["arc_easy"])
    docs = {e.doc_id: e.doc for e in task.examples(DataSource(data_dir=data_dir), 0, 100)}
    for flip in data["flips"]:
        doc = docs[flip["doc_id"]]
        assert flip["question"] == doc["question"]
        texts = doc["choices"]["text"]
        assert flip["baseline_answer"] == texts[flip["baseline_pred"]]
        assert flip["candidate_answer"] == texts[flip["candidate_pred"]]
    assert "| task | doc | question | baseline | candidate | expected |  |" in report


def test_baseline_create_names_units_under_min_examples():
    main = Store(REPO / "baselines").load("main")
    assert small_units(main, Policy()) == []  # 500 examples in the one built-in unit
    [plan] = plan_baseline(main, Policy(min_examples=600), TYPICAL_DISCORDANCE)
    assert small_units(main, Policy(min_examples=600)) == [
        "unit builtin has 500 examples, under the policy's min_examples 600: every check of it "
        f"will be INCONCLUSIVE; about {max(plan.n_needed, 600):,} would detect a 4.0-point drop "
        f"(twice max_drop, if {TYPICAL_DISCORDANCE:.0%} of answers flip: `regress plan`)"
    ]


def test_changed_prompt_is_refused_before_any_model_runs(tmp_path):
    copy = tmp_path / "store"
    subprocess.run(["cp", "-r", str(REPO / "baselines"), str(copy)], check=True)
    manifest = copy / "main" / "manifest.json"
    data = json.loads(manifest.read_text())
    data["tasks"]["builtin_dates"]["prompt_hash"] = "0" * 64
    manifest.write_text(json.dumps(data))
    # No model file at all: the refusal names the prompt, so nothing was loaded or run.
    missing = str(tmp_path / "absent.gguf")
    code, text = run("check", "--baseline", "main", "--model", missing, "--store", str(copy))
    assert code == ExitCode.BAD_INPUT and "builtin_dates" in text and "prompt hash" in text


@pytest.mark.model
def test_bad_inputs_exit_2_and_overwrite_nothing(store, tmp_path):
    before = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}
    policy = tmp_path / "p.yaml"
    policy.write_text("alpha: 0.05\nmax_dorp: 0.02\n")
    cases = [
        (
            "check",
            "-b",
            "main",
            "-m",
            "smollm2-135m",
            "--store",
            str(store),
            "--policy",
            str(policy),
        ),
        ("check", "-b", "../main", "-m", "smollm2-135m", "--store", str(store)),
        ("check", "-b", "nope", "-m", "smollm2-135m", "--store", str(store)),
        (
            "baseline",
            "create",
            "--name",
            "a/b",
            "-m",
            "smollm2-135m",
            "-t",
            "builtin",
            "--store",
            str(store),
        ),
    ]
    for args in cases:
        code, text = run(*args)
        assert code == ExitCode.BAD_INPUT, (args, text)
        assert "Traceback" not in text and len(text.strip().splitlines()) <= 2
    assert {p: p.read_bytes() for p in store.rglob("*") if p.is_file()} == before


@pytest.mark.model
def test_corrupt_baseline_is_bad_input(store, tmp_path):
    copy = tmp_path / "store"
    subprocess.run(["cp", "-r", str(store), str(copy)], check=True)
    records = copy / "main" / "records" / "builtin_units.jsonl"
    records.write_text(records.read_text()[:-30])
    code, text = run("check", "-b", "main", "-m", "smollm2-135m", "--store", str(copy))
    assert code == ExitCode.BAD_INPUT and "builtin_units.jsonl" in text and "truncated" in text


@pytest.mark.model
def test_drift_unchanged_setup_is_stable(store, tmp_path):
    code, text = run("drift", "-b", "main", "--store", str(store))
    assert code == 0, text
    assert "STABLE" in verdict_line(text) and "(cause: nothing)" in verdict_line(text)


@pytest.mark.model
def test_drift_names_a_swapped_model_file(store, broken_model):
    code, text = run("drift", "-b", "main", "--store", str(store), "--model", str(broken_model))
    assert code == ExitCode.REGRESSION, text
    assert "DRIFT" in verdict_line(text) and "(cause: model)" in verdict_line(text)
    assert "model file sha256" in text


@pytest.mark.model
def test_drift_reports_a_setting_that_changes_results(store):
    code, text = run(
        "drift", "-b", "main", "--store", str(store), "--model-args", "add_bos_token=true"
    )
    line = verdict_line(text)
    assert "(cause: runtime)" in line and "setting add_bos_token: False -> True" in text
    # Judged against the runtime's noise floor: drift exactly when the verdict says so.
    assert code == (ExitCode.REGRESSION if "DRIFT" in line else ExitCode.OK)


@pytest.mark.model
def test_shards_merge_to_identical_records(store, tmp_path):
    for i in range(3):
        code, text = run(
            "baseline",
            "create",
            "--name",
            "main",
            "-m",
            "smollm2-135m",
            "-t",
            TASKS,
            "--limit",
            LIMIT,
            "--shard",
            f"{i}/3",
            "--save-run",
            str(tmp_path / f"s{i}"),
            "--no-cache",
        )
        assert code == 0, text
    code, text = run(
        "merge",
        *(str(tmp_path / f"s{i}") for i in range(3)),
        "--baseline",
        "merged",
        "--store",
        str(tmp_path / "st"),
    )
    assert code == 0, text
    for path in (store / "main" / "records").iterdir():
        assert (
            tmp_path / "st" / "merged" / "records" / path.name
        ).read_bytes() == path.read_bytes()
    manifest = json.loads((tmp_path / "st" / "merged" / "manifest.json").read_text())
    original = json.loads((store / "main" / "manifest.json").read_text())
    assert manifest["tasks"] == original["tasks"]


@pytest.mark.model
def test_killed_eval_resumes_to_identical_records(store, tmp_path):
    env = {**os.environ, "REGRESS_CACHE_DIR": str(tmp_path / "cache")}
    args = [
        sys.executable,
        "-m",
        "regress.cli",
        "baseline",
        "create",
        "--name",
        "main",
        "-m",
        "smollm2-135m",
        "-t",
        TASKS,
        "--limit",
        LIMIT,
        "--store",
        str(tmp_path / "st"),
    ]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    db = tmp_path / "cache" / "results.sqlite"
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if db.exists() and _rows(db) >= 40:
            break
        time.sleep(0.2)
    assert proc.poll() is None, "run finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = _rows(db)
    assert not (tmp_path / "st" / "main").exists()
    finished = subprocess.run(args, env=env, capture_output=True, text=True)
    assert finished.returncode == 0, finished.stderr
    assert _rows(db) > done_before
    assert f"reused {done_before} cached results" in finished.stderr
    for path in (store / "main" / "records").iterdir():
        assert (tmp_path / "st" / "main" / "records" / path.name).read_bytes() == path.read_bytes()


def verdict_line(text: str) -> str:
    """The report's first line (the progress bar goes to stderr, mixed in here)."""
    return next(line for line in text.splitlines() if line.startswith("## regress"))


def _rows(db: Path) -> int:
    import sqlite3

    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT COUNT(*) FROM results").fetchone()[0]


@pytest.mark.model
def test_edited_cache_rows_are_computed_again_and_reported(store, tmp_path):
    """Rewritten cached rows once turned a verdict around without a word: now they fail their
    digest, are computed again, and the report counts them."""
    cache, report = tmp_path / "cache", tmp_path / "r.json"
    gate = ["check", "-b", "main", "--store", str(store), "-m", "smollm2-135m"]
    gate += ["--cache-dir", str(cache), "--report-json", str(report), "--name", "PR 7"]
    code, text = run(*gate)
    first = json.loads(report.read_text())
    assert (first["candidate"]["label"], first["candidate"]["run"]) == ("PR 7", "candidate")
    assert "**PR 7** vs baseline **main**" in text
    requests = first["cache"][0]["computed"]
    assert first["cache"] == [
        {"run": "candidate", "enabled": True, "replayed": 0, "computed": requests, "rejected": 0}
    ]
    assert requests >= 2 * EXAMPLES, text  # every choice of every example
    with sqlite3.connect(cache / "results.sqlite") as db:
        rows = db.execute("SELECT key, value FROM results").fetchall()
        edited = []
        for key, value in rows:
            row = json.loads(value)
            body = json.loads(row["body"])
            body["logprob"] = -1.0
            edited.append((json.dumps({**row, "body": json.dumps(body, sort_keys=True)}), key))
        db.executemany("UPDATE results SET value = ? WHERE key = ?", edited)
    assert run(*gate)[0] == code
    second = json.loads(report.read_text())
    assert second["verdict"] == first["verdict"] and second["units"] == first["units"]
    assert second["cache"][0] | {"rejected": 0, "computed": 0} == first["cache"][0] | {
        "computed": 0
    }
    assert second["cache"][0]["rejected"] == len(rows) == requests
    assert any("failed their digest" in w for w in second["warnings"])
