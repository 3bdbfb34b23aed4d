"""What a competing CPU-bound process costs a run, per OpenMP wait policy and thread count.

    .venv/bin/python experiments/shared_cpu.py [--limit 40] [--model smollm2-135m]

Runs `regress eval -t builtin_arithmetic --limit N --no-cache` one after the other: on a
quiet machine, then beside one busy-looping process, under each setting (OMP_WAIT_POLICY
ACTIVE, the spinning libgomp default, and PASSIVE, regress's default; 2 threads and 1
thread). Prints wall seconds and the slowdown against the quiet run of the same thread
count, with the llama.cpp build's CPU features.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def busy() -> None:
    """A CPU-bound competitor: spins until terminated."""
    x = 0
    while True:
        x = (x * 31 + 7) % 1_000_003


def timed(limit: int, model: str, policy: str, threads: int) -> float:
    """Wall seconds of one eval run under the given wait policy and thread count."""
    command = [sys.executable, "-m", "regress.cli", "eval", "-m", model]
    command += ["-t", "builtin_arithmetic", "--limit", str(limit), "--no-cache"]
    command += ["--model-args", f"threads={threads}"]
    env = {**os.environ, "OMP_WAIT_POLICY": policy}
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, env=env, cwd=REPO)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=40)
    parser.add_argument("--model", default="smollm2-135m")
    args = parser.parse_args()
    info = subprocess.run(
        [
            sys.executable,
            "-c",
            "import llama_cpp; print(llama_cpp.llama_print_system_info().decode())",
        ],
        capture_output=True,
        text=True,
    ).stdout.strip()
    print(f"llama.cpp: {info}\ncores: {os.cpu_count()}")
    quiet = {t: timed(args.limit, args.model, "PASSIVE", t) for t in (2, 1)}
    for threads, seconds in quiet.items():
        print(f"quiet          threads={threads}: {seconds:6.1f} s")
    for policy in ("ACTIVE", "PASSIVE"):
        for threads in (2, 1):
            competitor = multiprocessing.Process(target=busy, daemon=True)
            competitor.start()
            try:
                seconds = timed(args.limit, args.model, policy, threads)
            finally:
                competitor.terminate()
                competitor.join()
            print(
                f"busy {policy:<8}  threads={threads}: {seconds:6.1f} s  "
                f"{seconds / quiet[threads]:5.2f}x its quiet run, "
                f"{seconds / quiet[2]:5.2f}x quiet 2 threads"
            )


if __name__ == "__main__":
    main()
