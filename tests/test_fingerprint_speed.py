"""OpenMP waiting is a speed-only setting: recorded in the fingerprint, never in the floats."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from regress.backends import GOMP_SPINCOUNT, default_openmp_waiting
from regress.core.fingerprint import (
    OPENMP_WAIT_VARIABLES,
    SPEED_ONLY_PARAMS,
    HardwarePath,
    RuntimeFingerprint,
    openmp_waiting,
)
from regress.core.store import read_run

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("user", "expected"),
    [
        ({}, f"GOMP_SPINCOUNT={GOMP_SPINCOUNT}"),
        ({"OMP_WAIT_POLICY": "ACTIVE"}, "OMP_WAIT_POLICY=ACTIVE"),
        ({"OMP_WAIT_POLICY": "PASSIVE"}, "OMP_WAIT_POLICY=PASSIVE"),
        ({"GOMP_SPINCOUNT": "infinite"}, "GOMP_SPINCOUNT=infinite"),
    ],
)
def test_the_default_leaves_a_user_s_waiting_alone(
    monkeypatch: pytest.MonkeyPatch, user: dict[str, str], expected: str
) -> None:
    for name in OPENMP_WAIT_VARIABLES:
        monkeypatch.setenv(name, "")  # recorded, so the teardown restores it
        monkeypatch.delenv(name)
    for name, value in user.items():
        monkeypatch.setenv(name, value)
    default_openmp_waiting()
    assert openmp_waiting() == expected


def test_waiting_stays_out_of_the_compute_path() -> None:
    def fingerprint(waiting: str) -> RuntimeFingerprint:
        params = {"n_ctx": 2048, "threads": 2, "openmp_waiting": waiting}
        return RuntimeFingerprint("llama_cpp", "0.3.36", params, hardware=HardwarePath("AVX2"))

    assert "openmp_waiting" in SPEED_ONLY_PARAMS
    spinning, passive = fingerprint("GOMP_SPINCOUNT=1000"), fingerprint("OMP_WAIT_POLICY=PASSIVE")
    assert spinning.compute_key() == passive.compute_key()
    assert spinning.to_dict() != passive.to_dict()  # recorded all the same


def _eval(out: Path, waiting: dict[str, str]) -> None:
    """`regress eval` in a process of its own: libgomp reads the waiting once, when it loads."""
    env = {k: v for k, v in os.environ.items() if k not in OPENMP_WAIT_VARIABLES}
    command = [sys.executable, "-m", "regress.cli", "eval", "-m", "smollm2-135m"]
    command += ["-t", "builtin_arithmetic", "--limit", "20", "--no-cache", "--save-run", str(out)]
    done = subprocess.run(command, env={**env, **waiting}, capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.mark.model
def test_each_waiting_gives_byte_identical_records(tmp_path: Path) -> None:
    # Not ACTIVE: spinning forever beside another test process takes minutes.
    ways = {"default": {}, "passive": {"OMP_WAIT_POLICY": "PASSIVE"}}
    for name, waiting in ways.items():
        _eval(tmp_path / name, waiting)
    records = {
        name: (tmp_path / name / "records" / "builtin_arithmetic.jsonl").read_bytes()
        for name in ways
    }
    assert records["passive"] == records["default"]
    recorded = {name: read_run(tmp_path / name).manifest.backend for name in ways}
    assert recorded["default"].params["openmp_waiting"] == f"GOMP_SPINCOUNT={GOMP_SPINCOUNT}"
    assert recorded["passive"].params["openmp_waiting"] == "OMP_WAIT_POLICY=PASSIVE"
    assert recorded["default"].compute_key() == recorded["passive"].compute_key()
