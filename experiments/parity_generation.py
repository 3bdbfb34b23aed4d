"""Parity with lm-evaluation-harness for generation: GSM8K and GSM8K-CoT, example by example.

SmolLM2-135M (the packaged GGUF, dequantised to float32 by transformers) generates greedily
with lm-eval 0.4.13's `hf` model and with regress's `hf` backend on the same first --limit
GSM8K test questions, both with a context of 8192 tokens:

- `gsm8k`: 5-shot from the training split; regress runs its built-in task, lm-eval its own
  gsm8k.yaml over regress's documents (written as JSON lines, as experiments/parity_lm_eval.py does
  for the log-likelihood tasks).
- `gsm8k_cot`: lm-eval's gsm8k-cot.yaml (8 exemplars written in the YAML, `Q:`/`A:` format,
  stop at `Q:`), which both tools read through the same three-line override.

Per example it compares the exact prompt, the raw generation, each filter's extracted answer
(strict-match, flexible-extract) and exact match.

    .venv/bin/python experiments/parity_generation.py [--limit 20] [--tasks gsm8k,gsm8k_cot]
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from parity_lm_eval import DATA, LM_EVAL_TASKS, MAX_LENGTH, MODEL, lm_eval_cli

from regress.run.engine import TaskRun, TaskSpec
from regress.run.runner import RunPlan, execute
from regress.tasks import get_tasks
from regress.tasks.base import DataSource, Task
from regress.tasks.catalog import load_catalog
from regress.tasks.gsm8k import FLEXIBLE, STRICT, extract, load

# benchmark -> (lm-eval's YAML, the splits it reads, whether regress runs its built-in task)
BENCHMARKS = {
    "gsm8k": ("gsm8k/gsm8k.yaml", ("test", "train"), True),
    "gsm8k_cot": ("gsm8k/gsm8k-cot.yaml", ("test",), False),
}


@dataclass(frozen=True)
class Sample:
    """One example as a tool saw and scored it."""

    prompt: str
    text: str
    answers: dict[str, str]
    """Filter name -> extracted answer."""
    exact_match: dict[str, float]


def write_tasks(names: Sequence[str], limit: int, source: DataSource, root: Path) -> Path:
    """Overrides of lm-eval's YAML files over regress's GSM8K documents (for --include_path)."""
    tasks = root / "tasks"
    tasks.mkdir(parents=True)
    files = {}
    for split in ("test", "train"):
        docs = load(source, split)
        files[split] = root / f"gsm8k_{split}.jsonl"
        files[split].write_text(
            "".join(json.dumps(d) + "\n" for d in (docs[:limit] if split == "test" else docs))
        )
    for name in names:
        upstream, splits, _ = BENCHMARKS[name]
        (tasks / f"{name}_local.yaml").write_text(
            f"include: {LM_EVAL_TASKS / upstream}\ntask: {name}_local\ntag: []\n"
            "dataset_path: json\ndataset_name: null\ndataset_kwargs:\n  data_files:\n"
            + "".join(f"    {split}: {files[split]}\n" for split in splits)
        )
    return tasks


def lm_eval_samples(out: Path, name: str) -> dict[int, Sample]:
    """lm-eval's logged samples of one task, by doc_id (one line per filter)."""
    [path] = out.rglob(f"samples_{name}_local_*.jsonl")
    rows: dict[int, list[dict]] = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        rows.setdefault(row["doc_id"], []).append(row)
    return {
        doc_id: Sample(
            prompt=group[0]["arguments"]["gen_args_0"]["arg_0"],
            text=group[0]["resps"][0][0],
            answers={r["filter"]: r["filtered_resps"][0] for r in group},
            exact_match={r["filter"]: float(r["exact_match"]) for r in group},
        )
        for doc_id, group in rows.items()
    }


def regress_samples(run: TaskRun) -> dict[int, Sample]:
    """regress's examples: each filter's answer (the task's own pipelines, or the built-in
    task's extractors) and each filter's exact match as regress recorded it."""
    pipelines = getattr(run.task, "filters", None)
    samples = {}
    for example, results, record in zip(run.examples, run.results, run.records, strict=True):
        texts = [r.text for r in results]  # type: ignore[union-attr]
        if pipelines is None:  # the built-in GSM8K task
            answers = {
                "strict-match": extract(texts[0], STRICT, False),
                "flexible-extract": extract(texts[0], FLEXIBLE, True),
            }
            keys = {"strict-match": "exact_match", "flexible-extract": "exact_match_flexible"}
        else:
            answers = {p.name: p.apply(texts, "parity") for p in pipelines}
            keys = {
                p.name: "exact_match" + ("" if i == 0 else "_" + re.sub(r"\W+", "_", p.name))
                for i, p in enumerate(pipelines)
            }
        samples[example.doc_id] = Sample(
            prompt=example.requests[0].context,  # type: ignore[union-attr]
            text=texts[0],
            answers=answers,
            exact_match={name: record.metrics[key] for name, key in keys.items()},
        )
    return samples


def regress_task(name: str, include: Path) -> Task:
    """The built-in task, or lm-eval's YAML read through regress's own loader."""
    if BENCHMARKS[name][2]:
        [task] = get_tasks([name])
    else:
        [task] = load_catalog([include]).get([f"{name}_local"])
    return task


def row(name: str, ours: dict[int, Sample], theirs: dict[int, Sample]) -> list[str]:
    """One table row: agreement counts over the examples both tools ran."""
    n = len(ours)
    assert set(ours) == set(theirs), "the tools ran different documents"
    pairs = [(ours[d], theirs[d]) for d in sorted(ours)]
    filters = list(pairs[0][1].answers)
    cells = [name, str(n)]
    cells.append(f"{sum(a.prompt == b.prompt for a, b in pairs)}/{n}")
    cells.append(f"{sum(a.text == b.text for a, b in pairs)}/{n}")
    for f in filters:
        cells.append(f"{f}: {sum(a.answers[f] == b.answers[f] for a, b in pairs)}/{n}")
    em = filters[0]
    cells.append(f"{sum(a.exact_match[em] == b.exact_match[em] for a, b in pairs)}/{n}")
    cells.append(f"{sum(b.exact_match[em] for _, b in pairs) / n:.3f}")
    cells.append(f"{sum(a.exact_match[em] for a, _ in pairs) / n:.3f}")
    return cells


def main() -> None:
    """Run lm-eval hf and regress hf on the benchmarks; print the agreement table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=20, help="GSM8K test questions")
    parser.add_argument("--tasks", default="gsm8k,gsm8k_cot", help="benchmarks to run")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads on every side")
    args = parser.parse_args()
    names = args.tasks.split(",")
    unknown = sorted(set(names) - set(BENCHMARKS))
    if unknown:
        raise SystemExit(f"unknown benchmark(s) {unknown}; choose from {', '.join(BENCHMARKS)}")
    source = DataSource(DATA)
    rows, timing = [], []
    with tempfile.TemporaryDirectory(prefix="parity-gen-") as scratch:
        root = Path(scratch)
        include = write_tasks(names, args.limit, source, root)
        lm_s = lm_eval_cli([f"{n}_local" for n in names], include, root / "out", args.threads)
        timing.append(f"lm-eval hf {lm_s:.0f} s")
        for name in names:
            start = time.perf_counter()
            plan = RunPlan(
                (TaskSpec(regress_task(name, include), None, args.limit),),
                MODEL,
                "hf",
                {"dtype": "float32", "max_length": MAX_LENGTH, "threads": args.threads},
                source,
                name="hf",
                suite_name="parity",
            )
            [run] = execute(plan).task_runs
            timing.append(f"regress hf {name} {time.perf_counter() - start:.0f} s")
            rows.append(row(name, regress_samples(run), lm_eval_samples(root / "out", name)))
    header = [
        "task", "n", "identical prompts", "identical generations", "same answer per filter",
        "", "same exact match", "lm-eval EM", "regress EM",
    ]  # fmt: skip
    print(f"greedy, first {args.limit} GSM8K test questions, {MODEL} float32 on both sides\n")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for cells in rows:
        print("| " + " | ".join(cells) + " |")
    print("\nwall time: " + ", ".join(timing) + f"; {args.threads} threads")


if __name__ == "__main__":
    main()
