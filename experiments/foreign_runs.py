"""A quantization CI gate on lm-eval's own runs: two `lm_eval --log_samples` runs (the
packaged SmolLM2-135M Q4_1 dequantised, and a requantization of it, both through lm-eval's hf
backend) on ARC-Easy and GSM8K, gated by `regress check --baseline-samples --candidate-samples`
(no model loaded by regress), beside what a fixed 95% recovery threshold says on the same runs.

The policy is the recovery threshold as an absolute margin: each unit's `max_drop` is 5% of
the baseline's own accuracy, so both verdicts judge the same allowed drop, one with its
uncertainty and one without. (A per-unit `max_relative_drop` was not in the gate when this
ran.) lm-eval reads regress's rendering of the shared data (REGRESS_DATA_DIR) through task
YAMLs that include its own, and evaluates the first N documents of each task, given to it as
a `--samples` file (what `regress baseline export-samples` writes).

    REGRESS_DATA_DIR=/work/shared/data flock /tmp/regress-model.lock \\
      .venv/bin/python experiments/foreign_runs.py --write docs/results/foreign-runs.md

Resumable: each lm-eval run and the gate are skipped when their output exists.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import lm_eval
from _common import REPO, cpu_flags, step

from regress.backends.hf import _model_folder
from regress.backends.models import resolve_model_path
from regress.checks import read_samples
from regress.sweep.quantize import quantize_file
from regress.tasks import get_tasks, resolve_source
from regress.tasks.gsm8k import load as load_gsm8k

UPSTREAM = Path(lm_eval.__file__).parent / "tasks"
YAML = {"arc_easy": "arc/arc_easy.yaml", "gsm8k": "gsm8k/gsm8k.yaml"}
RECOVERY = 0.95
HEADER = """# Foreign runs: a quantization gate on lm-eval's own files

Written by `experiments/foreign_runs.py` (its docstring has the command): lm-eval 0.4.13's hf
backend ran the packaged SmolLM2-135M-Instruct Q4_1 (dequantised to float32) and its
{candidate} requantization (regress's quantize API) on the first ARC-Easy and GSM8K (5-shot)
test questions of the shared data; `regress check --baseline-samples --candidate-samples`
gated the two runs with no model loaded. `max_drop` is 5% of the baseline's accuracy, the drop
a 95% recovery threshold allows; "fixed 95%" is that threshold applied to the two point
accuracies. Walk-through: [foreign-runs.md](../foreign-runs.md).

"""


def write_tasks(root: Path) -> Path:
    """lm-eval task YAMLs reading regress's rendering of the shared ARC-Easy and GSM8K."""
    source = resolve_source(Path(os.environ.get("REGRESS_DATA_DIR", REPO.parent / "shared/data")))
    tasks_dir = root / "tasks"
    tasks_dir.mkdir(parents=True, exist_ok=True)
    for task in get_tasks(list(YAML)):
        files = {}
        for split in ("test", "train"):
            files[split] = root / f"{task.name}_{split}.jsonl"
            # ARC's task object loads its rows; GSM8K's module does.
            rows = load_gsm8k(source, split) if task.name == "gsm8k" else task.load(source, split)  # type: ignore[attr-defined]
            files[split].write_text("".join(json.dumps(r) + "\n" for r in rows))
        (tasks_dir / f"{task.name}.yaml").write_text(
            f"include: {UPSTREAM / YAML[task.name]}\ntask: {task.name}\ntag: []\n"
            "dataset_path: json\ndataset_name: null\ntraining_split: train\n"
            "validation_split: null\ntest_split: test\nfewshot_split: train\n"
            "dataset_kwargs:\n  data_files:\n"
            f"    test: {files['test']}\n    train: {files['train']}\n"
        )
    return tasks_dir


def lm_eval_run(folder: Path, tasks_dir: Path, samples: Path, out: Path, batch: int) -> list[str]:
    return [
        *(sys.executable, "-m", "lm_eval", "--model", "hf"),
        *("--model_args", f"pretrained={folder},dtype=float32"),
        *("--tasks", ",".join(YAML), "--include_path", str(tasks_dir)),
        *("--samples", str(samples), "--batch_size", str(batch), "--device", "cpu"),
        *("--output_path", str(out), "--log_samples"),
    ]


def accuracy(out: Path) -> dict[str, tuple[int, int]]:
    """(right, n) per task of an lm-eval run, as regress imports it."""
    run = read_samples(out, "x")
    return {t: (sum(r.correct or 0 for r in rs), len(rs)) for t, rs in run.records.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--candidate", default="Q4_0", help="The requantization gated.")
    parser.add_argument("--arc", type=int, default=500, help="ARC-Easy questions.")
    parser.add_argument("--gsm8k", type=int, default=50, help="GSM8K questions (5-shot).")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--out", type=Path, default=Path("/tmp/regress-foreign-runs"))
    parser.add_argument("--write", type=Path, help="Write the Markdown table here.")
    args = parser.parse_args()
    os.environ.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    root = args.out
    root.mkdir(parents=True, exist_ok=True)
    tasks_dir = write_tasks(root)
    selection = root / "samples.json"
    selection.write_text(
        json.dumps({"arc_easy": list(range(args.arc)), "gsm8k": list(range(args.gsm8k))})
    )
    base_gguf = resolve_model_path("smollm2-135m")
    cand_gguf = root / f"smollm2-{args.candidate.lower()}.gguf"
    if not cand_gguf.exists():
        quantize_file(base_gguf, args.candidate, cand_gguf)
    seconds = {}
    for side, gguf in (("base", base_gguf), ("cand", cand_gguf)):
        out = root / side
        command = lm_eval_run(_model_folder(gguf), tasks_dir, selection, out, args.batch_size)
        seconds[side] = step(f"lm-eval {side}", out, command)
    policy = root / "policy.yaml"
    base_acc = accuracy(root / "base")
    margins = {t: recovery_margin(right, n) for t, (right, n) in base_acc.items()}
    units = "".join(f"  {t}: {{max_drop: {m}}}\n" for t, m in margins.items())
    policy.write_text(f"min_examples: 50\nunits:\n{units}")
    report = root / "report.json"
    gate = [
        *(sys.executable, "-m", "regress.cli", "check", "--baseline-samples", str(root / "base")),
        *("--candidate-samples", str(root / "cand"), "--policy", str(policy)),
        *("--report-json", str(report), "--report-md", str(root / "report.md")),
    ]
    start = time.perf_counter()
    step("gate", report, gate, ok=(0, 1))
    gate_seconds = time.perf_counter() - start
    data = json.loads(report.read_text())
    cand_acc = accuracy(root / "cand")
    rows = []
    for unit in data["units"]:
        name = unit["name"]
        (b_right, n), (c_right, _) = base_acc[name], cand_acc[name]
        recovery = c_right / b_right if b_right else float("nan")
        fixed = "PASS" if b_right and recovery >= RECOVERY else "FAIL"
        bound = unit["bounds"]
        rows.append(
            f"| {name} | {n} | {b_right / n:.1%} | {c_right / n:.1%} | "
            f"{recovery:.1%} | {fixed} | {margins[name] * 100:.1f} pts | "
            f"{unit['b']} / {unit['c']} | {_bound(bound)} | {unit['verdict']} |"
        )
    text = "\n".join(
        [
            "| task | n | baseline | candidate | recovery | fixed 95% | regress max_drop | "
            "broke / fixed | drop bound | regress |",
            "|---|---:|---:|---:|---:|---|---:|---:|---|---|",
            *rows,
            "",
            f"Overall: regress {data['verdict']} (exit {data['exit_code']}).",
            f"lm-eval {seconds['base']:.0f} s (baseline) and {seconds['cand']:.0f} s "
            f"(candidate), batch size {args.batch_size}; the gate {gate_seconds:.1f} s.",
            f"Machine: {platform.processor() or platform.machine()}, llama.cpp CPU flags: "
            f"{cpu_flags()}.",
        ]
    )
    print(text)
    if args.write:
        args.write.write_text(HEADER.format(candidate=args.candidate) + text + "\n")


def recovery_margin(right: int, n: int) -> float:
    """The absolute drop a 95% recovery allows on this baseline accuracy, rounded up to a
    tenth of a point (0 when the baseline got nothing right)."""
    return math.ceil((1 - RECOVERY) * right / n * 1000) / 1000


def _bound(bound: dict) -> str:
    parts = []
    if bound.get("at_least") is not None:
        parts.append(f"≥ {bound['at_least'] * 100:.1f} pts")
    if bound.get("at_most") is not None:
        parts.append(f"≤ {bound['at_most'] * 100:.1f} pts")
    return ", ".join(parts) or "–"


if __name__ == "__main__":
    main()
