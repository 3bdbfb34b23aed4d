"""lm-eval output as input: real lm-eval 0.4.13 runs SmolLM2 on ARC-Easy, regress imports its
samples as a baseline, reruns exactly those examples on its own HF backend, and gates lm-eval's
files as a candidate.

lm-eval reads the same documents as regress: regress's loader writes the shared data's ARC
files in the Hub's row shape (what lm-eval's arc_easy YAML expects), and a task YAML that
includes lm-eval's own arc_easy.yaml points `dataset_path: json` at them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import lm_eval
import pytest
from click.testing import CliRunner

from regress.backends.hf import _model_folder
from regress.checks import CheckOptions, check_foreign, read_samples
from regress.cli import cli
from regress.core.errors import BadInput, ExitCode
from regress.core.store import read_run
from regress.run.lm_eval_import import canonical_doc, find_lm_eval_files, read_lm_eval_run
from regress.tasks import get_tasks, resolve_source
from regress.tasks.base import doc_hash

LIMIT = 10
LOGLIK_TOLERANCE = 1e-4
"""Per choice. Both sides run the same float32 weights; regress pads every input to a multiple
of 32 tokens and lm-eval (batch size 1) does not, which moves sums in the fifth decimal."""


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output + (result.stderr if result.stderr_bytes else "")


def refused(*args: str) -> str:
    """The one line a refused command writes to stderr (exit 2)."""
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == ExitCode.BAD_INPUT, result.output
    [line] = result.stderr.strip().splitlines()
    return line


def write_task(root: Path, data_dir: Path) -> Path:
    """lm-eval's arc_easy YAML, reading regress's rendering of the shared ARC files."""
    task = get_tasks(["arc_easy"])[0]
    source = resolve_source(data_dir)
    files = {}
    for split in ("test", "train"):
        files[split] = root / f"arc_easy_{split}.jsonl"
        rows = task.load(source, split)  # type: ignore[attr-defined]
        files[split].write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    tasks_dir = root / "tasks"
    tasks_dir.mkdir()
    yaml = Path(lm_eval.__file__).parent / "tasks" / "arc" / "arc_easy.yaml"
    (tasks_dir / "arc_easy.yaml").write_text(
        f"include: {yaml}\n"
        "task: arc_easy\n"
        "tag: []\n"
        "dataset_path: json\n"
        "dataset_name: null\n"
        "dataset_kwargs:\n"
        "  data_files:\n"
        f"    test: {files['test']}\n"
        f"    train: {files['train']}\n",
        encoding="utf-8",
    )
    return tasks_dir


def run_lm_eval(out: Path, tasks_dir: Path, model_args: str, *options: str) -> Path:
    """`lm_eval --log_samples` (hf backend) on ARC-Easy, offline, into `out`."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    command = [
        *(sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args", model_args),
        *("--tasks", "arc_easy", "--include_path", str(tasks_dir), "--device", "cpu"),
        *("--output_path", str(out), "--log_samples", *options),
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def smollm2_args(smollm2_path: Path, dtype: str) -> str:
    # The dequantised HF copy regress caches loads in 0.4 s instead of 15 s from the GGUF.
    return f"pretrained={_model_folder(smollm2_path)},dtype={dtype}"


@pytest.fixture(scope="module")
def tasks_dir(tmp_path_factory, data_dir) -> Path:
    return write_task(tmp_path_factory.mktemp("lm_eval"), data_dir)


@pytest.fixture(scope="module")
def lm_eval_out(tmp_path_factory, tasks_dir, smollm2_path) -> Path:
    """`lm_eval --log_samples` on the first LIMIT ARC-Easy test questions, offline."""
    out = tmp_path_factory.mktemp("base") / "out"
    args = smollm2_args(smollm2_path, "float32")
    return run_lm_eval(out, tasks_dir, args, "--limit", str(LIMIT), "--batch_size", "1")


@pytest.fixture(scope="module")
def imported(lm_eval_out, tmp_path_factory, data_dir) -> dict[str, Path]:
    """The lm-eval run imported as baseline `lmeval`, then rerun by regress's hf backend."""
    root = tmp_path_factory.mktemp("gate")
    store, rerun = root / "store", root / "rerun"
    code, text = run(
        "baseline",
        "import-lm-eval",
        "--samples",
        str(lm_eval_out),
        "--name",
        "lmeval",
        "--store",
        str(store),
    )
    assert code == 0 and f"{LIMIT} examples in 1 tasks" in text, text
    code, text = run(
        "check",
        "--baseline",
        "lmeval",
        "--model",
        "smollm2-135m",
        "--backend",
        "hf",
        "--allow-backend-change",
        "--data-dir",
        str(data_dir),
        "--store",
        str(store),
        "--no-cache",
        "--save-run",
        str(rerun),
        "--report-json",
        str(root / "report.json"),
    )
    assert code == ExitCode.OK, text
    return {"store": store, "rerun": rerun, "report": root / "report.json"}


def test_import_keeps_lm_eval_identity_and_scores(lm_eval_out, imported):
    run_ = read_run(imported["store"] / "lmeval")
    manifest = run_.manifest
    assert manifest.backend.name == "lm-eval:hf"
    assert manifest.backend.version == "0.4.13" and manifest.backend.params["dtype"] == "float32"
    info = manifest.tasks["arc_easy"]
    assert (info.n, info.num_fewshot, info.metric, info.limit) == (LIMIT, 0, "acc", LIMIT)
    files = find_lm_eval_files(lm_eval_out)
    lines = [json.loads(x) for x in files.samples["arc_easy"].read_text().splitlines()]
    results = json.loads(files.results.read_text())["results"]["arc_easy"]
    records = run_.records["arc_easy"]
    assert [r.doc_id for r in records] == list(range(LIMIT))
    for record, line in zip(records, lines, strict=True):
        logliks = [float(resp[0][0]) for resp in line["resps"]]
        assert record.scores["loglik"] == logliks
        assert record.correct == int(line["acc"]) and record.target == int(line["target"])
        assert record.pred == max(range(len(logliks)), key=logliks.__getitem__)
    assert sum(r.correct for r in records) / LIMIT == pytest.approx(results["acc,none"])


def test_regress_rerun_pairs_every_example_and_matches_lm_eval(imported):
    baseline = read_run(imported["store"] / "lmeval").records["arc_easy"]
    rerun = read_run(imported["rerun"]).records["arc_easy"]
    assert [r.doc_hash for r in rerun] == [r.doc_hash for r in baseline]
    assert [r.prompt_hash for r in rerun] == [r.prompt_hash for r in baseline]
    assert [r.pred for r in rerun] == [r.pred for r in baseline]
    gaps = [
        abs(a - b)
        for ours, theirs in zip(rerun, baseline, strict=True)
        for a, b in zip(ours.scores["loglik"], theirs.scores["loglik"], strict=True)
    ]
    assert len(gaps) == 4 * LIMIT and max(gaps) < LOGLIK_TOLERANCE
    report = json.loads(imported["report"].read_text())
    [unit] = report["units"]
    assert report["unpaired"] == 0 and unit["n"] == LIMIT and unit["b"] == unit["c"] == 0
    assert any("differs from the baseline's lm-eval:hf" in w for w in report["warnings"])


def test_check_gates_lm_eval_samples_against_a_regress_baseline(lm_eval_out, imported, tmp_path):
    store = tmp_path / "store"
    code, text = run(
        "baseline",
        "promote",
        "--run",
        str(imported["rerun"]),
        "--name",
        "main",
        "--store",
        str(store),
    )
    assert code == 0, text
    report, policy = tmp_path / "r.json", tmp_path / "policy.yaml"
    # 10 examples: enough for zero flips to show no harm, never to show a drop within 2 points.
    policy.write_text("min_examples: 10\npass_requires: no_evidence_of_harm\n")
    code, text = run(
        "check",
        "-b",
        "main",
        "--candidate-samples",
        str(lm_eval_out),
        "--store",
        str(store),
        "--policy",
        str(policy),
        "--report-json",
        str(report),
    )
    assert code == ExitCode.OK, text
    data = json.loads(report.read_text())
    assert data["verdict"] == "PASS" and data["unpaired"] == 0 and data["n_flips"] == 0
    assert data["candidate"]["backend"] == "lm-eval:hf" and data["units"][0]["n"] == LIMIT
    assert any("lm-eval files" in w and "on hf" in w for w in data["warnings"])


def copy_run(lm_eval_out: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the lm-eval output and the path of its samples file."""
    copy = tmp_path / "out"
    shutil.copytree(lm_eval_out, copy)
    return copy, find_lm_eval_files(copy).samples["arc_easy"]


def test_malformed_samples_line_is_bad_input_naming_file_and_line(lm_eval_out, tmp_path):
    copy, samples = copy_run(lm_eval_out, tmp_path)
    lines = samples.read_text().splitlines(keepends=True)
    lines[2] = lines[2][:40] + "\n"
    samples.write_text("".join(lines))
    code, text = run(
        "baseline",
        "import-lm-eval",
        "--samples",
        str(copy),
        "--name",
        "x",
        "--store",
        str(tmp_path / "store"),
    )
    assert code == ExitCode.BAD_INPUT and f"{samples.name}:3: not valid JSON" in text
    assert not (tmp_path / "store").exists()


def test_changed_document_is_refused_by_the_gate(lm_eval_out, imported, tmp_path):
    copy, samples = copy_run(lm_eval_out, tmp_path)
    lines = [json.loads(x) for x in samples.read_text().splitlines()]
    lines[4]["doc"]["question"] += " (edited)"
    samples.write_text("".join(json.dumps(x) + "\n" for x in lines))
    code, text = run(
        "check", "-b", "lmeval", "--candidate-samples", str(copy), "--store", str(imported["store"])
    )
    assert code == ExitCode.BAD_INPUT and "arc_easy: dataset hash differs" in text


def test_document_fields_match_regress_loaders(data_dir):
    source = resolve_source(data_dir)
    names = ("arc_challenge", "mmlu_anatomy", "piqa", "boolq", "hellaswag", "truthfulqa_mc2")
    for name in (*names, "builtin_units"):
        task = get_tasks([name])[0]
        doc = task.examples(source, 0, 1)[0].doc
        # lm-eval keeps extra columns (HellaSwag's raw ones); the canonical doc drops them.
        noisy = {**doc, "ctx_a": "raw column lm-eval keeps"}
        assert doc_hash(canonical_doc(name, noisy)) == doc_hash(doc), name
    unknown = {"sentence": "x", "option1": "a"}
    assert canonical_doc("winogrande", unknown) == unknown


def test_finds_the_newest_run_and_refuses_ambiguous_folders(lm_eval_out, tmp_path):
    copy, samples = copy_run(lm_eval_out, tmp_path)
    model_dir = samples.parent
    newer = "2999-01-01T00-00-00.000000"
    results = find_lm_eval_files(copy).results
    shutil.copy(results, model_dir / f"results_{newer}.json")
    with pytest.raises(BadInput, match="no samples_<task>_2999"):
        find_lm_eval_files(copy)
    shutil.copy(samples, model_dir / f"samples_arc_easy_{newer}.jsonl")
    assert find_lm_eval_files(model_dir).results.name == f"results_{newer}.json"
    shutil.copytree(model_dir, copy / "other-model")
    with pytest.raises(BadInput, match="several models"):
        find_lm_eval_files(copy)
    (tmp_path / "empty").mkdir()
    with pytest.raises(BadInput, match="no lm-eval results"):
        find_lm_eval_files(tmp_path / "empty")


def test_generation_tasks_are_refused_by_name(lm_eval_out, tmp_path):
    copy, _ = copy_run(lm_eval_out, tmp_path)
    results = find_lm_eval_files(copy).results
    data = json.loads(results.read_text())
    data["configs"]["arc_easy"]["output_type"] = "loglikelihood_rolling"
    results.write_text(json.dumps(data))
    with pytest.raises(BadInput, match="arc_easy is loglikelihood_rolling; only multiple_choice"):
        read_lm_eval_run(copy, "x")
    with pytest.raises(BadInput, match="no samples for gsm8k"):
        read_lm_eval_run(copy, "x", tasks=["gsm8k"])


def test_a_task_regress_does_not_know_is_read_with_lm_eval_metrics(lm_eval_out, tmp_path):
    copy, samples = copy_run(lm_eval_out, tmp_path)
    results = find_lm_eval_files(copy).results
    data = json.loads(results.read_text())
    data["configs"]["my_arc"] = data["configs"].pop("arc_easy")
    data["n-shot"]["my_arc"] = data["n-shot"].pop("arc_easy")
    results.write_text(json.dumps(data))
    renamed = samples.with_name(samples.name.replace("arc_easy", "my_arc"))
    samples.rename(renamed)
    run_ = read_lm_eval_run(copy, "x")
    info, records = run_.manifest.tasks["my_arc"], run_.records["my_arc"]
    assert (info.metric, info.group, info.n) == ("acc", None, LIMIT)
    first = json.loads(renamed.read_text().splitlines()[0])
    assert records[0].doc_hash == doc_hash(first["doc"])
    assert records[0].correct == int(first["acc"])


PROXY = 6
"""Examples in the proxy of the imported baseline the candidate lm-eval run evaluates."""


@pytest.fixture(scope="module")
def exported(imported, tmp_path_factory) -> Path:
    """A proxy of the imported baseline (PROXY of its LIMIT questions), exported as lm-eval's
    --samples file."""
    store = imported["store"]
    code, text = run(
        *("proxy", "build", "--baseline", "lmeval", "--budget", str(PROXY), "--name", "px"),
        *("--strata", "1", "--min-per-stratum", "2", "--store", str(store)),
    )
    assert code == 0, text
    samples = tmp_path_factory.mktemp("export") / "samples.json"
    code, text = run("baseline", "export-samples", "px", "-o", str(samples), "--store", str(store))
    assert code == 0 and f"wrote {PROXY} doc ids of 1 tasks" in text, text
    return samples


@pytest.fixture(scope="module")
def candidate_out(exported, tasks_dir, smollm2_path, tmp_path_factory) -> Path:
    """The candidate: lm-eval over exactly the proxy's examples, in bfloat16, two a batch."""
    out = tmp_path_factory.mktemp("cand") / "out"
    args = smollm2_args(smollm2_path, "bfloat16")
    return run_lm_eval(out, tasks_dir, args, "--samples", str(exported), "--batch_size", "2")


def lm_eval_lines(out: Path) -> list[dict]:
    path = find_lm_eval_files(out).samples["arc_easy"]
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


def test_export_samples_drives_lm_eval_over_exactly_the_baseline_examples(
    imported, exported, candidate_out
):
    proxy = read_run(imported["store"] / "px").records["arc_easy"]
    ids = sorted(r.doc_id for r in proxy)
    assert json.loads(exported.read_text()) == {"arc_easy": ids}
    assert len(ids) == PROXY and set(ids) <= set(range(LIMIT))
    logged = [line["doc_id"] for line in lm_eval_lines(candidate_out)]
    assert sorted(logged) == ids
    # The same documents, rendered by lm-eval again: they pair with the proxy's records.
    ours = {r.doc_id: r.doc_hash for r in proxy}
    theirs = {
        r.doc_id: r.doc_hash for r in read_lm_eval_run(candidate_out, "c").records["arc_easy"]
    }
    assert theirs == ours


def test_imported_fingerprint_carries_what_lm_eval_recorded(lm_eval_out, candidate_out):
    import torch
    import transformers

    from regress.core.fingerprint import this_cpu

    base = read_lm_eval_run(lm_eval_out, "b").manifest
    cand = read_lm_eval_run(candidate_out, "c").manifest
    params = base.backend.params
    assert params["pretrained"] == cand.backend.params["pretrained"]
    assert (params["dtype"], cand.backend.params["dtype"]) == ("float32", "bfloat16")
    assert (params["batch_size"], cand.backend.params["batch_size"]) == ("1", "2")
    assert params["revision"] == "main" and params["device"] == "cpu"
    # lm-eval ran in this interpreter: its environment dump names this torch and CPU.
    libraries = {"torch": torch.__version__, "transformers": transformers.__version__}
    assert base.backend.libraries == libraries
    assert base.backend.hardware.cpu.name == this_cpu().name
    assert base.environment["eval_settings"] == {
        "chat_template_sha": None,
        "system_instruction_sha": None,
        "fewshot_as_multiturn": None,
        "gen_kwargs": {},
    }


def flips(base: list, cand_lines: list[dict]) -> tuple[int, int]:
    """(right -> wrong, wrong -> right) between records and lm-eval lines, by doc id."""
    cand = {line["doc_id"]: int(line["acc"]) for line in cand_lines}
    pairs = [(r.correct, cand[r.doc_id]) for r in base if r.doc_id in cand]
    return pairs.count((1, 0)), pairs.count((0, 1))


def verdict_exit(data: dict) -> int:
    return ExitCode.REGRESSION if data["verdict"] == "REGRESSION" else ExitCode.OK


def test_a_proxy_of_an_lm_eval_run_gates_its_candidate_run(imported, candidate_out, tmp_path):
    report = tmp_path / "r.json"
    code, text = run(
        *("check", "-b", "px", "--candidate-samples", str(candidate_out)),
        *("--store", str(imported["store"]), "--report-json", str(report)),
    )
    data = json.loads(report.read_text())
    assert code == verdict_exit(data), text
    proxy = read_run(imported["store"] / "px").records["arc_easy"]
    [unit] = data["units"]
    assert unit["n"] == PROXY and (unit["b"], unit["c"]) == flips(
        proxy, lm_eval_lines(candidate_out)
    )
    candidate = data["candidate"]
    assert candidate["backend"] == "lm-eval:hf" and candidate["params"]["dtype"] == "bfloat16"
    warnings = data["warnings"]
    assert any(w.startswith("no runtime check was possible") for w in warnings)
    assert "dtype changed: float32 -> bfloat16" in warnings
    assert any(w.startswith("batch_size changed (1 -> 2)") for w in warnings)


def test_two_lm_eval_runs_gate_from_the_cli_and_the_library(lm_eval_out, candidate_out, tmp_path):
    both = ("check", "--baseline-samples", str(lm_eval_out), "--candidate-samples")
    # LIMIT documents against the proxy's PROXY: not the same evaluation.
    assert "arc_easy: dataset hash differs" in refused(*both, str(candidate_out))
    report = tmp_path / "r.json"
    code, text = run(*both, str(candidate_out), "--allow-mismatch", "--report-json", str(report))
    data = json.loads(report.read_text())
    assert code == verdict_exit(data), text
    base = read_lm_eval_run(lm_eval_out, "baseline")
    [unit] = data["units"]
    expected = flips(base.records["arc_easy"], lm_eval_lines(candidate_out))
    assert unit["n"] == PROXY and (unit["b"], unit["c"]) == expected
    assert data["baseline"]["params"]["dtype"] == "float32"
    library = check_foreign(
        base, read_samples(candidate_out, "candidate"), CheckOptions(allow_mismatch=True)
    ).comparison
    [ours] = library.units
    assert (ours.n, ours.b, ours.c, library.verdict.value) == (
        unit["n"],
        unit["b"],
        unit["c"],
        data["verdict"],
    )
    assert library.warnings[0].startswith("no runtime check was possible")


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["n-shot"].update(arc_easy=5), "arc_easy: n-shot 0 in the baseline, 5"),
        (lambda d: d.update(chat_template_sha="ab12"), "chat_template_sha unset in the baseline"),
        (lambda d: d["config"].update(model="vllm"), "candidate on lm-eval:vllm"),
    ],
)
def test_runs_that_asked_differently_are_refused(imported, candidate_out, tmp_path, edit, message):
    copy = tmp_path / "out"
    shutil.copytree(candidate_out, copy)
    results = find_lm_eval_files(copy).results
    data = json.loads(results.read_text())
    edit(data)
    results.write_text(json.dumps(data))
    store = ("--store", str(imported["store"]))
    assert message in refused("check", "-b", "px", "--candidate-samples", str(copy), *store)
