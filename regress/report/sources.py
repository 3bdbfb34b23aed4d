"""What `regress report` reads: stored accuracy runs, the gate's JSON comparisons,
`regress bench` JSON files, `regress sweep` folders and history files (`check
--record-history`, a `.jsonl` file), told apart by their content (views in
regress.bench.summaries, regress.sweep.frontier and regress.report.history)."""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from regress.bench.summaries import AccuracyRun, BenchModel, accuracy_run, bench_models
from regress.core.errors import BadInput
from regress.core.hashes import is_sha256
from regress.core.safe_json import load_file
from regress.core.store import is_run_folder, read_run
from regress.report.history import HistoryEntry, read_history
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
    history: tuple[HistoryEntry, ...] = ()
    """The gate runs of history files, in file order."""


def load_inputs(paths: list[Path]) -> Inputs:
    """Sort each path into its kind: a run folder, a sweep folder, a history file (`.jsonl`),
    a bench JSON or a gate JSON."""
    accuracy, comparisons, bench, sweeps, history = [], [], [], [], []
    for path in paths:
        if path.is_file() and path.suffix == ".jsonl":
            history += read_history(path)
            continue
        if path.is_dir() and (path / "sweep.json").is_file():
            sweeps.append(analyse(path))
            continue
        if path.is_dir():
            if not is_run_folder(path):
                raise BadInput(f"{path}: not a run folder (no manifest.json)")
            run = accuracy_run(read_run(path))  # read_run checks the model's sha256
            _check(_is_time(run.created), path, "created is not an ISO-8601 time", "manifest")
            accuracy.append(run)
            continue
        data = load_file(path)
        if not isinstance(data, dict):
            raise BadInput(f"{path}: expected a JSON object")
        if _is_bench(data):
            bench += _bench(data, path)
        elif "verdict" in data and "units" in data:
            comparisons.append(_comparison(data, path))
        else:
            raise BadInput(
                f"{path}: neither a run folder, a `regress bench` JSON nor a gate JSON report"
            )
    if not (accuracy or comparisons or bench or sweeps or history):
        raise BadInput(
            "report: nothing to show (give run folders, sweep folders, JSON or history files)"
        )
    return Inputs(tuple(accuracy), tuple(comparisons), tuple(bench), tuple(sweeps), tuple(history))


def load_bench(path: Path) -> tuple[BenchModel, ...]:
    """The models of a `regress bench` JSON file, checked; anything else is BadInput."""
    data = load_file(path)
    if not isinstance(data, dict) or not _is_bench(data):
        raise BadInput(f"{path}: not a `regress bench` JSON file (bench -o FILE.json)")
    return tuple(_bench(data, path))


def _is_bench(data: dict[str, Any]) -> bool:
    return str(data.get("schema", "")).startswith("regress-bench/")


def _bench(data: dict[str, Any], path: Path) -> list[BenchModel]:
    """The models of a bench file, with the identities and times the report shows checked."""
    try:
        models = bench_models(data)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise BadInput(f"{path}: malformed bench file ({type(exc).__name__}: {exc})") from exc
    for m in models:
        _check(
            is_sha256(m.sha256, empty=True),
            path,
            "a model's sha256 is not 64 lowercase hex characters",
            "bench file",
        )
        _check(_is_time(m.created), path, "created is not an ISO-8601 time", "bench file")
        _check(
            isinstance(m.model, str) and isinstance(m.quantization, str),
            path,
            "a model's ref or quantization is not text",
            "bench file",
        )
    return models


def _comparison(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """A gate JSON report, checked for every field the page and its charts read."""
    for name in ("candidate", "baseline"):
        side = data.get(name)
        if not isinstance(side, dict):
            raise BadInput(f"{path}: malformed gate JSON report (no {name} object)")
        for key in ("run", "model", "created"):
            _check(isinstance(side.get(key), str), path, f"{key} is not text")
        _check(
            is_sha256(side.get("sha256"), empty=True),
            path,
            "sha256 is not 64 lowercase hex characters",
        )
    _check(isinstance(data["verdict"], str), path, "verdict is not text")
    units = data["units"]
    ok = isinstance(units, list) and all(isinstance(u, dict) for u in units)
    _check(ok, path, "units is not a list of objects")
    for u in units:
        for key in ("name", "verdict", "reason"):
            _check(isinstance(u.get(key), str), path, f"a unit's {key} is not text")
        _check(
            u.get("delta") is None or _is_number(u["delta"]), path, "a unit's delta is not a number"
        )
        ci = u.get("ci")
        _check(
            not ci or (isinstance(ci, list) and len(ci) == 2 and all(map(_is_number, ci))),
            path,
            "a unit's ci is not two numbers",
        )
        if u.get("delta") is not None and ci:
            _check(_is_number(u.get("threshold")), path, "a unit's threshold is not a number")
        _check(isinstance(u.get("gated", True), bool), path, "a unit's gated is not true or false")
        _check(isinstance(u.get("kind", ""), str), path, "a unit's kind is not text")
    _check(isinstance(data.get("suite", ""), str), path, "suite is not text")
    _entries(data, path, "golden", ("task",), "failed", optional=("reason",))
    _entries(data, path, "failures", ("unit", "failure"), "regressed")
    return data


def _entries(
    data: dict[str, Any],
    path: Path,
    key: str,
    texts: tuple[str, ...],
    flag: str,
    optional: tuple[str, ...] = (),
) -> None:
    """A gate report's optional list of golden sets or failure classes, as the verdict card
    reads it: objects with these text fields and a true/false `flag`."""
    entries = data.get(key, [])
    ok = isinstance(entries, list) and all(isinstance(e, dict) for e in entries)
    _check(ok, path, f"{key} is not a list of objects")
    for entry in entries:
        for name in texts:
            _check(isinstance(entry.get(name), str), path, f"a {key} entry's {name} is not text")
        for name in optional:
            _check(
                isinstance(entry.get(name, ""), str), path, f"a {key} entry's {name} is not text"
            )
        _check(isinstance(entry.get(flag), bool), path, f"a {key} entry's {flag} is not a bool")


def _check(ok: bool, path: Path, what: str, kind: str = "gate JSON report") -> None:
    if not ok:
        raise BadInput(f"{path}: malformed {kind} ({what})")


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_time(value: object) -> bool:
    """An ISO-8601 time, as the history chart reads it."""
    try:
        dt.datetime.fromisoformat(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return True
