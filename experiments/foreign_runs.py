"""A quantization CI gate on lm-eval's own runs: `lm_eval --log_samples` runs of the packaged
SmolLM2-135M Q4_1 (dequantised) and of requantizations of it, all through lm-eval's hf backend,
on ARC-Easy and 5-shot GSM8K, each candidate gated against the base model by
`regress check --baseline-samples --candidate-samples` (no model loaded by regress) under a
recovery policy, beside what a fixed 95% recovery threshold says on the same runs.

The policy is the recovery rule itself: `units: {arc_easy: {max_relative_drop: 0.05}, gsm8k:
{max_relative_drop: 0.05}}` (the candidate keeps at least 95% of the baseline's accuracy,
tested exactly with its bounds, regress.gate.recovery), beside each unit's default 2-point
`max_drop`. "Fixed 95%" is `candidate accuracy >= 0.95 x baseline accuracy` on the two point
accuracies. lm-eval reads regress's rendering of the shared data (REGRESS_DATA_DIR) through
task YAMLs that include its own, and evaluates the first N documents of each task, given to it
as a `--samples` file; the candidates' runs take theirs from `regress baseline export-samples`
of the base run imported as a baseline, as the workflow in docs/foreign-runs.md does.

    REGRESS_DATA_DIR=/work/shared/data flock /tmp/regress-model.lock \\
      env OMP_WAIT_POLICY=PASSIVE .venv/bin/python experiments/foreign_runs.py \\
      --write docs/results/foreign-runs.md

Resumable: each lm-eval run and each gate are skipped when their output exists, and
`--max-runs N` stops after N lm-eval runs (to share the model lock), to be run again.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import date
from pathlib import Path

import lm_eval
from _common import REPO, cpu_flags, step

from regress.backends.hf import _model_folder
from regress.backends.models import resolve_model_path
from regress.core.fingerprint import this_cpu
from regress.sweep.quantize import quantize_file
from regress.tasks import get_tasks, resolve_source
from regress.tasks.gsm8k import load as load_gsm8k

UPSTREAM = Path(lm_eval.__file__).parent / "tasks"
YAML = {"arc_easy": "arc/arc_easy.yaml", "gsm8k": "gsm8k/gsm8k.yaml"}
RECOVERY = 0.95
REGRESS = [sys.executable, "-m", "regress.cli"]
HEADER = """# Foreign runs: a quantization gate on lm-eval's own files

Written by `experiments/foreign_runs.py` (its docstring has the command): lm-eval {lm_eval}'s
hf backend ran the packaged SmolLM2-135M-Instruct Q4_1 (dequantised to float32) and its
requantizations by regress's quantize API ({candidates}, each dequantised to float32 the same
way) on the first {arc} ARC-Easy and {gsm8k} GSM8K (5-shot) test questions of the shared data,
with `--log_samples`. `regress check --baseline-samples BASE --candidate-samples CAND --policy
policy.yaml` gated each candidate's run against the base model's with no model loaded, under
a recovery policy:

```yaml
{policy}```

"Recovery" is the candidate's accuracy over the baseline's, with its one-sided bounds from the
report's Recovery section (at the levels Holm held each test to); "recovery rule" is regress's
verdict of that rule; "gate" is the whole check's verdict, in which each unit's default
2-point `max_drop` also counts. "Fixed 95%" is the threshold quantization CI writes by hand,
`candidate >= 0.95 x baseline` on the two point accuracies. Walk-through:
[foreign-runs.md](../foreign-runs.md).

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
    """The lm-eval command line of one run (the workflow's, with a local task path)."""
    return [
        *(sys.executable, "-m", "lm_eval", "--model", "hf"),
        *("--model_args", f"pretrained={folder},dtype=float32"),
        *("--tasks", ",".join(YAML), "--include_path", str(tasks_dir)),
        *("--samples", str(samples), "--batch_size", str(batch), "--device", "cpu"),
        *("--output_path", str(out), "--log_samples"),
    ]


class Runs:
    """The lm-eval runs: at most `limit` made by this invocation (None: all)."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit

    def run(self, name: str, out: Path, command: list[str]) -> None:
        """Run `command` unless `out` exists; stop the script once the limit is spent."""
        if out.exists():
            return
        if self.limit is not None:
            if self.limit == 0:
                raise SystemExit("--max-runs reached: run the script again to continue")
            self.limit -= 1
        step(f"lm-eval {name}", out, command)


def seconds(out: Path) -> float:
    """The wall time lm-eval recorded for the run in `out` (its evaluation, not its load)."""
    [results] = out.glob("*/results_*.json")
    return float(json.loads(results.read_text())["total_evaluation_time_seconds"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--candidates", default="Q4_0", help="The requantizations gated, comma-separated."
    )
    parser.add_argument("--arc", type=int, default=300, help="ARC-Easy questions.")
    parser.add_argument("--gsm8k", type=int, default=50, help="GSM8K questions (5-shot).")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-runs", type=int, help="Stop after this many lm-eval runs.")
    parser.add_argument("--out", type=Path, default=Path("/tmp/regress-foreign-runs"))
    parser.add_argument("--write", type=Path, help="Write the Markdown page here.")
    args = parser.parse_args()
    os.environ.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    candidates = args.candidates.split(",")
    root = args.out
    root.mkdir(parents=True, exist_ok=True)
    tasks_dir = write_tasks(root)
    runs = Runs(args.max_runs)
    first = root / "first.json"
    first.write_text(
        json.dumps({"arc_easy": list(range(args.arc)), "gsm8k": list(range(args.gsm8k))})
    )
    base_gguf = resolve_model_path("smollm2-135m")
    command = lm_eval_run(
        _model_folder(base_gguf), tasks_dir, first, root / "base", args.batch_size
    )
    runs.run("base", root / "base", command)
    # The base run is the baseline; lm-eval evaluates what it exports, as in CI.
    store = root / "baselines"
    imported = [*REGRESS, "baseline", "import-lm-eval", "--samples", str(root / "base")]
    step("import", store / "main", [*imported, "--name", "main", "--store", str(store)])
    samples = root / "samples.json"
    step(
        "export",
        samples,
        [*REGRESS, "baseline", "export-samples", "main", "-o", str(samples), "--store", str(store)],
    )
    # The base run already covers exactly the exported examples: no second base run.
    if json.loads(samples.read_text()) != json.loads(first.read_text()):
        raise SystemExit(f"{samples} names other examples than the base run's {first}")
    policy = root / "policy.yaml"
    units = "".join(f"  {t}: {{max_relative_drop: {1 - RECOVERY:.2f}}}\n" for t in YAML)
    policy.write_text(f"min_examples: {min(args.arc, args.gsm8k, 100)}\nunits:\n{units}")
    gates = {}
    for name in candidates:
        gguf = root / f"smollm2-{name.lower()}.gguf"
        if not gguf.exists():
            quantize_file(base_gguf, name, gguf)
        out = root / name
        runs.run(
            name, out, lm_eval_run(_model_folder(gguf), tasks_dir, samples, out, args.batch_size)
        )
        gates[name] = gate(root, name, policy)
    times = {side: seconds(root / side) for side in ("base", *candidates)}
    text = table(gates, times, args.batch_size) + "\n\n" + first_lines(root, candidates)
    print(text)
    if args.write:
        header = HEADER.format(
            lm_eval=lm_eval.__version__,
            candidates=", ".join(candidates),
            arc=args.arc,
            gsm8k=args.gsm8k,
            policy=policy.read_text(),
        )
        args.write.write_text(header + text + "\n")


def gate(root: Path, name: str, policy: Path) -> dict:
    """The JSON report of `regress check` on the base run and candidate `name`'s."""
    report = root / f"{name}-report.json"
    step(
        f"gate {name}",
        report,
        [
            *(*REGRESS, "check", "--baseline-samples", str(root / "base")),
            *("--candidate-samples", str(root / name), "--name", name, "--policy", str(policy)),
            *("--report-json", str(report), "--report-md", str(root / f"{name}-report.md")),
        ],
        ok=(0, 1),
    )
    return json.loads(report.read_text())


def table(gates: dict[str, dict], seconds: dict[str, float], batch: int) -> str:
    """Each candidate's units: the runs' accuracies, the recovery and its bounds, regress's
    verdicts and the fixed threshold's; then the timings and the machine."""
    rows = []
    for name, data in gates.items():
        units = {u["name"]: u for u in data["units"]}
        for r in data["recovery"]:
            unit = units[r["unit"]]
            fixed = "PASS" if r["candidate"] >= RECOVERY * r["baseline"] else "FAIL"
            rows.append(
                f"| {name} | {r['unit']} | {r['n']} | {r['baseline']:.1%} | "
                f"{r['candidate']:.1%} | {unit['b']} / {unit['c']} | {_recovery(r)} | "
                f"{fixed} | {r['verdict']} | {unit['verdict']} |"
            )
        rows.append(
            f"| {name} | **gate** | | | | | | | | **{data['verdict']}** "
            f"(exit {data['exit_code']}) |"
        )
    times = ", ".join(f"{k} {v:.0f} s" for k, v in seconds.items())
    return "\n".join(
        [
            "| candidate | task | n | baseline | candidate | broke / fixed | recovery [bounds] | "
            "fixed 95% | recovery rule | unit (recovery and 2-pt max_drop) |",
            "|---|---|---:|---:|---:|---:|---|---|---|---|",
            *rows,
            "",
            f"lm-eval wall time per run (both tasks, batch size {batch}): {times}; each gate "
            "reads two runs and loads no model (a few seconds).",
            f"Written {date.today()} on {this_cpu().name} ({os.cpu_count()} cores, shared with "
            f"other jobs: the times are not benchmarks), llama.cpp CPU flags: {cpu_flags()}.",
        ]
    )


def first_lines(root: Path, candidates: list[str]) -> str:
    """Each gate's Markdown report, its first line (what a reviewer reads) quoted."""
    quoted = []
    for name in candidates:
        title = (root / f"{name}-report.md").read_text().splitlines()[0].removeprefix("## ")
        quoted.append(f"- {name}: {title}")
    return "The first line of each gate's Markdown report:\n\n" + "\n".join(quoted)


def _recovery(r: dict) -> str:
    """`97.1% [≥ 93.0%, ≤ 101.2%]`: the point recovery and its one-sided bounds."""
    if r["recovery"] is None:
        return "undefined (baseline 0)"
    bounds = [
        f"{sign} {r[key]:.1%}"
        for key, sign in (("at_least", "≥"), ("at_most", "≤"))
        if r[key] is not None
    ]
    return f"{r['recovery']:.1%} [{', '.join(bounds)}]"


if __name__ == "__main__":
    main()
