"""Parity with lm-evaluation-harness for generation: GSM8K 5-shot, greedy, example by example.

SmolLM2-135M (the packaged GGUF, dequantised to float32 by transformers) generates with
lm-eval 0.4.13's `hf` model and with regress's `hf` backend on the same first --limit GSM8K
test questions (lm-eval reads regress's documents as JSON lines through its own gsm8k.yaml, as
bench/parity_lm_eval.py does for the log-likelihood tasks). Per example it compares the exact
prompt (few-shot block included), the raw generation, both filters' extracted answers
(strict-match, flexible-extract) and exact match.

    .venv/bin/python bench/parity_generation.py [--limit 20] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import lm_eval

from regress.backends.hf import _model_folder
from regress.engine import TaskSpec
from regress.models import resolve_model_path
from regress.runner import RunPlan, execute
from regress.tasks import get_tasks
from regress.tasks.base import DataSource
from regress.tasks.gsm8k import FLEXIBLE, STRICT, extract, load

DATA = Path(os.environ.get("REGRESS_DATA_DIR", Path(__file__).resolve().parents[2] / "shared/data"))
MODEL = "smollm2-135m"
GSM8K_YAML = Path(lm_eval.__file__).parent / "tasks/gsm8k/gsm8k.yaml"


def lm_eval_samples(limit: int, root: Path, threads: int) -> tuple[dict[int, dict], float]:
    """lm-eval's per-document samples (by doc_id), each filter's answer under its name."""
    source = DataSource(DATA)
    files = {}
    for split in ("test", "train"):
        docs = load(source, split)[:limit] if split == "test" else load(source, split)
        files[split] = root / f"gsm8k_{split}.jsonl"
        files[split].write_text("".join(json.dumps(d) + "\n" for d in docs))
    tasks = root / "tasks"
    tasks.mkdir()
    (tasks / "gsm8k_local.yaml").write_text(
        f"include: {GSM8K_YAML}\ntask: gsm8k_local\ntag: []\ndataset_path: json\n"
        "dataset_name: null\ndataset_kwargs:\n  data_files:\n"
        + "".join(f"    {split}: {path}\n" for split, path in files.items())
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    env["OMP_NUM_THREADS"] = str(threads)
    folder = _model_folder(resolve_model_path(MODEL))
    command = [
        sys.executable, "-m", "lm_eval", "--model", "hf",
        "--model_args", f"pretrained={folder},dtype=float32",
        "--tasks", "gsm8k_local", "--include_path", str(tasks), "--batch_size", "1",
        "--device", "cpu", "--output_path", str(root / "out"), "--log_samples",
    ]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"lm-eval failed:\n{done.stderr[-4000:]}")
    [path] = (root / "out").rglob("samples_gsm8k_local_*.jsonl")
    samples: dict[int, dict] = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        entry = samples.setdefault(row["doc_id"], {"answers": {}, "em": {}})
        entry["prompt"] = row["arguments"]["gen_args_0"]["arg_0"]
        entry["text"] = row["resps"][0][0]
        entry["answers"][row["filter"]] = row["filtered_resps"][0]
        entry["em"][row["filter"]] = row["exact_match"]
    return samples, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        theirs, lm_eval_s = lm_eval_samples(args.limit, Path(tmp), args.threads)
    [task] = get_tasks(["gsm8k"])
    start = time.perf_counter()
    plan = RunPlan(
        (TaskSpec(task, 5, args.limit),),
        MODEL,
        "hf",
        {"dtype": "float32", "threads": args.threads},
        DataSource(DATA),
        name="hf",
        suite_name="parity",
    )
    [run] = execute(plan).task_runs
    regress_s = time.perf_counter() - start
    same = {"prompt": 0, "text": 0, "strict": 0, "flexible": 0, "em": 0}
    em = {"lm-eval": 0.0, "regress": 0.0}
    for example, results, record in zip(run.examples, run.results, run.records, strict=True):
        other = theirs[example.doc_id]
        text = results[0].text
        ours = {
            "strict-match": extract(text, STRICT, False),
            "flexible-extract": extract(text, FLEXIBLE, True),
        }
        same["prompt"] += example.requests[0].context == other["prompt"]
        same["text"] += text == other["text"]
        same["strict"] += ours["strict-match"] == other["answers"]["strict-match"]
        same["flexible"] += ours["flexible-extract"] == other["answers"]["flexible-extract"]
        same["em"] += record.metrics["exact_match"] == other["em"]["strict-match"]
        em["lm-eval"] += other["em"]["strict-match"]
        em["regress"] += record.metrics["exact_match"]
    n = len(run.records)
    print(
        f"GSM8K 5-shot greedy, first {n} test questions; lm-eval {lm_eval_s:.0f} s, "
        f"regress {regress_s:.0f} s"
    )
    header = ["n", "identical prompts", "identical generations", "strict-match answer"]
    header += ["flexible-extract answer", "exact match per example", "lm-eval EM", "regress EM"]
    print("| " + " | ".join(header) + " |")
    print("|---|---|---|---|---|---|---|---|")
    cells = [f"{same[k]}/{n}" for k in ("prompt", "text", "strict", "flexible", "em")]
    print(
        f"| {n} | " + " | ".join(cells) + f" | {em['lm-eval'] / n:.3f} | {em['regress'] / n:.3f} |"
    )


if __name__ == "__main__":
    main()
