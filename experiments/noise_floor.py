"""Noise floors: how many answers move when nothing but the runtime changes
(docs/results/noise-floors.md).

    .venv/bin/python experiments/noise_floor.py [--models smollm2-135m,gemma3-270m] [--per-task 100]
        [--per-subject 1] [--other-python /path/to/other-venv/bin/python] [--configs a,b,c,d,f,g]

Each configuration is a pair of runs of the same model file over the same examples: the
proxy suite (`suites/proxy.yaml`) with ARC-Easy, PIQA and BoolQ capped at --per-task
examples and MMLU (5-shot) at --per-subject questions for each of its 57 subjects (0 leaves
it out). Runs go one after the other through `regress eval --save-run` (no result cache),
and each pair is compared with the gate's own pairing: the share of examples whose
right/wrong outcome changed, and the mean KL divergence over the choices.

  a  the same run twice                  b  threads 1 vs 2
  c  n_batch 512 vs 64                   d  this venv's llama.cpp build vs --other-python's
  f  llama.cpp vs transformers (GGUF dequantised to float32)
  g  transformers batch_size 1 vs auto
(e) the Action's portable build vs a native one is (d) when --other-python holds the native
build; (h) llama_cpp.server cannot turn its prompt cache off, see docs/results/noise-floors.md.

Prints the CPU flags (llama.cpp system info of each build) above the table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from regress.core.manifest import Run
from regress.core.store import read_run
from regress.gate.compare import compare
from regress.gate.policy import Policy

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("REGRESS_DATA_DIR", REPO.parent / "shared" / "data"))


@dataclass(frozen=True)
class Side:
    """One run of a pair: which python, backend and settings."""

    label: str
    backend: str = "llama_cpp"
    model_args: str = ""
    python: str = sys.executable


def suite_file(per_task: int, per_subject: int, folder: Path) -> Path:
    """The proxy suite with every task capped at `per_task` examples (MMLU: `per_subject`
    questions for each of its 57 subjects)."""
    suite = yaml.safe_load((REPO / "suites" / "proxy.yaml").read_text())
    if not per_subject:
        suite["tasks"] = [entry for entry in suite["tasks"] if entry["task"] != "mmlu"]
    for entry in suite["tasks"]:
        cap = per_subject if entry["task"] == "mmlu" else per_task
        entry["limit"] = min(entry.get("limit", cap), cap)
    suite["name"] = f"proxy-{per_task}"
    path = folder / "suite.yaml"
    path.write_text(yaml.safe_dump(suite))
    return path


def run(side: Side, model: str, suite: Path, out: Path) -> tuple[Run, float]:
    """One `regress eval` of the suite, saved to `out`; its run and wall time."""
    command = [side.python, "-m", "regress.cli", "eval", "-m", model, "--backend", side.backend]
    command += ["--suite", str(suite), "--data-dir", str(DATA), "--no-cache"]
    command += ["--save-run", str(out)] + (
        ["--model-args", side.model_args] * bool(side.model_args)
    )
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return read_run(out), time.perf_counter() - start


def movement(a: Run, b: Run) -> tuple[int, int, float | None]:
    """Examples paired, outcomes changed, and the mean KL over the choices (n-weighted)."""
    result = compare(a, b, Policy())
    units = [u for u in result.units if u.n]
    weighted = [(u.kl_divergence, u.n) for u in units if u.kl_divergence is not None]
    kl = sum(k * n for k, n in weighted) / sum(n for _, n in weighted) if weighted else None
    return sum(u.n for u in units), result.n_flips, kl


def system_info(python: str) -> str:
    """The llama.cpp build's CPU features, as llama.cpp prints them."""
    code = "import llama_cpp; print(llama_cpp.llama_print_system_info().decode())"
    done = subprocess.run([python, "-c", code], capture_output=True, text=True)
    return done.stdout.strip() or done.stderr.strip()[-200:]


def pairs(configs: list[str], other: str | None) -> list[tuple[str, Side, Side]]:
    """The two sides of each chosen configuration."""
    native, hf = Side("llama.cpp"), Side("hf", "hf")
    table = {
        "a": ("same run twice", native, Side("llama.cpp again")),
        "b": ("threads 1 vs 2", Side("t1", model_args="threads=1"), native),
        "c": ("n_batch 512 vs 64", native, Side("b64", model_args="n_batch=64")),
        "d": (
            "llama.cpp build: this venv vs --other-python",
            native,
            Side("other", python=other or ""),
        ),
        "f": ("llama.cpp vs transformers", native, hf),
        "g": ("transformers batch 1 vs auto", hf, Side("hfauto", "hf", "batch_size=auto")),
    }
    chosen = []
    for key in configs:
        if key == "d" and not other:
            print("skipping d: no --other-python", file=sys.stderr)
            continue
        if key in table:
            chosen.append((key, *table[key]))
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="smollm2-135m,gemma3-270m")
    parser.add_argument("--per-task", type=int, default=100)
    parser.add_argument(
        "--per-subject", type=int, default=1, help="MMLU questions per subject (0: no MMLU)"
    )
    parser.add_argument("--other-python", default=None)
    parser.add_argument("--configs", default="a,b,c,d,f,g")
    parser.add_argument("--json", type=Path, default=None, help="Also write the rows here.")
    args = parser.parse_args()
    print(f"this build:  {system_info(sys.executable)}")
    if args.other_python:
        print(f"other build: {system_info(args.other_python)}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        suite = suite_file(args.per_task, args.per_subject, folder)
        for model in args.models.split(","):
            cache: dict[Side, tuple[Run, float]] = {}
            for key, label, left, right in pairs(args.configs.split(","), args.other_python):
                runs = []
                for side in (left, right):
                    if side not in cache:
                        out = folder / f"{model}-{len(cache)}"
                        cache[side] = run(side, model, suite, out)
                    runs.append(cache[side])
                n, flips, kl = movement(runs[0][0], runs[1][0])
                row = {
                    "model": model,
                    "config": f"({key}) {label}",
                    "n": n,
                    "flips": flips,
                    "share": flips / n if n else 0.0,
                    "kl": kl,
                    "seconds": [round(runs[0][1], 1), round(runs[1][1], 1)],
                }
                rows.append(row)
                kl_text = "-" if kl is None else f"{kl:.2g}"
                print(
                    f"| {model} | {row['config']} | {n} | {flips} ({row['share']:.1%}) | "
                    f"{kl_text} | {row['seconds'][0]} / {row['seconds'][1]} s |",
                    flush=True,
                )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
