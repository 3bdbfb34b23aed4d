"""Smaller commands, and the committed baseline the README's first command checks."""

from __future__ import annotations

import json
import math
import shutil

import pytest
from click.testing import CliRunner
from conftest import REPO
from scipy.stats import norm

from regress.cli import cli
from regress.core.errors import ExitCode
from regress.core.store import read_run


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_plan_prints_connors_n():
    code, text = run("plan", "--discordance", "0.12", "--drop", "0.03")
    assert code == 0
    psi, delta = 0.12, 0.03
    expected = math.ceil(
        (norm.ppf(0.95) * math.sqrt(psi) + norm.ppf(0.8) * math.sqrt(psi - delta**2)) ** 2
        / delta**2
    )
    assert f"n = {expected} examples" in text
    code, text = run("plan", "--discordance", "0.01", "--drop", "0.03")
    assert code == ExitCode.BAD_INPUT and "cannot exceed" in text


@pytest.mark.model
def test_models_reads_gguf_headers():
    code, text = run("models")
    assert code == 0
    row = next(line for line in text.splitlines() if "smollm2-135m" in line)
    assert "llama" in row and "Q4_1" in row and "8192" in row and "135M" in row


@pytest.mark.model
def test_committed_baseline_passes_on_a_fresh_checkout(tmp_path):
    """README's first command: the packaged model against baselines/main."""
    report = tmp_path / "r.json"
    code, text = run(
        "check",
        "--baseline",
        "main",
        "--model",
        "smollm2-135m",
        "--store",
        str(REPO / "baselines"),
        "--report-json",
        str(report),
        "--no-cache",
        "--save-run",
        str(tmp_path / "run"),
    )
    assert code == ExitCode.OK, text
    data = json.loads(report.read_text())
    # Whatever this machine's CPU: the candidate is gated against records of its own compute
    # path (the stored ones when the kernels match, else a rerun here), so the same model
    # flips nothing.
    assert data["verdict"] == "PASS" and data["n_flips"] == 0
    assert sum(u["n"] for u in data["units"]) == 500
    hardware = data["hardware"]
    kernels_differ = any("kernels differ" in line for line in hardware["differences"])
    assert hardware["action"] == ("reran" if kernels_differ else "none")
    # promote: the saved candidate run becomes a baseline without rerunning anything
    store = tmp_path / "store"
    shutil.copytree(REPO / "baselines", store)
    code, text = run(
        "baseline",
        "promote",
        "--run",
        str(tmp_path / "run"),
        "--name",
        "main",
        "--store",
        str(store),
        "--force",  # the committed main is there, and replaced on purpose
    )
    assert code == 0, text
    promoted = read_run(store / "main")
    assert promoted.manifest.name == "main"
    assert promoted.records == read_run(tmp_path / "run").records
    assert run("baseline", "verify", "main", "--store", str(store))[0] == 0
