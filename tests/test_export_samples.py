"""`regress baseline export-samples`: lm-eval's --samples file for a stored baseline. The
real lm-eval run over an exported proxy is in tests/test_lm_eval_import.py."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from regress.cli import cli
from regress.core.errors import ExitCode
from regress.core.store import Store

ROOT = Path(__file__).resolve().parents[1]


def test_export_writes_each_task_s_doc_ids_and_the_lm_eval_flags(tmp_path: Path) -> None:
    out = tmp_path / "samples.json"
    store = str(ROOT / "baselines")
    result = CliRunner().invoke(
        cli, ["baseline", "export-samples", "main", "-o", str(out), "--store", store]
    )
    assert result.exit_code == 0, result.output
    run = Store(ROOT / "baselines").load("main")
    expected = {t: sorted(r.doc_id for r in rs) for t, rs in sorted(run.records.items())}
    assert json.loads(out.read_text()) == expected
    n = sum(len(ids) for ids in expected.values())
    assert f"wrote {n} doc ids of {len(expected)} tasks" in result.output
    assert f"--tasks {','.join(expected)} --num_fewshot 0 --samples {out}" in result.output


def test_an_unknown_baseline_is_bad_input_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "samples.json"
    result = CliRunner().invoke(
        cli, ["baseline", "export-samples", "nope", "-o", str(out), "--store", str(tmp_path)]
    )
    assert result.exit_code == ExitCode.BAD_INPUT and not out.exists()
