"""llama-bench's micro-benchmarks: prompt processing (ppN) and generation (tgN).

As llama-bench does it: the KV cache is emptied before each repetition; a prompt test decodes
N random tokens in n_batch chunks; a generation test decodes N random tokens one at a time,
each waited for (no sampler is timed); one untimed warm-up (the prompt and one generated
token) comes before the timed repetitions; the result is the mean of the per-repetition
rates with their n-1 standard deviation.
"""

from __future__ import annotations

import time
from typing import Protocol

import numpy as np

from regress.bench.summary import RateStat, rate_stat


class MicroBackend(Protocol):
    """What a backend offers for micro-benchmarks (llama.cpp in-process)."""

    n_vocab: int

    def clear_cache(self) -> None: ...

    def process_prompt(self, tokens: list[int]) -> None: ...

    def generate_tokens(self, tokens: list[int], n_past: int = 0) -> None: ...


def micro_bench(
    backend: MicroBackend,
    n_prompt: int,
    n_gen: int,
    runs: int,
    warmup: int,
    rng: np.random.Generator,
) -> RateStat:
    """Time `runs` repetitions of one test after `warmup` untimed ones."""

    def tokens(n: int) -> list[int]:
        return [int(t) for t in rng.integers(0, backend.n_vocab, n)]

    for _ in range(warmup):
        backend.clear_cache()
        if n_prompt:
            backend.process_prompt(tokens(n_prompt))
        if n_gen:
            backend.generate_tokens(tokens(1), n_past=n_prompt)
    samples = []
    for _ in range(runs):
        prompt, gen = tokens(n_prompt), tokens(n_gen)
        backend.clear_cache()
        start = time.perf_counter_ns()
        if n_prompt:
            backend.process_prompt(prompt)
        if n_gen:
            backend.generate_tokens(gen, n_past=n_prompt)
        samples.append(time.perf_counter_ns() - start)
    backend.clear_cache()
    return rate_stat(n_prompt, n_gen, samples)
