"""A CI matrix end to end on the packaged SmolLM2 (llama.cpp): the shard jobs as separate
processes, `regress merge`, and the gate of the merged run, against one unsharded run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.model

SHARDS = 3
LIMIT = 6
"""Examples per built-in task: 30 in all, ten per shard."""


def _regress(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """One `regress` process, as a CI job runs it."""
    return subprocess.run(
        [sys.executable, "-m", "regress.cli", *map(str, args)],
        cwd=cwd,
        env=os.environ | {"REGRESS_CACHE_DIR": str(cwd / "cache")},
        capture_output=True,
        text=True,
        timeout=600,
    )


def _records(run: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((run / "records").iterdir())}


def test_shard_jobs_merge_into_one_runs_records_and_verdict(tmp_path: Path) -> None:
    created = _regress(
        "baseline", "create", "--name", "main", "--model", "smollm2-135m", "--tasks", "builtin",
        "--limit", LIMIT, "--store", "store", cwd=tmp_path,
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    check = ("check", "--baseline", "main", "--store", "store", "--no-cache")
    # The matrix the plan job would print, at a rate that gives SHARDS jobs of ten examples.
    planned = _regress(
        "plan", "--baseline", "main", "--store", "store", "--shards", "--examples-per-second",
        "1", "--job-minutes", f"{10.5 / 60}", cwd=tmp_path,
    )  # fmt: skip
    assert planned.returncode == 0, planned.stderr
    matrix = json.loads(planned.stdout)["include"]
    assert [(m["shard"], m["of"]) for m in matrix] == [(i, SHARDS) for i in range(SHARDS)]
    # The plan job's other way: the rate timed on the candidate here, the load counted apart.
    timed = _regress(
        "plan", "--baseline", "main", "--store", "store", "--shards", "--time", "smollm2-135m",
        "--time-examples", "10", "--job-minutes", "1", cwd=tmp_path,
    )  # fmt: skip
    assert timed.returncode == 0, timed.stderr
    assert "tokens/s, measured on 10 examples of smollm2-135m" in timed.stderr
    count = len(json.loads(timed.stdout)["include"])
    assert 1 <= count <= 5 * LIMIT
    for job in matrix:
        shard = f"{job['shard']}/{job['of']}"
        done = _regress(
            *check, "--model", "smollm2-135m", "--shard", shard, "--save-run",
            f"shard{job['shard']}", cwd=tmp_path,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
    merged = _regress("merge", *(f"shard{i}" for i in range(SHARDS)), "-o", "merged", cwd=tmp_path)
    assert merged.returncode == 0, merged.stderr
    one = _regress(
        *check, "--model", "smollm2-135m", "--save-run", "one",
        "--report-json", "one.json", cwd=tmp_path,
    )  # fmt: skip
    gated = _regress(
        *check, "--candidate-run", "merged", "--report-json", "merged.json", cwd=tmp_path
    )
    assert _records(tmp_path / "merged") == _records(tmp_path / "one")
    assert sum(len(b.splitlines()) for b in _records(tmp_path / "one").values()) == 5 * LIMIT
    assert gated.returncode == one.returncode
    verdicts = [json.loads((tmp_path / f).read_text()) for f in ("one.json", "merged.json")]
    assert verdicts[0]["verdict"] == verdicts[1]["verdict"]
    assert [u["verdict"] for u in verdicts[0]["units"]] == [
        u["verdict"] for u in verdicts[1]["units"]
    ]
