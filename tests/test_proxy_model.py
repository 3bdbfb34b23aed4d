"""A proxy baseline end to end on the real SmolLM2 model and real ARC-Easy questions.

The oracle is computed here, on this machine: the candidate (a real Q4_0 requantization) is
run over every parent example once, and the gate's estimate from the proxy must equal the
stratified estimate computed by hand from those records (reruns are exact on one machine).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import regress
from regress.cli import cli
from regress.core.manifest import Run
from regress.core.store import Store
from regress.proxy.build import ProxyOptions, build_proxy
from regress.run.suite import inline_suite
from regress.tasks.base import DataSource

PARENT_N = 40
BUDGET = 20


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output + (result.stderr if result.stderr_bytes else "")


@pytest.fixture(scope="module")
def parts(tmp_path_factory, data_dir) -> tuple[Path, Path, Run]:
    """(store with `full` and `proxy`, the Q4_0 file, the Q4_0 run over every parent example)."""
    root = tmp_path_factory.mktemp("proxy")
    q4 = root / "q4_0.gguf"
    assert run("quantize", "smollm2-135m", "--type", "Q4_0", "-o", str(q4))[0] == 0
    source = DataSource(data_dir=data_dir)
    specs = tuple(regress.suite_specs(inline_suite("arc_easy", limit=PARENT_N)))
    full = regress.execute(regress.RunPlan(specs, "smollm2-135m", name="full", source=source)).run
    candidate = regress.execute(regress.RunPlan(specs, str(q4), name="q4", source=source)).run
    store = Store(root / "baselines")
    store.save(full)
    proxy = build_proxy(
        store.load("full"), "proxy", ProxyOptions(budget=BUDGET, strata=3, min_per_stratum=5)
    )
    store.save(proxy)
    return root / "baselines", q4, candidate


def test_check_on_a_proxy_estimates_the_full_suite_from_a_rerun_of_its_examples(
    parts, data_dir, tmp_path
):
    store, q4, full_candidate = parts
    report = tmp_path / "report.json"
    markdown = tmp_path / "report.md"
    code, text = run(
        "check", "--baseline", "proxy", "--model", str(q4), "--store", str(store),
        "--data-dir", str(data_dir), "--no-cache",
        "--report-json", str(report), "--report-md", str(markdown),
    )  # fmt: skip
    assert code in (0, 1), text
    data = json.loads(report.read_text())
    unit = data["units"][0]
    assert data["calibration"] == []  # an unweighted ECE of a margin-stratified sample: none
    design = Store(store).load("proxy").manifest.proxy
    full = Store(store).load("full")
    before = {r.doc_id: r.correct for r in full.records["arc_easy"]}
    after = {r.doc_id: r.correct for r in full_candidate.records["arc_easy"]}
    expected = sum(
        s.population / PARENT_N * np.mean([after[d] - before[d] for d in s.docs["arc_easy"]])
        for s in design.unit_strata("arc_easy")
    )
    assert unit["n"] == BUDGET
    assert unit["proxy"]["population"] == PARENT_N
    assert unit["delta"] == pytest.approx(expected, abs=1e-12)
    assert unit["ci"][0] <= unit["delta"] <= unit["ci"][1]
    assert "### Proxy of `full`" in markdown.read_text()


def test_selftest_and_show_on_a_real_proxy(parts):
    store, _, _ = parts
    code, text = run("proxy", "show", "--baseline", "proxy", "--store", str(store))
    assert code == 0, text
    assert "proxy of full" in text
    code, text = run(
        "selftest", "--baseline", "proxy", "--store", str(store), "--runs", "200",
        "--inject-drop", "0.05",
    )  # fmt: skip
    assert code == 0, text
    assert "minimum detectable drop" in text and "5.0 pts" in text
    code, text = run("proxy", "show", "--baseline", "full", "--store", str(store))
    assert code == 2 and "not a proxy baseline" in text
