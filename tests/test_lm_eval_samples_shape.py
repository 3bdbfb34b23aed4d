"""regress's lm-eval samples and results files have lm-eval 0.4.13's shape, key by key.

The reference lines come from lm-eval's own code, without a model: lm-eval builds its gsm8k
and arc_easy tasks from its own YAML files (pointed at regress's documents, zero-shot), its
instances get the same canned responses regress's run gets, its filter ensembles and
`process_results` run on them, the line is built as `lm_eval.evaluator.evaluate` builds it
(quoted below) and written by lm-eval's `EvaluationTracker.save_results_samples`. regress's
lines for the same documents and responses must match them in keys, types, nesting and the
values the two tools share, and pass lm-eval's `SampleResult` schema.

tests/fixtures/lm_eval_samples_shape.json holds lm-eval's lines for one document of each kind
from a real run (strings cut short; only the shape is compared), written by
`experiments/lm_eval_samples_shape.py --write-fixture tests/fixtures/lm_eval_samples_shape.json`:
it checks that the quoted evaluator code still builds what lm-eval writes, and gives the
results file's metric keys.
"""

from __future__ import annotations

import importlib.resources
import json
import re
from pathlib import Path
from typing import Any

import pytest
from lm_eval.api.task import ConfigurableTask
from lm_eval.loggers.evaluation_tracker import EvaluationTracker
from lm_eval.result_schema import SampleResult
from lm_eval.tasks._yaml_loader import load_yaml
from lm_eval.utils import (
    get_file_datetime,
    get_file_task_name,
    get_results_filenames,
    get_sample_results_filenames,
    handle_non_serializable,
    hash_string,
)
from pydantic import TypeAdapter

from regress.core.requests import (
    GenerateResult,
    LoglikelihoodRequest,
    LoglikelihoodResult,
    Request,
)
from regress.report.lm_eval import results_json, sample_lines, write_lm_eval
from regress.run.engine import TaskRun, TaskSpec, evaluate, prepare
from regress.tasks import DataSource, get_tasks

UPSTREAM = Path(str(importlib.resources.files("lm_eval"))) / "tasks"
FIXTURE = Path(__file__).parent / "fixtures" / "lm_eval_samples_shape.json"
DOCS = 4
# kind -> (regress's task, lm-eval's YAML)
KINDS = {
    "generate_until": ("gsm8k", "gsm8k/gsm8k.yaml"),
    "multiple_choice": ("arc_easy", "arc/arc_easy.yaml"),
}
_GEN_ARGS = re.compile(r"^gen_args_\d+$")


def shape(value: Any) -> Any:
    """Keys, types and nesting without the values: a list becomes its distinct element
    shapes, and `gen_args_<i>` one `gen_args_N` (experiments/lm_eval_samples_shape.py uses it)."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.setdefault(_GEN_ARGS.sub("gen_args_N", key), shape(item))
        return out
    if isinstance(value, list):
        distinct: list[Any] = []
        for item in value:
            if (s := shape(item)) not in distinct:
                distinct.append(s)
        return distinct
    return type(value).__name__


def canned(request: Request, index: int) -> GenerateResult | LoglikelihoodResult:
    """A response: on GSM8K a strict-match hit, a flexible-extract-only hit (the second
    question's answer is 3), misses; on the choices, greedy and not."""
    if request.kind == "generate_until":
        texts = ["Half is 9 so 18 in all.\n#### 18", "It is 5, then 3", "I do not know", ""]
        return GenerateResult(texts[index % len(texts)], 7)
    return LoglikelihoodResult(-1.5 - (index % 5) * 0.25, index % 3 == 0, 2)


@pytest.fixture(scope="module")
def source(data_dir: Path) -> DataSource:
    return DataSource(data_dir=data_dir)


@pytest.fixture(scope="module")
def runs(source: DataSource) -> dict[str, TaskRun]:
    """regress's run of both tasks on canned responses, through the real engine."""
    specs = [TaskSpec(task, 0, DOCS) for task in get_tasks([k[0] for k in KINDS.values()])]
    prepared = prepare(specs, source)
    answers: dict[Request, GenerateResult | LoglikelihoodResult] = {}

    def respond(requests: list[Request], _progress: object) -> list[Any]:
        for request in requests:
            answers.setdefault(request, canned(request, len(answers)))
        return [answers[r] for r in requests]

    done = evaluate(specs, None, source, run=respond, prepared=prepared)  # type: ignore[arg-type]
    return {kind: run for kind, run in zip(KINDS, done, strict=True)}


def request_key(request: Request) -> Any:
    """What identifies a request in both tools: its prompt (and a choice's continuation)."""
    if isinstance(request, LoglikelihoodRequest):
        return (request.context, request.continuation)
    return request.context  # type: ignore[union-attr]


def lm_eval_lines(run: TaskRun, yaml: str, root: Path) -> list[dict[str, Any]]:
    """lm-eval's samples lines for the run's documents and responses, by lm-eval's code."""
    docs = root / f"{run.task.name}.jsonl"
    docs.write_text("".join(json.dumps(e.doc) + "\n" for e in run.examples))
    override = root / f"{run.task.name}.yaml"
    override.write_text(
        f"include: {UPSTREAM / yaml}\ntask: {run.task.name}\ntag: []\ndataset_path: json\n"
        "dataset_name: null\nnum_fewshot: 0\ntraining_split: null\nvalidation_split: null\n"
        f"fewshot_split: null\ntest_split: test\ndataset_kwargs:\n  data_files: {{test: {docs}}}\n"
    )
    task = ConfigurableTask(config=load_yaml(override))
    task.build_all_requests(limit=DOCS, rank=0, world_size=1)
    ours = {
        (example.doc_id, request_key(request)): result
        for example, results in zip(run.examples, run.results, strict=True)
        for request, result in zip(example.requests, results, strict=True)
    }
    for instance in task.instances:
        generates = instance.request_type == "generate_until"
        key = instance.arguments[0] if generates else instance.arguments
        result = ours[(instance.doc_id, key)]  # a KeyError: the tools' prompts differ
        instance.resps = [
            result.text if generates else (result.logprob, result.is_greedy)  # type: ignore[union-attr]
        ]
    task.apply_filters()
    by_doc: dict[int, list[Any]] = {}
    for instance in task.instances:
        by_doc.setdefault(instance.doc_id, []).append(instance)
    samples = []
    for filter_key in task.instances[0].filtered_resps:
        for doc_id, doc in task.doc_iterator(rank=0, limit=DOCS, world_size=1):
            requests = sorted(by_doc[doc_id], key=lambda x: x.idx)
            # lm_eval/evaluator.py 0.4.13, `evaluate`, where it logs samples:
            metrics = task.process_results(
                doc, [req.filtered_resps[filter_key] for req in requests]
            )
            target = task.doc_to_target(doc)
            example = {
                "doc_id": doc_id,
                "doc": doc,
                "target": target,
                "arguments": [req.args for req in requests],
                "resps": [req.resps for req in requests],
                "filtered_resps": [req.filtered_resps[filter_key] for req in requests],
                "filter": filter_key,
                "metrics": list(metrics.keys()),
                "doc_hash": hash_string(
                    json.dumps(
                        requests[0].doc,
                        indent=2,
                        default=handle_non_serializable,
                        ensure_ascii=False,
                    )
                ),
                "prompt_hash": hash_string(requests[0].arguments[0]),
                "target_hash": hash_string(str(target)),
            }
            example.update(metrics)
            samples.append(example)
    tracker = EvaluationTracker(output_path=str(root / "out" / "results.json"))
    tracker.date_id = "2026-01-01T00-00-00.000000"  # save_results_aggregated would set it
    tracker.save_results_samples(task.config.task, samples)
    [path] = (root / "out").glob(f"samples_{task.config.task}_*.jsonl")
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def references(
    runs: dict[str, TaskRun], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, list[dict[str, Any]]]:
    """lm-eval's lines for each kind, built by lm-eval's code from regress's responses."""
    return {
        kind: lm_eval_lines(runs[kind], yaml, tmp_path_factory.mktemp(kind))
        for kind, (_, yaml) in KINDS.items()
    }


def keyed(lines: list[dict[str, Any]]) -> dict[tuple[int, str], dict[str, Any]]:
    return {(line["doc_id"], line["filter"]): line for line in lines}


@pytest.mark.parametrize("kind", KINDS)
def test_one_line_per_document_and_filter_in_lm_eval_s_order(runs, references, kind) -> None:
    ours = [json.loads(x) for x in sample_lines(runs[kind])]
    order = [(x["doc_id"], x["filter"]) for x in ours]
    assert order == [(x["doc_id"], x["filter"]) for x in references[kind]]
    filters = {"generate_until": ["strict-match", "flexible-extract"], "multiple_choice": ["none"]}
    assert order == [(doc, f) for f in filters[kind] for doc in range(DOCS)]


@pytest.mark.parametrize("kind", KINDS)
def test_keys_types_and_nesting_equal_lm_eval_s(runs, references, kind) -> None:
    theirs = keyed(references[kind])
    for key, line in keyed([json.loads(x) for x in sample_lines(runs[kind])]).items():
        assert list(line) == list(theirs[key])  # the same keys, in lm-eval's order
        assert shape(line) == shape(theirs[key])


@pytest.mark.parametrize("kind", KINDS)
def test_shared_values_equal_lm_eval_s(runs, references, kind) -> None:
    """Same documents, prompts and responses: the same arguments, resps, filtered answers,
    hashes and per-filter metrics."""
    theirs = keyed(references[kind])
    for key, line in keyed([json.loads(x) for x in sample_lines(runs[kind])]).items():
        reference = theirs[key]
        for field in ("doc", "target", "resps", "filtered_resps", "metrics"):
            assert line[field] == reference[field], (key, field)
        for field in ("doc_hash", "prompt_hash", "target_hash", *reference["metrics"]):
            assert line[field] == reference[field], (key, field)
        assert line["arguments"] == reference["arguments"]


def test_filters_disagree_somewhere(references) -> None:
    """The canned answers make strict-match and flexible-extract differ, so the per-filter
    comparison above is not vacuous."""
    lines = keyed(references["generate_until"])
    answers = {
        doc: (lines[(doc, "strict-match")], lines[(doc, "flexible-extract")]) for doc in range(DOCS)
    }
    assert any(s["filtered_resps"] != f["filtered_resps"] for s, f in answers.values())
    assert any(s["exact_match"] != f["exact_match"] for s, f in answers.values())


@pytest.mark.parametrize("kind", KINDS)
def test_lines_pass_lm_eval_s_schema(runs, kind) -> None:
    schema = TypeAdapter(SampleResult)
    for text in sample_lines(runs[kind]):
        schema.validate_python(json.loads(text), strict=True)


@pytest.mark.parametrize("kind", KINDS)
def test_reference_matches_a_real_lm_eval_run(references, kind) -> None:
    """The quoted evaluator code still builds the lines a real `lm_eval --log_samples` wrote."""
    real = json.loads(FIXTURE.read_text(encoding="utf-8"))["lines"][kind]
    built = keyed(references[kind])
    for line in real:
        assert shape(line) == shape(built[(0, line["filter"])])


@pytest.mark.parametrize("kind", KINDS)
def test_results_keys_are_lm_eval_s_and_match_the_samples(runs, kind) -> None:
    run = runs[kind]
    doc = results_json([run], {"model": "m"}, 1.0)
    entry = doc["results"][run.task.name]
    real = json.loads(FIXTURE.read_text(encoding="utf-8"))["results"][kind]
    assert set(real) <= set(entry)
    assert entry["sample_len"] == DOCS and entry["name"] == run.task.name
    # Every metric a samples line logs is in the results under `metric,filter`.
    for text in sample_lines(run):
        line = json.loads(text)
        assert {f"{m},{line['filter']}" for m in line["metrics"]} <= set(entry)
    directions = doc["higher_is_better"][run.task.name]
    assert {k.split(",")[0] for k in real if "," in k and "_stderr" not in k} <= set(directions)


def test_written_files_are_found_by_lm_eval_s_helpers(runs, tmp_path) -> None:
    written = [str(p) for p in write_lm_eval(list(runs.values()), tmp_path, {}, 1.0, True)]
    [results] = get_results_filenames(written)
    samples = get_sample_results_filenames(written)
    assert sorted(get_file_task_name(Path(p).name) for p in samples) == ["arc_easy", "gsm8k"]
    stamp = get_file_datetime(Path(results).name).removesuffix(".json")
    assert {get_file_datetime(Path(p).name) for p in samples} == {stamp}
