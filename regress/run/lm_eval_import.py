"""Read an lm-evaluation-harness run (`--log_samples` output) as a regress `Run`.

Teams that already run lm-eval get the paired test on their own files: the run becomes a
baseline (`regress baseline import-lm-eval`) or a candidate (`regress check
--candidate-samples`). lm-eval 0.4 writes `<output_path>/<model_name_sanitized>/
results_<date>.json` and, beside it, one `samples_<task>_<date>.jsonl` per task with the same
date; either that folder or `<output_path>` itself is accepted. Multiple-choice tasks are read
with their per-choice log-likelihoods; generation tasks (GSM8K) with their first filter's
answer and metric, paired with other lm-eval runs only (their prompt hash is lm-eval's
logged request, not regress's).

Identity. Each record gets the hashes regress computes for its own runs, so examples pair
across the two tools exactly when they are the same document under the same prompt:
- prompt_hash is the digest of the `LoglikelihoodRequest(arg_0, arg_1)` of each choice, the
  hash regress gives the identical request;
- doc_hash is `doc_hash` of lm-eval's `doc` restricted to the fields regress's loader gives a
  document of that task family (`_DOC_FIELDS`). The fields have the same names and values in
  both tools (both follow the Hub's rows); the restriction drops what only lm-eval keeps,
  such as HellaSwag's raw columns beside the processed query, choices and gold. A document
  with other content (another dataset version or split) hashes differently, and the gate
  refuses to pair it as it refuses any regress run over other documents. Matching lm-eval's
  documents to regress's own files by doc_id and prompt was the alternative; it needs the
  data at import time and would take regress's document wherever the prompts agree, hiding
  exactly the difference the gate is meant to report. Tasks regress does not know keep the
  hash of lm-eval's whole `doc`: they pair with other lm-eval runs, never with regress's.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from regress import __version__
from regress.backends import parse_model_args
from regress.backends.models import model_info
from regress.core import jsonl, safe_json
from regress.core.errors import BadInput
from regress.core.fingerprint import Cpu, HardwarePath, RuntimeFingerprint
from regress.core.hashes import digest, task_hashes
from regress.core.manifest import Manifest, ModelInfo, Run, TaskInfo
from regress.core.records import Record
from regress.core.requests import LoglikelihoodRequest, request_hash
from regress.tasks import get_tasks, list_tasks
from regress.tasks.base import doc_hash
from regress.tasks.multiple_choice import ChoiceScores, argmax_choices

# The fields of a document as regress's loader shapes it, per task family (task name prefix).
_DOC_FIELDS: dict[str, tuple[str, ...]] = {
    "arc_": ("id", "question", "choices", "answerKey"),
    "mmlu_": ("question", "subject", "choices", "answer"),
    "piqa": ("goal", "sol1", "sol2", "label"),
    "boolq": ("question", "passage", "idx", "label"),
    "hellaswag": ("query", "choices", "gold"),
    "truthfulqa_mc": ("question", "mc1_targets", "mc2_targets"),
    "builtin_": ("id", "question", "choices", "answer"),
    "gsm8k": ("question", "answer"),
}
_MULTIPLE_CHOICE = "multiple_choice"
_GENERATE = "generate_until"


@dataclass(frozen=True)
class LmEvalFiles:
    """One lm-eval run on disk: its results file and its samples file per task."""

    results: Path
    samples: dict[str, Path]


def find_lm_eval_files(samples_dir: Path) -> LmEvalFiles:
    """The newest run in `samples_dir` (a model folder) or in its one model subfolder."""
    samples_dir = Path(samples_dir)
    if not samples_dir.is_dir():
        raise BadInput(f"{samples_dir}: not a folder (expected lm-eval's --output_path)")
    found = sorted(samples_dir.glob("results_*.json")) or sorted(
        samples_dir.glob("*/results_*.json")
    )
    if not found:
        raise BadInput(
            f"{samples_dir}: no lm-eval results_*.json here or in a model subfolder "
            "(run lm-eval with --output_path DIR --log_samples)"
        )
    folders = sorted({p.parent.name for p in found})
    if len(folders) > 1:
        raise BadInput(
            f"{samples_dir} holds runs of several models ({', '.join(folders)}): "
            "pass the folder of one"
        )
    # lm-eval's ISO date stamps sort in time order as text.
    results = max(found, key=lambda p: p.name)
    stamp = results.name.removeprefix("results_").removesuffix(".json")
    suffix = f"_{stamp}.jsonl"
    samples = {
        p.name.removeprefix("samples_").removesuffix(suffix): p
        for p in results.parent.glob(f"samples_*{suffix}")
    }
    if not samples:
        raise BadInput(
            f"{results}: no samples_<task>{suffix} beside it (run lm-eval with --log_samples)"
        )
    return LmEvalFiles(results=results, samples=dict(sorted(samples.items())))


def read_lm_eval_run(samples_dir: Path, name: str, tasks: Collection[str] | None = None) -> Run:
    """The newest lm-eval run in `samples_dir` as a regress Run named `name`.

    `tasks` keeps only those tasks (default: every task with a samples file). A malformed
    file is a BadInput naming the file and line.
    """
    files = find_lm_eval_files(samples_dir)
    results = _read_json(files.results)
    chosen = dict(files.samples)
    if tasks is not None:
        unknown = sorted(set(tasks) - set(chosen))
        if unknown:
            raise BadInput(
                f"{files.results.parent}: no samples for {', '.join(unknown)} "
                f"(the run has: {', '.join(chosen)})"
            )
        chosen = {t: p for t, p in chosen.items() if t in tasks}
    records, infos = {}, {}
    for task, path in chosen.items():
        records[task], infos[task] = _read_task(task, path, results)
    manifest = _manifest(name, files.results, results, infos)
    return Run(manifest=manifest, records=records)


def _manifest(
    name: str, path: Path, results: dict[str, Any], tasks: dict[str, TaskInfo]
) -> Manifest:
    """Model, backend and environment as lm-eval's results file records them."""
    config = results.get("config") or {}
    model_args = _model_args(config.get("model_args"), path)
    lm_eval_version = str(results.get("lm_eval_version") or "")
    env = _environment_dump(results.get("pretty_env_info"))
    libraries = {
        "torch": env.torch,
        "transformers": str(results.get("transformers_version") or ""),
    }
    return Manifest(
        name=name,
        created=_created(results.get("date")),
        regress_version=__version__,
        model=_model(model_args, results),
        backend=RuntimeFingerprint(
            name=f"lm-eval:{config.get('model', 'unknown')}",
            version=lm_eval_version,
            params=run_params(config, model_args),
            libraries={k: v for k, v in libraries.items() if v},
            # lm-eval's files do not say which kernels computed them, only on what.
            hardware=HardwarePath(kernels="unknown", cpu=Cpu(name=env.cpu)),
        ),
        suite_name="lm-eval",
        tasks=tasks,
        environment={
            "source": "lm-eval",
            "results_file": str(path),
            "lm_eval_version": lm_eval_version,
            "libraries": libraries,
            "gpu": env.gpu,
            "model_source": str(results.get("model_source") or ""),
            EVAL_SETTINGS: eval_settings(results),
        },
        command=f"lm-eval --model {config.get('model', '?')} --model_args "
        + ",".join(f"{k}={v}" for k, v in model_args.items()),
    )


EVAL_SETTINGS = "eval_settings"
"""The `environment` key of an imported run's manifest holding what its harness applied to
every prompt (regress.checks refuses two runs that differ in it)."""


def run_params(config: dict[str, Any], model_args: dict[str, Any]) -> dict[str, Any]:
    """The fingerprint's params: lm-eval's `model_args` as given (pretrained, revision, dtype,
    tensor/data-parallel size, ...), then what lm-eval resolved: revision and dtype when the
    arguments left them to the default, batch size and device."""
    params = dict(model_args)
    resolved = {"revision": config.get("model_revision"), "dtype": config.get("model_dtype")}
    for key, value in resolved.items():
        if key not in params and value not in (None, ""):
            params[key] = str(value).removeprefix("torch.")
    for key in ("batch_size", "device"):
        if config.get(key) not in (None, ""):
            params[key] = config[key]
    return params


def eval_settings(results: dict[str, Any]) -> dict[str, Any]:
    """What an lm-eval run applied to every prompt or generation, beyond its tasks' configs:
    the chat template and system instruction (by sha256), few-shot as turns, and the
    command line's generation kwargs. Two runs that differ here did not ask the same thing."""
    config = results.get("config") or {}
    return {
        "chat_template_sha": results.get("chat_template_sha"),
        "system_instruction_sha": results.get("system_instruction_sha"),
        "fewshot_as_multiturn": results.get("fewshot_as_multiturn"),
        "gen_kwargs": config.get("gen_kwargs") or {},
    }


@dataclass(frozen=True)
class _EnvDump:
    """What lm-eval's `pretty_env_info` (torch's collect_env output) says about the machine."""

    torch: str = ""
    cpu: str = ""
    gpu: str = ""


def _environment_dump(text: Any) -> _EnvDump:
    if not isinstance(text, str):
        return _EnvDump()
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() not in fields:
            fields[key.strip()] = value.strip()
    gpu = fields.get("GPU models and configuration", "")
    return _EnvDump(
        torch=fields.get("PyTorch version", ""),
        cpu=fields.get("Model name", ""),
        # torch says "Could not collect" on a machine without a GPU.
        gpu="" if gpu in ("Could not collect", "N/A") else gpu,
    )


def canonical_doc(task: str, doc: dict[str, Any]) -> dict[str, Any]:
    """lm-eval's `doc` as regress shapes that task's documents (whole when regress has no shape)."""
    for prefix, fields in _DOC_FIELDS.items():
        if task.startswith(prefix):
            return {k: doc[k] for k in fields if k in doc}
    return doc


@dataclass(frozen=True)
class _Sample:
    """The fields of one samples line the records need, typed."""

    where: str
    """file:line, for error messages."""
    doc_id: int
    doc: dict[str, Any]
    target: Any
    requests: list[LoglikelihoodRequest]
    loglik: list[float]
    is_greedy: list[bool]
    metrics: dict[str, float]


@dataclass(frozen=True)
class _TaskSettings:
    """What the results file and regress's own task say about how to read one task."""

    group: str | None
    metric: str
    """Primary metric: regress's for tasks it knows, else acc (or acc_norm) as lm-eval logged."""
    binary: bool
    """Whether the metric is 0/1 per example (not truthfulqa_mc2's probability mass)."""
    delimiter: str
    num_fewshot: int
    original: int | None
    """Documents in the evaluated split (lm-eval's n-samples original)."""
    higher_is_better: bool


def _read_task(task: str, path: Path, results: dict[str, Any]) -> tuple[list[Record], TaskInfo]:
    config = (results.get("configs") or {}).get(task, {})
    output_type = config.get("output_type", _MULTIPLE_CHOICE)
    if output_type == _GENERATE:
        return _read_generation_task(task, path, config, results)
    if output_type != _MULTIPLE_CHOICE:
        raise BadInput(
            f"{path}: task {task} is {output_type}; only multiple_choice and generate_until "
            "tasks can be imported (leave it out with --tasks)"
        )
    samples = _read_samples(path)
    settings = _settings(task, config, results, samples)
    records: dict[int, Record] = {}
    for sample in samples:
        if sample.doc_id in records:
            raise BadInput(f"{sample.where}: doc_id {sample.doc_id} appears twice")
        records[sample.doc_id] = _record(task, sample, settings)
    return _ordered(task, records, settings, "loglikelihood")


def _ordered(
    task: str, records: dict[int, Record], settings: _TaskSettings, output_type: str
) -> tuple[list[Record], TaskInfo]:
    """The task's records in doc_id order and its TaskInfo."""
    ordered = [records[doc_id] for doc_id in sorted(records)]
    last = ordered[-1].doc_id + 1
    dataset_hash, prompt_hash = task_hashes(ordered)
    info = TaskInfo(
        name=task,
        group=settings.group,
        n=len(ordered),
        num_fewshot=settings.num_fewshot,
        metric=settings.metric,
        output_type=output_type,
        dataset_hash=dataset_hash,
        prompt_hash=prompt_hash,
        # Rerunning the first `last` documents covers every doc_id the run holds.
        limit=last if settings.original is not None and last < settings.original else None,
        higher_is_better=settings.higher_is_better,
    )
    return ordered, info


@dataclass(frozen=True)
class _Generation:
    """One samples line of a generation task under one filter, typed."""

    where: str
    doc_id: int
    doc: dict[str, Any]
    target: Any
    arguments: Any
    """The request as lm-eval logged it: context and generation kwargs."""
    answer: Any
    """The filtered response the metric scored (GSM8K's extracted number)."""
    filter: str
    metrics: dict[str, float]


def _read_generation_task(
    task: str, path: Path, config: dict[str, Any], results: dict[str, Any]
) -> tuple[list[Record], TaskInfo]:
    """A generate_until task: lm-eval logs one line per document and filter; the task's
    first filter (GSM8K's strict-match) is the one gated, the others' metrics are kept as
    `metric,filter`. Its prompt hash covers lm-eval's logged request (context and
    generation kwargs), so it pairs with lm-eval runs, not with regress's own."""
    lines = [_parse_generation(line) for line in _lines(path)]
    filters = list(dict.fromkeys(line.filter for line in lines))
    named = [f.get("name") for f in config.get("filter_list") or [] if isinstance(f, dict)]
    primary = next((f for f in named if f in filters), filters[0])
    chosen = [line for line in lines if line.filter == primary]
    settings = _settings(task, config, results, chosen)
    others: dict[int, dict[str, float]] = {}
    for line in lines:
        if line.filter != primary:
            extra = {f"{k},{line.filter}": v for k, v in line.metrics.items()}
            others.setdefault(line.doc_id, {}).update(extra)
    records: dict[int, Record] = {}
    for line in chosen:
        if line.doc_id in records:
            raise BadInput(f"{line.where}: doc_id {line.doc_id} appears twice")
        if settings.metric not in line.metrics:
            raise BadInput(f"{line.where}: no {settings.metric} metric in the sample")
        value = line.metrics[settings.metric]
        records[line.doc_id] = Record(
            task=task,
            doc_id=line.doc_id,
            doc_hash=doc_hash(canonical_doc(task, line.doc)),
            prompt_hash=digest([json.dumps(line.arguments, sort_keys=True, ensure_ascii=False)]),
            target=line.target,
            pred=line.answer,
            correct=int(value) if settings.binary else None,
            metrics={**line.metrics, **others.get(line.doc_id, {})},
        )
    return _ordered(task, records, settings, _GENERATE)


def _lines(path: Path) -> list[jsonl.Line]:
    """The file's non-blank lines (each names its file:line for error messages)."""
    found = jsonl.read_lines(path)
    if not found:
        raise BadInput(f"{path}: no samples")
    return found


def _parse_generation(raw: jsonl.Line) -> _Generation:
    where = raw.where
    line = jsonl.json_object(raw)
    try:
        doc_id, doc, answers = line["doc_id"], line["doc"], line["filtered_resps"]
        if not isinstance(doc_id, int) or not isinstance(doc, dict):
            raise TypeError("doc_id must be an integer and doc an object")
        return _Generation(
            where=where,
            doc_id=doc_id,
            doc=doc,
            target=line.get("target"),
            arguments=line["arguments"],
            answer=answers[0] if isinstance(answers, list) and answers else answers,
            filter=str(line["filter"]),
            metrics=_numeric_metrics(line),
        )
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise BadInput(f"{where}: not an lm-eval generation sample ({exc!r})") from exc


def _settings(
    task: str,
    config: dict[str, Any],
    results: dict[str, Any],
    samples: Sequence[_Sample | _Generation],
) -> _TaskSettings:
    if task in list_tasks():
        ours = get_tasks([task])[0]
        group, metric = ours.group, ours.primary_metric
        binary = ours.binary
    else:
        group = _group_of(task, results)
        metric = _unknown_task_metric(samples[0])
        binary = {s.metrics.get(metric) for s in samples} <= {0.0, 1.0}
    original = (results.get("n-samples") or {}).get(task, {}).get("original")
    return _TaskSettings(
        group=group,
        metric=metric,
        binary=binary,
        delimiter=str(config.get("target_delimiter", " ")),
        num_fewshot=int((results.get("n-shot") or {}).get(task) or 0),
        original=original if isinstance(original, int) else None,
        higher_is_better=bool(
            (results.get("higher_is_better") or {}).get(task, {}).get(metric, True)
        ),
    )


def _read_samples(path: Path) -> list[_Sample]:
    return [_parse(line) for line in _lines(path)]


def _parse(raw: jsonl.Line) -> _Sample:
    """One samples line, checked for the shape lm-eval writes for multiple choice."""
    where = raw.where
    line = jsonl.json_object(raw)
    try:
        doc_id, doc, arguments = line["doc_id"], line["doc"], line["arguments"]
        if not isinstance(doc_id, int) or not isinstance(doc, dict):
            raise TypeError("doc_id must be an integer and doc an object")
        ordered = sorted(arguments.items(), key=lambda item: _arg_index(item[0]))
        requests = [_request(args) for _, args in ordered]
        # resps: one list per request, holding one [loglik, is_greedy] per repeat.
        pairs = [resp[0] for resp in line["resps"]]
        sample = _Sample(
            where=where,
            doc_id=doc_id,
            doc=doc,
            target=line.get("target"),
            requests=requests,
            loglik=[float(pair[0]) for pair in pairs],
            is_greedy=[_bool(pair[1]) for pair in pairs],
            metrics=_numeric_metrics(line),
        )
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        raise BadInput(f"{where}: not an lm-eval multiple-choice sample ({exc!r})") from exc
    if not requests or len(requests) != len(sample.loglik):
        raise BadInput(f"{where}: {len(requests)} requests but {len(sample.loglik)} responses")
    return sample


def _numeric_metrics(line: dict[str, Any]) -> dict[str, float]:
    """The per-example metrics that are numbers (f1 and mcc log (pred, gold) pairs instead)."""
    values = {name: line[name] for name in line["metrics"]}
    return {
        name: float(value)
        for name, value in values.items()
        if isinstance(value, int | float) and not isinstance(value, bool)
    }


def _request(args: dict[str, Any]) -> LoglikelihoodRequest:
    context, continuation = args["arg_0"], args["arg_1"]
    if not isinstance(context, str) or not isinstance(continuation, str):
        raise TypeError("arguments are not (context, continuation) strings")
    return LoglikelihoodRequest(context, continuation)


def _record(task: str, sample: _Sample, settings: _TaskSettings) -> Record:
    choices = [_strip(r.continuation, settings.delimiter) for r in sample.requests]
    scores = ChoiceScores(sample.loglik, sample.is_greedy, [len(c) for c in choices])
    pred, pred_norm = argmax_choices(scores)
    if settings.metric not in sample.metrics:
        raise BadInput(f"{sample.where}: no {settings.metric} metric in the sample")
    value = sample.metrics[settings.metric]
    return Record(
        task=task,
        doc_id=sample.doc_id,
        doc_hash=doc_hash(canonical_doc(task, sample.doc)),
        prompt_hash=digest([request_hash(r) for r in sample.requests]),
        target=_target(sample.target, choices),
        # As regress's own scorers do: the prediction the primary metric judges.
        pred=pred_norm if settings.metric == "acc_norm" else pred,
        correct=int(value) if settings.binary else None,
        metrics=sample.metrics,
        scores=scores.as_dict(),
    )


def lm_eval_selection(run: Run) -> dict[str, list[int]]:
    """lm-eval's `--samples` mapping for `run`: task -> the doc ids it holds, so lm-eval
    evaluates exactly a baseline's (or a proxy's) examples and only those. lm-eval 0.4.13
    takes it as JSON text or a file (`--samples FILE`; not with `--limit`).

    BadInput for a task only regress can run (a prompt format or an instruction of the
    user's, `TASK@...`): lm-eval would find no task of that name."""
    regress_only = sorted(name for name in run.records if "@" in name)
    if regress_only:
        raise BadInput(
            f"{', '.join(regress_only[:3])}: prompt variants only regress runs; lm-eval has no "
            "such task"
        )
    records = sorted(run.records.items())
    return {task: sorted(r.doc_id for r in found) for task, found in records}


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = safe_json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise BadInput(f"{path}:{exc.lineno}: not valid JSON ({exc.msg})") from exc
    if not isinstance(data, dict):
        raise BadInput(f"{path}: expected a JSON object (lm-eval's results file)")
    for key in ("config", "configs", "n-shot", "n-samples", "higher_is_better", "group_subtasks"):
        if not isinstance(data.get(key) or {}, dict):
            raise BadInput(f"{path}: `{key}` is not an object")
    return data


def _arg_index(key: str) -> int:
    # "gen_args_10" must follow "gen_args_9": order by number, not text.
    return int(key.rsplit("_", 1)[1])


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if value in ("True", "False"):
        return str(value) == "True"
    raise ValueError(f"is_greedy {value!r} is not True or False")


def _strip(continuation: str, delimiter: str) -> str:
    """The choice text lm-eval's acc_norm measures: the continuation without the delimiter."""
    return continuation[len(delimiter) :] if continuation.startswith(delimiter) else continuation


def _target(target: Any, choices: list[str]) -> Any:
    """lm-eval logs the gold choice's index as text ("2"), sometimes the choice itself."""
    if isinstance(target, int):
        return target
    if isinstance(target, str) and target.strip().isdigit():
        return int(target)
    if target in choices:
        return choices.index(target)
    return target


def _unknown_task_metric(sample: _Sample | _Generation) -> str:
    for name in ("acc", "acc_norm", "exact_match"):
        if name in sample.metrics:
            return name
    known = ", ".join(sample.metrics) or "none"
    raise BadInput(
        f"{sample.where}: no acc, acc_norm or exact_match metric to gate on (has: {known})"
    )


def _group_of(task: str, results: dict[str, Any]) -> str | None:
    for group, members in (results.get("group_subtasks") or {}).items():
        if task in members:
            return str(group)
    return None


def _model_args(value: Any, where: Path) -> dict[str, Any]:
    """lm-eval keeps model_args as the `k=v,...` text given, or as a dict."""
    if isinstance(value, dict):
        return dict(value)
    if value is None or isinstance(value, str):
        return parse_model_args(value)
    raise BadInput(f"{where}: config.model_args is neither text nor an object")


def _model(args: dict[str, Any], results: dict[str, Any]) -> ModelInfo:
    """The model file when it exists here (sha256 and header), else just its name."""
    pretrained = str(args.get("pretrained") or args.get("model") or results.get("model_name", ""))
    ref = f"{pretrained}/{args['gguf_file']}" if args.get("gguf_file") else pretrained
    path = Path(ref).expanduser()
    if ref and path.exists():
        try:
            return model_info(str(path))
        except BadInput:
            pass  # a folder without weights here: identify the model by name only
    return ModelInfo(ref=ref, sha256="")


def _created(date: Any) -> str:
    """lm-eval's `date` (a Unix time) as regress's UTC timestamp; now when absent."""
    when = datetime.fromtimestamp(date, UTC) if isinstance(date, int | float) else datetime.now(UTC)
    return when.isoformat(timespec="seconds")


__all__ = [
    "EVAL_SETTINGS",
    "LmEvalFiles",
    "canonical_doc",
    "find_lm_eval_files",
    "lm_eval_selection",
    "eval_settings",
    "read_lm_eval_run",
    "run_params",
]
