"""Wall time of regress vs lm-evaluation-harness on the same model and documents.

Whole processes, one after the other, each from start to exit (interpreter, imports, model
load, evaluation, output): lm-eval 0.4.13 `hf`, `regress eval --backend hf`, the same with
`--model-args prefix_cache=true`, and `regress eval --backend llama_cpp`, on SmolLM2-135M
(float32 HF weights dequantised from the packaged GGUF; llama.cpp runs the GGUF itself).
Workload: MMLU 5-shot (--mmlu-per-subject questions of each subject, as in the proxy suite)
and the first --limit ARC-Easy test questions, the documents made identical as in
experiments/parity_lm_eval.py. Every hf run uses batch size 1; all use the same threads, the
same OpenMP waiting (regress's default, set when this script imports regress, unless you set
one) and no result cache. `--limit 0` leaves ARC-Easy out; `--runs` picks the regress runs.
Prints the llama.cpp build's CPU features with the table.

    .venv/bin/python experiments/vs_lm_eval.py [--mmlu-per-subject 5] [--limit 100] [--threads 2]
        [--runs hf,hf-prefix,llama_cpp]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from parity_lm_eval import (
    DATA,
    MAX_LENGTH,
    MODEL,
    Benchmark,
    agreement,
    benchmarks,
    run_lm_eval,
    write_lm_eval_tasks,
)

from regress.core.fingerprint import openmp_waiting
from regress.core.manifest import Run
from regress.core.store import read_run
from regress.tasks import resolve_source


def run_regress_cli(backend: str, model_args: str, suite: Path, out: Path, threads: int) -> float:
    """`regress eval` as a user runs it; returns the process's wall time."""
    command = [
        sys.executable, "-m", "regress.cli", "eval", "-m", MODEL, "--backend", backend,
        "--model-args", model_args, "--suite", str(suite), "--data-dir", str(DATA),
        "--save-run", str(out), "--no-cache",
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"regress eval failed:\n{done.stderr[-4000:]}")
    return elapsed


def measure(
    chosen: list[Benchmark], root: Path, threads: int, runs: list[str]
) -> dict[str, tuple[float, Run]]:
    """Wall time and run of lm-eval hf, then each regress run chosen, in that order."""
    include = write_lm_eval_tasks(chosen, resolve_source(DATA), root)
    suite = root / "suite.yaml"
    suite.write_text(
        "name: vs-lm-eval\ntasks:\n"
        + "".join(
            f"  - {{task: {b.name}, num_fewshot: {b.num_fewshot}, limit: {b.limit}}}\n"
            for b in chosen
        )
    )
    lm, lm_s = run_lm_eval(chosen, include, root / "lm-eval", threads)
    timings: dict[str, tuple[float, Run]] = {"lm-eval hf": (lm_s, lm)}
    hf_args = f"dtype=float32,max_length={MAX_LENGTH},threads={threads}"
    configurations = {
        "hf": ("regress hf", "hf", hf_args),
        "hf-prefix": ("regress hf prefix_cache", "hf", f"{hf_args},prefix_cache=true"),
        "llama_cpp": ("regress llama.cpp", "llama_cpp", f"n_ctx={MAX_LENGTH},threads={threads}"),
    }
    for label, backend, model_args in (configurations[r] for r in runs):
        out = root / label.replace(" ", "-")
        seconds = run_regress_cli(backend, model_args, suite, out, threads)
        timings[label] = (seconds, read_run(out))
    return timings


def main() -> None:
    """Time the runs and print them side by side."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mmlu-per-subject", type=int, default=5)
    parser.add_argument("--limit", type=int, default=100, help="ARC-Easy test questions")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--runs", default="hf,hf-prefix,llama_cpp", help="regress runs to time")
    args = parser.parse_args()
    runs = args.runs.split(",")
    if unknown := sorted(set(runs) - {"hf", "hf-prefix", "llama_cpp"}):
        raise SystemExit(f"unknown run(s) {unknown}; choose from hf, hf-prefix, llama_cpp")
    chosen = benchmarks(
        args.mmlu_per_subject, args.limit, ["mmlu", "arc_easy"] if args.limit else ["mmlu"]
    )
    tasks = [t for b in chosen for t in b.tasks]
    with tempfile.TemporaryDirectory(prefix="vs-lm-eval-") as scratch:
        timings = measure(chosen, Path(scratch), args.threads, runs)
    lm_s, lm = timings["lm-eval hf"]
    n = sum(len(lm.records[t]) for t in tasks)
    arc = f" + ARC-Easy {args.limit}" if args.limit else ""
    print(
        f"## Wall time, {n} examples (MMLU 5-shot {args.mmlu_per_subject}/subject{arc}), "
        f"{MODEL}, {args.threads} threads\n"
    )
    info = "import llama_cpp; print(llama_cpp.llama_print_system_info().decode())"
    flags = subprocess.run([sys.executable, "-c", info], capture_output=True, text=True)
    print(f"llama.cpp: {flags.stdout.strip()}\nOpenMP waiting: {openmp_waiting()}\n")
    print(
        "| run | wall time | examples/s | speed-up over lm-eval | same predictions as lm-eval hf |"
    )
    print("|---|---|---|---|---|")
    for label, (seconds, run) in timings.items():
        same = agreement(lm, run, tasks)
        shared = f"{same.same_pred}/{same.n} ({same.same_pred / same.n:.1%})"
        print(
            f"| {label} | {seconds:.1f} s | {n / seconds:.2f} | {lm_s / seconds:.2f}x | "
            f"{'(reference)' if run is lm else shared} |"
        )


if __name__ == "__main__":
    main()
