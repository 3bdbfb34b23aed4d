"""Small typed views of finished results: a stored run's accuracy by task (with Wilson
intervals) and the models of a `regress bench` JSON file. Read by `regress report` and
`regress compare`."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

from regress.core.manifest import Run
from regress.stats import wilson_interval


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


def accuracy_run(run: Run) -> AccuracyRun:
    """Per-task accuracy of the examples with a 0/1 outcome (failures count as wrong)."""
    tasks, right, total = [], 0, 0
    for name in sorted(run.records):
        outcomes = [int(r.right) for r in run.records[name] if r.correct is not None or not r.ok]
        if not outcomes:
            continue  # perplexity: no accuracy
        k, n = sum(outcomes), len(outcomes)
        low, high = wilson_interval(k, n)
        tasks.append(TaskAccuracy(name, n, k / n, float(low), float(high)))
        right, total = right + k, total + n
    m = run.manifest
    low, high = wilson_interval(right, total) if total else (0, 1)
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
