"""regress sweep on the real SmolLM2-135M: real quantizations measured, a killed sweep resumed
without recomputing what it stored, identical tensors detected, then recommend and report.

Relations only (no float measured on one machine): Q2_K diverges from the source more than
Q8_0 does, every configuration is scored on the source's very tokens, and so on.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner

from regress.cli import cli
from regress.report.html import figure_json, render_html
from regress.report.sources import load_inputs
from regress.run.suite import inline_suite
from regress.sweep.frontier import analyse
from regress.sweep.run import SweepOptions, parse_types, run_sweep
from regress.sweep.token_kld import DivergenceOptions
from regress.tasks.base import DataSource

TYPES = "Q8_0,Q2_K,Q3_K_S"
# Tiny on purpose: 3 ARC-Easy questions, one 64-token WikiText-2 chunk, pp16/tg4 twice.
SIZES = ["--limit", "3", "--ppl-chunks", "1", "--ppl-ctx", "64", "--runs", "2"]
SIZES += ["-p", "16", "-n", "4"]


def _options(out: Path, data_dir: Path) -> SweepOptions:
    return SweepOptions(
        model="smollm2-135m",
        configs=parse_types(TYPES),
        out_dir=out,
        suite=inline_suite("arc_easy", None, 3),
        source=DataSource(data_dir),
        divergence=DivergenceOptions(n_ctx=64, n_chunks=1),
        n_prompt=16,
        n_gen=4,
        bench_runs=2,
    )


def test_sweep_resumes_after_kill_and_measures_real_quantizations(
    tmp_path: Path, data_dir: Path
) -> None:
    out = tmp_path / "sweep"
    env = {**os.environ, "REGRESS_DATA_DIR": str(data_dir)}
    args = [sys.executable, "-m", "regress.cli", "sweep", "-m", "smollm2-135m", "--types", TYPES]
    args += ["-t", "arc_easy", *SIZES, "-o", str(out)]
    # Its own process group: the kill takes the bench's worker process too.
    proc = subprocess.Popen(
        args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    first = out / "configs" / "source.json"
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None and not first.exists():
        time.sleep(0.05)
    assert proc.poll() is None, "the sweep ended before it could be killed"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert first.exists()
    stamp = first.stat().st_mtime_ns
    assert not (out / "configs" / "Q2_K.json").exists()

    lines: list[str] = []
    sweep = run_sweep(_options(out, data_dir), lines.append)
    assert first.stat().st_mtime_ns == stamp
    assert not any(line.startswith("source:") for line in lines)  # not recomputed
    assert [r.name for r in sweep.results] == ["source", "Q8_0", "Q2_K", "Q3_K_S"]
    assert sweep.pending == () and sweep.skipped == ()

    source, q8, q2, q3 = sweep.results
    assert q3.identical_to == "Q2_K" and q3.sha256 != q2.sha256
    assert q3.weights_sha256 == q2.weights_sha256 != q8.weights_sha256
    assert q2.size_bytes < source.size_bytes < q8.size_bytes
    assert q2.bits_per_weight < q8.bits_per_weight
    assert source.divergence.kld_mean == 0 and source.divergence.same_top == 1
    assert 0 < q8.divergence.kld_mean < q2.divergence.kld_mean
    # The same tokens for every configuration: the source's perplexity is each one's base.
    for r in sweep.results:
        assert r.divergence.ppl_base == source.divergence.ppl
        assert r.divergence.n_tokens == source.divergence.n_tokens == 64 - 64 // 2 - 1
        assert 0 < r.divergence.same_top <= 1
        assert r.overall.n == 3 and r.speed.tg_ts > 0 and r.speed.peak_rss_bytes > 0
    assert source.overall.b == source.overall.c == 0

    # Evaluated again by the same code: the result cache answers, the same scores come back.
    again = run_sweep(dataclasses.replace(_options(out, data_dir), reevaluate=True))
    assert [r.scores for r in again.results] == [r.scores for r in sweep.results]
    assert [r.divergence for r in again.results] == [r.divergence for r in sweep.results]

    _, frontier = analyse(out)
    assert frontier.names == ("source", "Q8_0", "Q2_K")
    assert any("Q3_K_S has the same tensors as Q2_K" in w for w in frontier.warnings)
    result = CliRunner().invoke(cli, ["recommend", "--sweep", str(out), "--max-memory", "10GB"])
    assert result.exit_code == 0, result.output
    assert "| Q3_K_S | " in result.output and "| = Q2_K |" in result.output
    assert "Recommended: " in result.output and "Recommended: none" not in result.output

    page = render_html(load_inputs([out]))
    chart = figure_json(page, "sweep0-accuracy_vs_latency")
    assert [t["name"] for t in chart["data"]] == ["front (these two axes)", "configurations"]
    assert chart["data"][1]["text"] == ["source", "Q8_0", "Q2_K"]
    assert "Pareto" in chart["data"][1]["hovertext"][0]
