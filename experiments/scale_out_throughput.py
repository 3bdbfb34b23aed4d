"""Examples per second of the packaged SmolLM2-135M on llama.cpp and hf, side by side, and the
n a 10-minute job buys (docs/results/scale-out.md, docs/scale-out.md).

    flock /tmp/regress-model.lock env OMP_WAIT_POLICY=PASSIVE \\
        .venv/bin/python experiments/scale_out_throughput.py [--arc 200] [--mmlu 1]

Two workloads a gate runs: ARC-Easy 0-shot (--arc questions) and MMLU 5-shot (--mmlu
questions per subject), from ../shared/data (or $REGRESS_DATA_DIR), without the result cache.
Each backend loads once (its load timed apart, as a CI job pays it once) with its default
settings, and the two alternate workload by workload, so a slow phase of the shared machine
hits both. Prints a Markdown table and the CPU flags.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from _common import cpu_flags

from regress.backends import load_backend
from regress.run.engine import TaskSpec, evaluate
from regress.tasks import get_tasks
from regress.tasks.base import DataSource

DATA = Path(os.environ.get("REGRESS_DATA_DIR", Path(__file__).resolve().parents[2] / "shared/data"))
BUDGET_S = 600
BACKENDS = ("llama_cpp", "hf")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arc", type=int, default=200, help="ARC-Easy questions")
    parser.add_argument("--mmlu", type=int, default=1, help="MMLU questions per subject")
    args = parser.parse_args()
    [arc] = get_tasks(["arc_easy"])
    workloads = {
        f"ARC-Easy 0-shot ({args.arc})": [TaskSpec(arc, 0, args.arc)],
        f"MMLU 5-shot ({args.mmlu}/subject)": [
            TaskSpec(t, 5, args.mmlu) for t in get_tasks(["mmlu"])
        ],
    }
    source = DataSource(data_dir=DATA)
    backends = {}
    for name in BACKENDS:
        start = time.perf_counter()
        backends[name] = (load_backend(name, "smollm2-135m"), time.perf_counter() - start)
    print("| backend | workload | examples | seconds | examples/s | n in 10 min | load s |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for label, specs in workloads.items():
        for name in BACKENDS:
            backend, load_s = backends[name]
            start = time.perf_counter()
            runs = evaluate(specs, backend, source)
            seconds = time.perf_counter() - start
            n = sum(len(r.records) for r in runs)
            rate = n / seconds
            print(
                f"| {name} | {label} | {n} | {seconds:.1f} | {rate:.2f} | "
                f"{int(rate * BUDGET_S):,} | {load_s:.1f} |",
                flush=True,
            )
    for backend, _ in backends.values():
        backend.close()
    print(f"\nCPU: {os.cpu_count()} cores, llama.cpp system info: {cpu_flags()}")


if __name__ == "__main__":
    main()
