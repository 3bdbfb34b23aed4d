"""lm-evaluation-harness compatible output: `results_<date>.json` and `samples_<task>_<date>.jsonl`.

Field names and shapes follow lm-eval 0.4.13 so tools that read its output read ours. Metric
keys are lm-eval's `metric,filter`: a task's filter pipelines (its `filter_list`, else
lm-eval's default `none`) name the filters, so GSM8K's `exact_match` is
`exact_match,strict-match` and its `exact_match_flexible` is `exact_match,flexible-extract`.
A samples file holds one line per document and filter, as lm-eval's does: `resps` per request
holds one response per repeat (a generation's text, or a log-likelihood's `[logprob,
is_greedy]` as strings), `filtered_resps` per request the filter's answer, and `doc_hash`,
`prompt_hash` and `target_hash` are lm-eval's hashes.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
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
from regress.run.generation import GenerationSettings, read_answer
from regress.tasks.base import Example, Task
from regress.tasks.filters import DEFAULT, Pipeline, pipelines
from regress.tasks.gsm8k import Gsm8kTask

_STDERR = "_stderr"
_MAX_GEN_TOKS = 256
"""lm-eval's max_gen_toks when a task's generation_kwargs leave it out."""


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def task_filters(task: Task) -> tuple[Pipeline, ...]:
    """The task's filter pipelines, lm-eval's `filter_list` (its default `none` without one)."""
    return pipelines(task.config().get("filter_list"), f"task {task.name}")


def _suffix(task: Task, filter_name: str) -> str:
    """The record-key suffix of a later filter's metrics (yaml_task's rule)."""
    # The built-in GSM8K names flexible-extract's metric `exact_match_flexible`.
    if isinstance(task, Gsm8kTask) and filter_name == "flexible-extract":
        return "_flexible"
    return "_" + re.sub(r"\W+", "_", filter_name)


def lm_eval_metric(task: Task, key: str, filters: Sequence[str] | None = None) -> tuple[str, str]:
    """regress's metric `key` (`_stderr` included) as lm-eval's (metric, filter).

    The task's scored metrics of a later filter carry its suffix; every other metric (the
    first filter's, and regress's own such as failure rates) belongs to the first filter.
    `filters` are the task's filter names when the caller has them.
    """
    names = list(filters) if filters is not None else [p.name for p in task_filters(task)]
    base = key.removesuffix(_STDERR)
    stderr = _STDERR if key.endswith(_STDERR) else ""
    if base in task.higher_is_better:
        for name in names[1:]:
            suffix = _suffix(task, name)
            if base.endswith(suffix) and base != suffix:
                return base.removesuffix(suffix) + stderr, name
    return key, names[0]


def _metric_keys(task: Task, metrics: dict[str, float]) -> dict[str, float]:
    """`acc` -> `acc,none`, GSM8K's `exact_match` -> `exact_match,strict-match`."""
    names = [p.name for p in task_filters(task)]
    return {",".join(lm_eval_metric(task, k, names)): v for k, v in metrics.items()}


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


def _effective(run: TaskRun) -> int:
    """The documents scored (lm-eval's effective n-samples)."""
    return sum(1 for s in run.scored if s is not None)


def _entry(name: str, sample_len: int) -> dict[str, Any]:
    """The fixed keys of a task's (or group's) entry in lm-eval's `results`."""
    return {"name": name, "alias": name, "sample_len": sample_len}


def results_json(
    runs: Sequence[TaskRun], model_config: dict[str, Any], elapsed_s: float
) -> dict[str, Any]:
    """The `results_<date>.json` document for a set of task runs."""
    results: dict[str, Any] = {}
    groups: dict[str, list[TaskRun]] = {}
    for run in runs:
        results[run.task.name] = {
            **_entry(run.task.name, _effective(run)),
            **_metric_keys(run.task, run.metrics),
        }
        if run.task.group:
            groups.setdefault(run.task.group, []).append(run)
    group_results = {
        name: {
            **_entry(name, sum(_effective(m) for m in members)),
            **_metric_keys(members[0].task, group_metrics(members)),
        }
        for name, members in groups.items()
    }
    return {
        "results": {**group_results, **results},
        "groups": group_results,
        "group_subtasks": {g: [r.task.name for r in m] for g, m in groups.items()},
        "configs": {r.task.name: r.task.config() for r in runs},
        "versions": {r.task.name: r.task.version for r in runs},
        "n-shot": {r.task.name: r.info.num_fewshot for r in runs},
        # lm-eval keys directions by metric alone: every filter's exact_match is one entry.
        "higher_is_better": {
            r.task.name: {
                lm_eval_metric(r.task, k)[0]: v for k, v in r.task.higher_is_better.items()
            }
            for r in runs
        },
        "n-samples": {
            r.task.name: {"original": r.info.n, "effective": _effective(r)} for r in runs
        },
        "config": model_config,
        "date": datetime.now().timestamp(),
        "task_hashes": {r.task.name: r.info.dataset_hash for r in runs},
        "model_name": model_config.get("model", ""),
        "total_evaluation_time_seconds": f"{elapsed_s:.2f}",
    }


def _arguments(request: Request) -> dict[str, Any]:
    """One request's `gen_args_i`: lm-eval's `Instance.args` as `arg_j` keys."""
    if isinstance(request, LoglikelihoodRequest):
        return {"arg_0": request.context, "arg_1": request.continuation}
    if isinstance(request, RollingLoglikelihoodRequest):
        return {"arg_0": request.text}
    # lm-eval's generation_kwargs as a task states them: its defaults (max_gen_toks) and the
    # sampling knobs left out where they do not act.
    gen: dict[str, Any] = {"until": list(request.until), "do_sample": not request.greedy}
    gen["temperature"] = request.temperature
    if request.max_tokens != _MAX_GEN_TOKS:
        gen["max_gen_toks"] = request.max_tokens
    if not request.greedy:
        knobs = {"top_p": (request.top_p, 1.0), "top_k": (request.top_k, 0)}
        knobs["min_p"] = (request.min_p, 0.0)
        gen |= {name: value for name, (value, off) in knobs.items() if value != off}
    # A conversation's turn: its messages as lm-eval logs a chat prompt (JSON of the turns).
    chat = [{"role": role, "content": text} for role, text in request.messages]
    prompt = json.dumps(chat, ensure_ascii=False) if chat else request.context
    return {"arg_0": prompt, "arg_1": gen}


def _resp(result: AnyResult) -> Any:
    """One response as lm-eval logs it: everything a string, a log-likelihood as a pair."""
    if isinstance(result, LoglikelihoodResult):
        return [str(result.logprob), str(result.is_greedy)]
    if isinstance(result, RollingResult):
        return str(result.logprob)
    if isinstance(result, GenerateResult):
        return result.text
    assert isinstance(result, FailedResult)
    return f"{result.status}: {result.message}"


def _target(task: Task, example: Example) -> str:
    """lm-eval's `target`: str(doc_to_target(doc))."""
    # lm-eval's gsm8k target is the worked answer; the built-in task keeps the number.
    if isinstance(task, Gsm8kTask):
        return str(example.doc["answer"])
    return "" if example.target is None else str(example.target)


def _filtered(
    example: Example,
    results: list[AnyResult],
    filters: Sequence[Pipeline],
    settings: GenerationSettings,
    where: str,
) -> list[tuple[str, list[Any]]]:
    """Per filter, its `filtered_resps`: each request's answer after the filter.

    A choice example has lm-eval's default filter, take_first. A generation that failed has
    no answer to filter: each filter keeps the failure as take_first would.
    """
    if not all(isinstance(q, GenerateRequest) for q in example.requests):
        return [(DEFAULT.name, [_resp(r) for r in results])]
    if not all(isinstance(r, GenerateResult) for r in results):
        return [(p.name, [_resp(results[0])]) for p in filters]
    # As the engine scored it: the first sample's generations, thinking split off.
    first = results[: len(example.requests)]
    answers = [
        read_answer(r.text, q.until, settings).answer  # type: ignore[union-attr]
        for r, q in zip(first, example.requests, strict=True)
    ]
    return [(p.name, [str(p.apply(answers, where))]) for p in filters]


def sample_lines(run: TaskRun) -> list[str]:
    """lm-eval samples lines: one per example and filter, filter by filter.

    The regress record stays out: lm-eval's schema (`SampleResult`) takes only float metric
    values beside its own fields. `--save-run` writes the records.
    """
    task = run.task
    # The manifest keeps generation settings only where they differ from the default.
    settings = GenerationSettings.from_dict(run.info.generation or {})
    filters = task_filters(task)
    # lm-eval writes a filter's lines for every document, then the next filter's.
    by_filter: dict[str, list[str]] = {}
    for example, results, record in zip(run.examples, run.results, run.records, strict=True):
        target = _target(task, example)
        if all(isinstance(q, GenerateRequest) for q in example.requests):
            # lm-eval sends a document's generation once and keeps every repeat in its resps.
            arguments = {"gen_args_0": _arguments(example.requests[0])}
            resps = [[_resp(r) for r in results]]
        else:
            arguments = {f"gen_args_{i}": _arguments(q) for i, q in enumerate(example.requests)}
            resps = [[_resp(r)] for r in results]
        rows = _filtered(example, results, filters, settings, f"task {task.name}")
        metrics: dict[str, dict[str, float]] = {}
        for key, value in record.metrics.items():
            # A choice example (a golden set mixes them in) has the one filter `none`.
            metric, filter_name = lm_eval_metric(task, key, [name for name, _ in rows])
            metrics.setdefault(filter_name, {})[metric] = value
        hashes = {
            # lm-eval's: its doc's indented JSON, the first request's context, str(target).
            "doc_hash": _sha(json.dumps(example.doc, indent=2, ensure_ascii=False, default=str)),
            "prompt_hash": _sha(_arguments(example.requests[0])["arg_0"]),
            "target_hash": _sha(target),
        }
        for filter_name, filtered in rows:
            values = metrics.get(filter_name, {})
            line: dict[str, Any] = {
                "doc_id": example.doc_id,
                "doc": example.doc,
                "target": target,
                "arguments": arguments,
                "resps": resps,
                "filtered_resps": filtered,
                "filter": filter_name,
                "metrics": list(values),
                **hashes,
                **values,
            }
            by_filter.setdefault(filter_name, []).append(
                json.dumps(line, ensure_ascii=False, default=str)
            )
    return [line for lines in by_filter.values() for line in lines]


def model_folder(output_path: Path, model: str) -> Path:
    """Where lm-eval 0.4 writes a model's files under --output_path: a folder named after the
    model, its characters that a path cannot hold (`/`, `:`, ...) turned into `__`
    (lm-eval's `sanitize_model_name`)."""
    return Path(output_path) / re.sub(r"[\"<>:/|\\?*\[\]]+", "__", model)


def header_line(
    backend: str,
    model_args: Mapping[str, Any],
    gen_kwargs: Mapping[str, Any],
    limit: int | float | None,
    num_fewshot: int | None,
    batch_size: int | str,
) -> str:
    """The line lm-eval prints above its results table: `hf (pretrained=...), gen_kwargs:
    (None), limit: 10.0, num_fewshot: None, batch_size: 1`."""
    args = ",".join(f"{k}={v}" for k, v in model_args.items())
    kwargs = ",".join(f"{k}={v}" for k, v in gen_kwargs.items()) or None
    # lm-eval reads --limit as a float, and prints it so.
    shown_limit = None if limit is None else float(limit)
    return (
        f"{backend} ({args}), gen_kwargs: ({kwargs}), limit: {shown_limit}, "
        f"num_fewshot: {num_fewshot}, batch_size: {batch_size}"
    )


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


__all__ = [
    "group_metrics",
    "header_line",
    "lm_eval_metric",
    "model_folder",
    "results_json",
    "sample_lines",
    "task_filters",
    "write_lm_eval",
]
