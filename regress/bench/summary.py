"""The two ways speed figures are summarised: llama-bench's rates and vLLM's latencies.

llama-bench reports a test (pp512, tg128) as the mean over repetitions of each repetition's
tokens/s, with the sample standard deviation (n-1); vLLM's benchmark_serving reports each
latency metric as mean, standard deviation (numpy's, n), median and percentiles over requests.
Both conventions are kept as they are, so figures compare with what those tools print.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RateStat:
    """One llama-bench test: `n_prompt` tokens processed and/or `n_gen` generated."""

    test: str
    """llama-bench's name: pp512, tg128 (pp512+tg128 when both)."""
    n_prompt: int
    n_gen: int
    mean_ts: float
    """Mean over repetitions of (n_prompt + n_gen) / seconds."""
    sd_ts: float
    """Sample standard deviation (n-1) of the same rates; 0 for one repetition."""
    samples_ns: tuple[int, ...]
    """Wall time of each timed repetition, nanoseconds."""

    @property
    def samples_ts(self) -> tuple[float, ...]:
        """Tokens/s of each repetition."""
        return tuple((self.n_prompt + self.n_gen) * 1e9 / ns for ns in self.samples_ns)


def llama_bench_name(n_prompt: int, n_gen: int) -> str:
    """llama-bench's label of a test."""
    parts = ([f"pp{n_prompt}"] if n_prompt else []) + ([f"tg{n_gen}"] if n_gen else [])
    return "+".join(parts)


def rate_stat(n_prompt: int, n_gen: int, samples_ns: Sequence[int]) -> RateStat:
    """Summarise repetitions of one test the way llama-bench does."""
    rates = np.array([(n_prompt + n_gen) * 1e9 / ns for ns in samples_ns])
    sd = float(rates.std(ddof=1)) if len(rates) > 1 else 0.0
    return RateStat(
        llama_bench_name(n_prompt, n_gen),
        n_prompt,
        n_gen,
        float(rates.mean()),
        sd,
        tuple(samples_ns),
    )


PERCENTILES = (50, 95, 99)


@dataclass(frozen=True)
class Summary:
    """A latency metric over requests (or over inter-token gaps), in milliseconds."""

    n: int
    mean: float
    sd: float
    """numpy's standard deviation (divides by n), as vLLM prints it."""
    p50: float
    p95: float
    p99: float

    @classmethod
    def of(cls, values_ms: Sequence[float]) -> Summary:
        """Mean, sd and percentiles (numpy's linear interpolation, vLLM's choice)."""
        if not len(values_ms):
            nan = float("nan")
            return cls(0, nan, nan, nan, nan, nan)
        values = np.asarray(values_ms, dtype=float)
        p50, p95, p99 = (float(x) for x in np.percentile(values, PERCENTILES))
        return cls(len(values), float(values.mean()), float(values.std()), p50, p95, p99)
