"""lm-eval 0.4.13's own task YAML files, pointed at local copies of the same documents, give
exactly the built-in tasks' requests, prompt hashes and (on the real model) scores.

The YAML files are read verbatim from the installed lm-eval package; each is included by a
three-line override that names the task `local_<name>` and points `dataset_path: json` at the
documents regress's own loaders produce from ../shared/data (written to a temporary folder:
the repository holds no benchmark data). Since tests/test_tasks_prompts.py pins the built-in
prompts to lm-eval's own output, the YAML loader is shown to render what lm-eval renders.
"""

from __future__ import annotations

import importlib.resources
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from regress.backends import load_backend
from regress.core.hashes import digest
from regress.core.requests import request_hash
from regress.run.engine import TaskSpec, evaluate
from regress.tasks import DataSource, arc, boolq, doc_hash, get_tasks, mmlu, piqa
from regress.tasks.catalog import TaskCatalog, load_catalog
from regress.tasks.loaders import Doc

LM_EVAL_TASKS = Path(str(importlib.resources.files("lm_eval"))) / "tasks"
MMLU_SUBJECTS = ("anatomy", "abstract_algebra", "high_school_us_history")

Splits = dict[str, Callable[[DataSource], list[Doc]]]


def _arc(subset: str, task: str) -> Splits:
    return {s: (lambda src, s=s: arc.load(subset, task, src, s)) for s in ("train", "test")}


def _mmlu(subject: str) -> Splits:
    return {s: (lambda src, s=s: mmlu.load(subject, src, s)) for s in ("test", "dev")}


# built-in task -> (lm-eval's YAML file, extra files it includes, split -> documents)
CASES: dict[str, tuple[str, tuple[str, ...], Splits]] = {
    "arc_easy": ("arc/arc_easy.yaml", (), _arc("ARC-Easy", "arc_easy")),
    "arc_challenge": (
        "arc/arc_challenge.yaml",
        ("arc/arc_easy.yaml",),
        _arc("ARC-Challenge", "arc_challenge"),
    ),
    "piqa": ("piqa/piqa.yaml", (), {"validation": lambda src: piqa.load(src, "validation")}),
    "boolq": (
        "super_glue/boolq/default.yaml",
        (),
        {"validation": lambda src: boolq.load(src, "validation")},
    ),
    **{
        f"mmlu_{s}": (
            f"mmlu/default/mmlu_{s}.yaml",
            ("mmlu/default/_default_template_yaml",),
            _mmlu(s),
        )
        for s in MMLU_SUBJECTS
    },
}  # fmt: skip


@pytest.fixture(scope="module")
def source(data_dir: Path) -> DataSource:
    return DataSource(data_dir=data_dir)


@pytest.fixture(scope="module")
def task_folder(tmp_path_factory: pytest.TempPathFactory, source: DataSource) -> Path:
    """lm-eval's files under upstream/, overrides under tasks/, documents under data/."""
    root = tmp_path_factory.mktemp("lm_eval_yaml")
    for name, (yaml_file, includes, splits) in CASES.items():
        for relative in (yaml_file, *includes):
            target = root / "upstream" / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(LM_EVAL_TASKS / relative, target)
        files = {}
        for split, load in splits.items():
            path = root / "data" / f"{name}_{split}.jsonl"
            path.parent.mkdir(exist_ok=True)
            path.write_text("".join(json.dumps(doc) + "\n" for doc in load(source)))
            files[split] = str(path)
        override = root / "tasks" / f"{name}.yaml"
        override.parent.mkdir(exist_ok=True)
        override.write_text(
            f"include: ../upstream/{yaml_file}\ntask: local_{name}\ndataset_path: json\n"
            f"dataset_name: null\ndataset_kwargs:\n  data_files: {json.dumps(files)}\n"
        )
    return root / "tasks"


@pytest.fixture(scope="module")
def catalog(task_folder: Path) -> TaskCatalog:
    return load_catalog([task_folder])


def prompt_hashes(examples) -> list[str]:
    return [digest([request_hash(r) for r in e.requests]) for e in examples]


@pytest.mark.parametrize(
    ("name", "shots"),
    [
        ("arc_easy", 0),
        ("arc_easy", 5),
        ("arc_challenge", 3),
        ("piqa", 0),
        ("boolq", 0),
        *((f"mmlu_{s}", shots) for s in MMLU_SUBJECTS for shots in (0, 5)),
    ],
)
def test_lm_eval_yaml_renders_the_builtin_requests(
    catalog: TaskCatalog, source: DataSource, name: str, shots: int
) -> None:
    [builtin] = get_tasks([name])
    [loaded] = catalog.get([f"local_{name}"])
    ours = builtin.examples(source, shots, limit=60)
    theirs = loaded.examples(source, shots, limit=60)
    assert len(ours) == len(theirs) == 60
    assert [e.requests for e in theirs] == [e.requests for e in ours]
    assert prompt_hashes(theirs) == prompt_hashes(ours)
    assert [doc_hash(e.doc) for e in theirs] == [doc_hash(e.doc) for e in ours]
    assert [e.target for e in theirs] == [e.target for e in ours]
    assert (loaded.primary_metric, loaded.binary) == (builtin.primary_metric, builtin.binary)
    assert set(loaded.higher_is_better) == set(builtin.higher_is_better)


def test_mmlu_shots_differ_from_zero_shot(catalog: TaskCatalog, source: DataSource) -> None:
    """The parity above is not vacuous: the 5-shot prompt is the longer, described one."""
    [loaded] = catalog.get(["local_mmlu_anatomy"])
    [zero], [five] = loaded.examples(source, 0, 1), loaded.examples(source, 5, 1)
    description = "The following are multiple choice questions (with answers) about anatomy.\n\n"
    assert zero.requests[0].context.startswith(description)
    assert five.requests[0].context.startswith(description)
    assert five.requests[0].context.endswith(zero.requests[0].context.removeprefix(description))
    assert (
        zero.requests[0].context.count("\nAnswer:"),
        five.requests[0].context.count("\nAnswer:"),
    ) == (1, 6)


@pytest.mark.model
def test_lm_eval_yaml_scores_like_the_builtin_tasks_on_the_real_model(
    catalog: TaskCatalog, source: DataSource, smollm2_path: Path
) -> None:
    """Same records (but the task name) from both definitions, SmolLM2-135M, 4 docs each."""
    names = ["arc_easy", "arc_challenge", "piqa", "boolq", "mmlu_anatomy"]
    builtin = [TaskSpec(t, 0, 4) for t in get_tasks(names)]
    loaded = [TaskSpec(t, 0, 4) for t in catalog.get([f"local_{n}" for n in names])]
    backend = load_backend("llama_cpp", str(smollm2_path), {"n_ctx": 2048})
    try:
        runs = evaluate([*builtin, *loaded], backend, source)
    finally:
        backend.close()
    ours, theirs = runs[: len(names)], runs[len(names) :]
    for a, b in zip(ours, theirs, strict=True):
        assert b.task.name == f"local_{a.task.name}"
        assert len(a.records) == 4
        for x, y in zip(a.records, b.records, strict=True):
            assert y.to_json() == x.to_json().replace(
                f'"task":"{a.task.name}"', f'"task":"local_{a.task.name}"'
            )
        assert (b.info.dataset_hash, b.info.prompt_hash) == (
            a.info.dataset_hash,
            a.info.prompt_hash,
        )
        assert b.metrics == a.metrics


@pytest.fixture(scope="module")
def lm_eval_tasks(task_folder: Path):
    """lm-eval 0.4.13's own TaskManager over the override folder alone: the files it
    includes are copied beside it, so its index of every built-in task (most of this
    fixture's time) is left out."""
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=str(task_folder), include_defaults=False)


@pytest.mark.parametrize(
    ("name", "shots"),
    [("arc_easy", 0), ("arc_easy", 3), ("arc_challenge", 5), ("mmlu_anatomy", 5)],
)
def test_lm_eval_itself_builds_the_same_requests_from_the_same_files(
    lm_eval_tasks, catalog: TaskCatalog, source: DataSource, name: str, shots: int
) -> None:
    """lm-eval's own TaskManager, given the override files (its `datasets` reads the local
    JSON), builds exactly the requests regress's YAML loader builds. (piqa and boolq are left
    out: lm-eval loads their train split, which ../shared/data does not have.)"""
    from lm_eval.tasks import get_task_dict

    task = get_task_dict([f"local_{name}"], lm_eval_tasks)[f"local_{name}"]
    task.set_config(key="num_fewshot", value=shots)
    task.set_fewshot_seed(1234)
    task.build_all_requests(limit=15, rank=0, world_size=1)
    theirs: dict[int, list[tuple[str, str]]] = {}
    for instance in task.instances:
        theirs.setdefault(instance.doc_id, []).append(tuple(instance.arguments))
    [loaded] = catalog.get([f"local_{name}"])
    ours = loaded.examples(source, shots, limit=15)
    assert len(theirs) == len(ours) == 15
    for example in ours:
        assert [(r.context, r.continuation) for r in example.requests] == theirs[example.doc_id]
