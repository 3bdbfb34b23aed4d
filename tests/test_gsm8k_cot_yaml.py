"""lm-eval 0.4.13's GSM8K chain-of-thought and self-consistency YAML files, run by regress.

Both files are read verbatim from the installed lm-eval package through a three-line override
that points `dataset_path: json` at regress's own GSM8K documents (written to a temporary
folder). lm-eval builds the same tasks in-process from the same override, so each side's
prompts, stop strings, sampling settings and repeats are compared request by request, and
each filter pipeline (`score-first`, `maj@64`, `maj@8`, strict and flexible) is run on the
same sampled answers by both tools' own code.
"""

from __future__ import annotations

import importlib.resources
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest
from lm_eval.api.task import ConfigurableTask
from lm_eval.tasks._yaml_loader import load_yaml

from regress.backends.llama_cpp import LlamaCppBackend
from regress.core.requests import GenerateRequest, GenerateResult
from regress.run.engine import TaskSpec, evaluate
from regress.tasks import DataSource, gsm8k
from regress.tasks.catalog import load_catalog

UPSTREAM = Path(str(importlib.resources.files("lm_eval"))) / "tasks" / "gsm8k"
FILES = {"cot": "gsm8k-cot.yaml", "self_consistency": "gsm8k-cot-self-consistency.yaml"}
DOCS = 6


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Path:
    root = tmp_path_factory.mktemp("gsm8k_cot")
    docs = gsm8k.load(DataSource(data_dir=data_dir), "test")[:DOCS]
    data = root / "gsm8k_test.jsonl"
    data.write_text("".join(json.dumps(d) + "\n" for d in docs))
    for name, upstream in FILES.items():
        (root / f"{name}.yaml").write_text(
            f"include: {UPSTREAM / upstream}\ntask: local_{name}\ndataset_path: json\n"
            f"dataset_name: null\ndataset_kwargs:\n  data_files: {{test: {data}}}\n"
        )
    return root


def lm_eval_task(folder: Path, name: str) -> ConfigurableTask:
    task = ConfigurableTask(config=load_yaml(folder / f"{name}.yaml"))
    task.build_all_requests(limit=DOCS, rank=0, world_size=1)
    return task


@pytest.mark.parametrize("name", FILES)
def test_requests_equal_lm_eval_s(folder: Path, data_dir: Path, name: str) -> None:
    theirs = lm_eval_task(folder, name)
    [task] = load_catalog([folder]).get([f"local_{name}"])
    ours = task.examples(DataSource(data_dir=data_dir))
    assert len(ours) == len(theirs.instances) == DOCS
    in_order = sorted(theirs.instances, key=lambda i: i.doc_id)
    for example, instance in zip(ours, in_order, strict=True):
        context, kwargs = instance.arguments
        requests = example.requests
        assert all(isinstance(r, GenerateRequest) for r in requests)
        # Eight worked exemplars written in the YAML (fewshot_config.samples), then the question.
        assert context.count("The answer is") == 8
        assert {r.context for r in requests} == {context}
        assert len(requests) == instance.repeats
        assert {r.until for r in requests} == {tuple(kwargs["until"])}
        expected = float(kwargs.get("temperature", 0.0)) if kwargs.get("do_sample") else 0.0
        assert {r.temperature for r in requests} == {expected}
        assert example.target == theirs.doc_to_target(instance.doc)
    # Self-consistency samples 64 times at T=0.2; plain CoT decodes once, greedily.
    assert len(ours[0].requests) == (64 if name == "self_consistency" else 1)


def answers(gold: str, rng: random.Random, n: int) -> list[str]:
    """n sampled completions: right, wrong, unparseable, in proportions that make ties."""
    wrong = str(int(gold.replace(",", "")) + 1)
    pool = [
        f"So the total is {gold}. The answer is {gold}.",
        f"They have {wrong} left. The answer is {wrong}.",
        "I am not sure.",
        f"The answer is ${gold}",
    ]
    return [rng.choice(pool) for _ in range(n)]


@pytest.mark.parametrize("name", FILES)
def test_filters_and_scores_equal_lm_eval_s(folder: Path, data_dir: Path, name: str) -> None:
    theirs = lm_eval_task(folder, name)
    [task] = load_catalog([folder]).get([f"local_{name}"])
    examples = task.examples(DataSource(data_dir=data_dir))
    by_doc = {i.doc_id: i for i in theirs.instances}
    rng = random.Random(7)
    responses = {e.doc_id: answers(str(e.target), rng, len(e.requests)) for e in examples}
    for doc_id, instance in by_doc.items():
        instance.resps = responses[doc_id]
    for ensemble in theirs._filters:
        ensemble.apply(theirs.instances)
    names = [pipeline.name for pipeline in task.filters]
    assert names == [ensemble.name for ensemble in theirs._filters]
    agreed = 0
    for example in examples:
        instance = by_doc[example.doc_id]
        texts = responses[example.doc_id]
        scored = task.score(example, [GenerateResult(t, 0) for t in texts])
        for i, pipeline in enumerate(task.filters):
            answer = pipeline.apply(texts, "test")
            assert answer == instance.filtered_resps[pipeline.name]
            expected: dict[str, Any] = theirs.process_results(instance.doc, [answer])
            key = "exact_match" + ("" if i == 0 else "_" + re.sub(r"\W+", "_", pipeline.name))
            assert scored.metrics[key] == expected["exact_match"]
            agreed += 1
    assert agreed == DOCS * len(names)


def test_self_consistency_runs_on_the_real_model(
    folder: Path, data_dir: Path, smollm2_path: Path
) -> None:
    """lm-eval's self-consistency file, cut to 8 samples of 48 tokens on one question, end to
    end on SmolLM2: every vote equals lm-eval's own filters over the texts it generated."""
    (folder / "sc8.yaml").write_text(
        f"include: {folder / 'self_consistency.yaml'}\ntask: local_sc8\nrepeats: 8\n"
        "generation_kwargs: {until: ['Q:', '\\n\\n'], do_sample: true, temperature: 0.8, "
        "max_gen_toks: 48}\n"
    )
    [task] = load_catalog([folder]).get(["local_sc8"])
    backend = LlamaCppBackend(str(smollm2_path), n_ctx=2048)
    try:
        [run] = evaluate([TaskSpec(task, None, 1)], backend, DataSource(data_dir))
    finally:
        backend.close()
    theirs = lm_eval_task(folder, "sc8")
    by_doc = {i.doc_id: i for i in theirs.instances}
    for example, results in zip(run.examples, run.results, strict=True):
        by_doc[example.doc_id].resps = [r.text for r in results]
    for ensemble in theirs._filters:
        ensemble.apply([by_doc[e.doc_id] for e in run.examples])
    assert len(run.records) == 1
    for example, record in zip(run.examples, run.records, strict=True):
        instance = by_doc[example.doc_id]
        assert len(record.scores["failure"]) == len(record.scores["finish"]) == 8
        for name, key in (
            ("score-first", "exact_match"),
            ("maj@64", "exact_match_maj_64"),
            ("maj@8", "exact_match_maj_8"),
        ):
            expected = theirs.process_results(instance.doc, [instance.filtered_resps[name]])
            assert record.metrics[key] == expected["exact_match"]
        assert record.pred == instance.filtered_resps["score-first"]
    # Seeded per sample: eight samples are not one text repeated.
    assert any(len({r.text for r in rs}) > 1 for rs in run.results)
