"""Tokens evaluated vs the suite's unique-token floor, and achieved vs peak tokens/s.

    .venv/bin/python experiments/token_floor.py [--mmlu-limit 2] [--arc-limit 100]

The floor is the number of nodes in a trie of every request's model input: no scheduler can
evaluate fewer tokens, since each distinct prefix must be run once. Naive is what scoring every
request from scratch costs. Peak is the backend's prompt throughput on one long batch, measured
in the same run (the machine is shared, so only same-run ratios mean anything).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from regress.backends.llama_cpp import LlamaCppBackend
from regress.backends.models import resolve_model_path
from regress.core.requests import LoglikelihoodRequest
from regress.run.engine import TaskSpec, prepare
from regress.tasks import get_tasks
from regress.tasks.base import DataSource

DATA = Path(os.environ.get("REGRESS_DATA_DIR", Path(__file__).resolve().parents[2] / "shared/data"))


def trie_size(sequences: list[list[int]]) -> int:
    """Distinct prefixes over all sequences = tokens a perfect prefix cache evaluates."""
    root: dict[int, dict] = {}
    nodes = 0
    for seq in sequences:
        node = root
        for token in seq:
            if token not in node:
                node[token] = {}
                nodes += 1
            node = node[token]
    return nodes


def peak_tokens_per_s(backend: LlamaCppBackend) -> float:
    ids = backend._encode("The history of the region is long and varied. " * 80)[:512]
    start = time.perf_counter()
    backend._decode(ids, 0, {len(ids) - 1})
    return len(ids) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--mmlu-limit", type=int, default=2, help="5-shot questions per subject (0: all)"
    )
    parser.add_argument("--arc-limit", type=int, default=100)
    parser.add_argument(
        "--floor-only",
        action="store_true",
        help="count tokens without running the model (e.g. full MMLU: --mmlu-limit 0)",
    )
    args = parser.parse_args()
    mmlu_limit = args.mmlu_limit or None
    specs = [TaskSpec(t, 5, mmlu_limit) for t in get_tasks(["mmlu"])]
    if args.arc_limit:
        specs.append(TaskSpec(get_tasks(["arc_easy"])[0], 0, args.arc_limit))
    prepared = prepare(specs, DataSource(data_dir=DATA))
    requests = [r for _, exs in prepared for e in exs for r in e.requests]
    assert all(isinstance(r, LoglikelihoodRequest) for r in requests)
    backend = LlamaCppBackend(str(resolve_model_path("smollm2-135m")))
    windows = [backend._window(r).input_ids for r in requests]
    floor, naive = trie_size(windows), sum(len(w) for w in windows)
    n_examples = sum(len(exs) for _, exs in prepared)
    print(
        f"suite: MMLU 5-shot {mmlu_limit or 'all'}/subject + ARC-Easy {args.arc_limit}: "
        f"{n_examples} examples, {len(requests)} requests"
    )
    print(f"naive tokens (every request from scratch) {naive:>10,}")
    print(f"unique-token floor (trie of inputs)       {floor:>10,}")
    if args.floor_only:
        return
    peak = peak_tokens_per_s(backend)
    backend.tokens_evaluated = 0
    backend._llm.n_tokens = 0
    start = time.perf_counter()
    backend.loglikelihood(requests)
    elapsed = time.perf_counter() - start
    done = backend.tokens_evaluated
    print(
        f"tokens evaluated by regress               {done:>10,}  = {done / floor:.3f}x floor, "
        f"{naive / done:.1f}x fewer than naive"
    )
    print(
        f"achieved {done / elapsed:,.0f} tok/s vs peak prompt throughput {peak:,.0f} tok/s "
        f"({done / elapsed / peak:.0%}); wall {elapsed:.1f} s"
    )
    backend.close()


if __name__ == "__main__":
    main()
