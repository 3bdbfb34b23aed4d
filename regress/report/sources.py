"""What `regress report` reads, as small typed views: stored accuracy runs, the gate's JSON
comparisons and `regress bench` JSON files, told apart by their content."""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from statsmodels.stats.proportion import proportion_confint

from regress.errors import BadInput
from regress.manifest import Run
from regress.store import is_run_folder, read_run


@dataclass(frozen=True)
class TaskAccuracy:
    """One task of an accuracy run: accuracy with its 95% Wilson interval."""

    task: str
    n: int
    accuracy: float
    low: float
    high: float


@dataclass(frozen=True)
class AccuracyRun:
    """A stored run (baseline, candidate or `--save-run` folder) summarised by task."""

    name: str
    model: str
    sha256: str
    quantization: str
    created: str
    tasks: tuple[TaskAccuracy, ...]
    accuracy: float
    """Over all scored examples of the run (micro average)."""
    low: float
    high: float
    """95% Wilson interval of `accuracy`."""
    run: Run


@dataclass(frozen=True)
class BenchModel:
    """One model of a `regress bench` JSON file."""

    model: str
    sha256: str
    quantization: str
    created: str
    rates: dict[str, float]
    """llama-bench test -> mean tokens/s."""
    ttft_ms: tuple[float, ...]
    tpot_ms: tuple[float, ...]
    e2el_ms: tuple[float, ...]
    e2el_p50: float | None
    peak_rss_bytes: int
    cpu_percent: float
    timeline: tuple[tuple[float, int, float], ...]
    """(seconds, RSS bytes, CPU %) samples."""

    def rate(self, kind: str) -> float:
        """The best mean tokens/s of the `pp` or `tg` tests (NaN without one)."""
        rates = [v for k, v in self.rates.items() if k.startswith(kind) and "+" not in k]
        return max(rates, default=math.nan)

    @property
    def ttft_p50(self) -> float:
        """Median time to first token, ms (NaN without requests)."""
        return statistics.median(self.ttft_ms) if self.ttft_ms else math.nan


@dataclass(frozen=True)
class Inputs:
    """Everything given to one report."""

    accuracy: tuple[AccuracyRun, ...]
    comparisons: tuple[dict[str, Any], ...]
    """The gate's JSON reports (`regress check --report-json`), as written."""
    bench: tuple[BenchModel, ...]


def accuracy_run(run: Run) -> AccuracyRun:
    """Per-task accuracy of the examples with a 0/1 outcome (failures count as wrong)."""
    tasks, right, total = [], 0, 0
    for name in sorted(run.records):
        outcomes = [r.correct or 0 for r in run.records[name] if r.correct is not None or not r.ok]
        if not outcomes:
            continue  # perplexity: no accuracy
        k, n = sum(outcomes), len(outcomes)
        low, high = proportion_confint(k, n, alpha=0.05, method="wilson")
        tasks.append(TaskAccuracy(name, n, k / n, float(low), float(high)))
        right, total = right + k, total + n
    m = run.manifest
    low, high = proportion_confint(right, total, alpha=0.05, method="wilson") if total else (0, 1)
    return AccuracyRun(
        name=m.name,
        model=m.model.ref,
        sha256=m.model.sha256,
        quantization=m.model.quantization,
        created=m.created,
        tasks=tuple(tasks),
        accuracy=right / total if total else math.nan,
        low=float(low),
        high=float(high),
        run=run,
    )


def bench_models(data: dict[str, Any]) -> list[BenchModel]:
    """The models of one bench JSON (`regress bench -o FILE.json`)."""
    models = []
    for r in data["results"]:
        latency = r.get("latency") or {"requests": [], "e2el": {}}
        requests = latency["requests"]
        resources = r["resources"]
        models.append(
            BenchModel(
                model=r["model"]["ref"],
                sha256=r["model"]["sha256"],
                quantization=r["model"].get("quantization", ""),
                created=data["created"],
                rates={m["test"]: m["mean_ts"] for m in r["micro"]},
                ttft_ms=tuple(q["ttft_ms"] for q in requests),
                tpot_ms=tuple(q["tpot_ms"] for q in requests if q["output_tokens"] > 1),
                e2el_ms=tuple(q["e2el_ms"] for q in requests),
                e2el_p50=latency["e2el"].get("p50"),
                peak_rss_bytes=resources["peak_rss_bytes"],
                cpu_percent=resources["cpu_percent_mean"],
                timeline=tuple(
                    (s["t"], s["rss_bytes"], s["cpu_percent"]) for s in resources["timeline"]
                ),
            )
        )
    return models


def load_inputs(paths: list[Path]) -> Inputs:
    """Sort each path into its kind: a run folder, a bench JSON or a gate JSON."""
    accuracy, comparisons, bench = [], [], []
    for path in paths:
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
    if not (accuracy or comparisons or bench):
        raise BadInput("report: nothing to show (give run folders or JSON files)")
    return Inputs(tuple(accuracy), tuple(comparisons), tuple(bench))
