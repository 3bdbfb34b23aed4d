"""What `regress report` reads: stored accuracy runs, the gate's JSON comparisons,
`regress bench` JSON files and `regress sweep` folders, told apart by their content (views in
regress.bench.summaries and regress.sweep.frontier)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regress.bench.summaries import AccuracyRun, BenchModel, accuracy_run, bench_models
from regress.core.errors import BadInput
from regress.core.store import is_run_folder, read_run
from regress.sweep.frontier import Frontier, analyse
from regress.sweep.results import SweepResults


@dataclass(frozen=True)
class Inputs:
    """Everything given to one report."""

    accuracy: tuple[AccuracyRun, ...]
    comparisons: tuple[dict[str, Any], ...]
    """The gate's JSON reports (`regress check --report-json`), as written."""
    bench: tuple[BenchModel, ...]
    sweeps: tuple[tuple[SweepResults, Frontier], ...] = ()
    """`regress sweep` folders with their Pareto analysis (default objectives)."""


def load_inputs(paths: list[Path]) -> Inputs:
    """Sort each path into its kind: a run folder, a bench JSON or a gate JSON."""
    accuracy, comparisons, bench, sweeps = [], [], [], []
    for path in paths:
        if path.is_dir() and (path / "sweep.json").is_file():
            sweeps.append(analyse(path))
            continue
        if path.is_dir():
            if not is_run_folder(path):
                raise BadInput(f"{path}: not a run folder (no manifest.json)")
            accuracy.append(accuracy_run(read_run(path)))
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise BadInput(f"{path}: not a readable JSON file ({exc})") from exc
        if not isinstance(data, dict):
            raise BadInput(f"{path}: expected a JSON object")
        if str(data.get("schema", "")).startswith("regress-bench/"):
            try:
                bench += bench_models(data)
            except (KeyError, TypeError) as exc:
                raise BadInput(f"{path}: malformed bench file (missing {exc})") from exc
        elif "verdict" in data and "units" in data:
            comparisons.append(data)
        else:
            raise BadInput(
                f"{path}: neither a run folder, a `regress bench` JSON nor a gate JSON report"
            )
    if not (accuracy or comparisons or bench or sweeps):
        raise BadInput("report: nothing to show (give run folders, sweep folders or JSON files)")
    return Inputs(tuple(accuracy), tuple(comparisons), tuple(bench), tuple(sweeps))
