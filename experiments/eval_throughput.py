"""Examples/s and tokens/s of `regress eval` on SmolLM2-135M (figures, not assertions).

    .venv/bin/python experiments/eval_throughput.py [--arc-limit 300] [--mmlu-limit 2]

ARC-Easy 0-shot and MMLU 5-shot (--mmlu-limit questions per subject) through the llama.cpp
backend, reading ../shared/data (or $REGRESS_DATA_DIR). Prints one line per workload.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from regress.backends.llama_cpp import LlamaCppBackend
from regress.backends.models import resolve_model_path
from regress.run.engine import TaskSpec, evaluate
from regress.tasks import get_tasks
from regress.tasks.base import DataSource

DATA = Path(os.environ.get("REGRESS_DATA_DIR", Path(__file__).resolve().parents[2] / "shared/data"))


def measure(label: str, specs: list[TaskSpec], model: Path) -> None:
    backend = LlamaCppBackend(str(model))
    start = time.perf_counter()
    runs = evaluate(specs, backend, DataSource(data_dir=DATA))
    elapsed = time.perf_counter() - start
    n = sum(len(r.records) for r in runs)
    prompt_tokens = sum(
        r.tokens["prompt"] + r.tokens["completion"] for t in runs for r in t.records
    )
    print(
        f"{label:<28} {n:>6} examples {elapsed:8.1f} s  {n / elapsed:7.2f} ex/s  "
        f"{backend.tokens_evaluated / elapsed:8.0f} evaluated tok/s  "
        f"(requested tokens {prompt_tokens}, evaluated {backend.tokens_evaluated}, "
        f"reuse saves {1 - backend.tokens_evaluated / max(prompt_tokens, 1):.0%})"
    )
    backend.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arc-limit", type=int, default=300)
    parser.add_argument("--mmlu-limit", type=int, default=2, help="questions per subject")
    args = parser.parse_args()
    model = resolve_model_path("smollm2-135m")
    [arc] = get_tasks(["arc_easy"])
    measure(f"arc_easy 0-shot (n={args.arc_limit})", [TaskSpec(arc, 0, args.arc_limit)], model)
    mmlu = [TaskSpec(t, 5, args.mmlu_limit) for t in get_tasks(["mmlu"])]
    measure(f"mmlu 5-shot ({args.mmlu_limit}/subject)", mmlu, model)


if __name__ == "__main__":
    main()
