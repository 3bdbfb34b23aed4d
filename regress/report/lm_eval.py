"""lm-evaluation-harness compatible output: `results_<date>.json` and `samples_<task>_<date>.jsonl`.

Field names and shapes follow lm-eval 0.4 so tools that read its output read ours; each
sample line also carries the regress record fields.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from regress.core.errors import BadInput
from regress.core.requests import (
    AnyResult,
    FailedResult,
    GenerateRequest,
    GenerateResult,
    LoglikelihoodRequest,
    LoglikelihoodResult,
    Request,
    RollingLoglikelihoodRequest,
    RollingResult,
)
from regress.run.engine import TaskRun


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _metric_keys(metrics: dict[str, float]) -> dict[str, float]:
    """`acc` -> `acc,none`: lm-eval suffixes every metric with its filter name."""
    return {f"{k},none": v for k, v in metrics.items()}


def group_metrics(runs: Sequence[TaskRun]) -> dict[str, float]:
    """Size-weighted mean of the members' per-example metrics, with pooled stderr."""
    values: dict[str, list[float]] = {}
    for run in runs:
        for scored in run.scored:
            if scored is None:
                continue
            for name, value in scored.metrics.items():
                values.setdefault(name, []).append(float(value))
    out: dict[str, float] = {}
    for name, vals in values.items():
        n = len(vals)
        mean = sum(vals) / n
        out[name] = mean
        if n > 1:
            var = sum((v - mean) ** 2 for v in vals) / (n - 1)
            out[f"{name}_stderr"] = math.sqrt(var / n)
    return out


def results_json(
    runs: Sequence[TaskRun], model_config: dict[str, Any], elapsed_s: float
) -> dict[str, Any]:
    """The `results_<date>.json` document for a set of task runs."""
    results: dict[str, Any] = {}
    groups: dict[str, list[TaskRun]] = {}
    for run in runs:
        results[run.task.name] = {"alias": run.task.name, **_metric_keys(run.metrics)}
        if run.task.group:
            groups.setdefault(run.task.group, []).append(run)
    group_results = {
        name: {"alias": name, **_metric_keys(group_metrics(members))}
        for name, members in groups.items()
    }
    return {
        "results": {**group_results, **results},
        "groups": group_results,
        "group_subtasks": {g: [r.task.name for r in m] for g, m in groups.items()},
        "configs": {r.task.name: r.task.config() for r in runs},
        "versions": {r.task.name: r.task.version for r in runs},
        "n-shot": {r.task.name: r.info.num_fewshot for r in runs},
        "higher_is_better": {r.task.name: dict(r.task.higher_is_better) for r in runs},
        "n-samples": {
            r.task.name: {
                "original": r.info.n,
                "effective": sum(1 for s in r.scored if s is not None),
            }
            for r in runs
        },
        "config": model_config,
        "date": datetime.now().timestamp(),
        "task_hashes": {r.task.name: r.info.dataset_hash for r in runs},
        "model_name": model_config.get("model", ""),
        "total_evaluation_time_seconds": f"{elapsed_s:.2f}",
    }


def _arguments(request: Request) -> dict[str, Any]:
    if isinstance(request, LoglikelihoodRequest):
        return {"arg_0": request.context, "arg_1": request.continuation}
    if isinstance(request, RollingLoglikelihoodRequest):
        return {"arg_0": request.text}
    assert isinstance(request, GenerateRequest)
    gen = {"until": list(request.until), "max_gen_toks": request.max_tokens}
    gen |= {"temperature": request.temperature, "top_p": request.top_p}
    return {"arg_0": request.context, "arg_1": gen}


def _resp(result: AnyResult) -> list[Any]:
    if isinstance(result, LoglikelihoodResult):
        return [str(result.logprob), str(result.is_greedy)]
    if isinstance(result, RollingResult):
        return [str(result.logprob)]
    if isinstance(result, GenerateResult):
        return [result.text]
    assert isinstance(result, FailedResult)
    return [f"{result.status}: {result.message}"]


def sample_lines(run: TaskRun) -> list[str]:
    """One lm-eval samples line per example, with the regress record merged in."""
    lines = []
    for example, results, record in zip(run.examples, run.results, run.records, strict=True):
        target = "" if example.target is None else str(example.target)
        resps = [[_resp(r)] for r in results]
        line: dict[str, Any] = {
            "doc_id": example.doc_id,
            "doc": example.doc,
            "target": target,
            "arguments": {f"gen_args_{i}": _arguments(q) for i, q in enumerate(example.requests)},
            "resps": resps,
            "filtered_resps": [r[0] for r in resps],
            "filter": "none",
            "metrics": sorted(record.metrics),
            "doc_hash": record.doc_hash,
            "prompt_hash": record.prompt_hash,
            "target_hash": _sha(target),
            **record.metrics,
            "record": json.loads(record.to_json()),
        }
        lines.append(json.dumps(line, ensure_ascii=False, default=str))
    return lines


def write_lm_eval(
    runs: Sequence[TaskRun],
    out_dir: Path,
    model_config: dict[str, Any],
    elapsed_s: float,
    log_samples: bool,
) -> list[Path]:
    """Write results (and samples) files into `out_dir`; return the paths written.

    An output folder that cannot be made or written (a file, no permission) is a BadInput.
    """
    stamp = datetime.now().strftime("%Y-%m-%dT%H-%M-%S.%f")
    doc = results_json(runs, model_config, elapsed_s)
    # Every file is rendered before the first is written, and a failed write removes what
    # it wrote: the folder gets all of a run's files or none of them.
    files = {out_dir / f"results_{stamp}.json": json.dumps(doc, indent=2, default=str) + "\n"}
    if log_samples:
        for run in runs:
            path = out_dir / f"samples_{run.task.name}_{stamp}.jsonl"
            files[path] = "".join(x + "\n" for x in sample_lines(run))
    written: list[Path] = []
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for path, text in files.items():
            written.append(path)
            path.write_text(text, encoding="utf-8")
    except OSError as exc:
        for path in written:
            path.unlink(missing_ok=True)
        raise BadInput(f"--output-path {out_dir}: cannot write results ({exc.strerror})") from exc
    return written


__all__ = ["group_metrics", "results_json", "sample_lines", "write_lm_eval"]
