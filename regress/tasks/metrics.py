"""Task- and group-level aggregation as lm-evaluation-harness computes it.

Means carry lm-eval's `mean_stderr` (sample standard deviation, ddof=1, over sqrt(n));
perplexities are corpus-level (`weighted_perplexity`: total log-likelihood over total words
or bytes), and a group's score is its subtasks' means weighted by size with a pooled stderr.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np


def mean_with_stderr(name: str, values: Sequence[float]) -> dict[str, float]:
    """`{name: mean, name_stderr: stdev(ddof=1)/sqrt(n)}`; stderr is NaN below two values."""
    if not values:
        return {name: math.nan, f"{name}_stderr": math.nan}
    array = np.asarray(values, dtype=float)
    stderr = float(array.std(ddof=1) / math.sqrt(len(array))) if len(array) > 1 else math.nan
    return {name: float(array.mean()), f"{name}_stderr": stderr}


def corpus_perplexity(
    logliks: Sequence[float], words: Sequence[int], n_bytes: Sequence[int]
) -> dict[str, float]:
    """word_perplexity, byte_perplexity and bits_per_byte over a whole corpus (NaN if empty)."""
    if not logliks:
        return dict.fromkeys(("word_perplexity", "byte_perplexity", "bits_per_byte"), math.nan)
    total = float(sum(logliks))
    return {
        "word_perplexity": math.exp(-total / sum(words)),
        "byte_perplexity": math.exp(-total / sum(n_bytes)),
        "bits_per_byte": -total / sum(n_bytes) / math.log(2),
    }


def group_aggregate(
    results: Mapping[str, Mapping[str, float]], sizes: Mapping[str, int], metric: str = "acc"
) -> dict[str, float]:
    """A group's `metric` as lm-eval reports it: subtask means weighted by their sizes, and
    the pooled stderr `sqrt(sum((n_i - 1) * se_i^2 * n_i) / (N - k) / N)`."""
    names = [name for name in results if metric in results[name]]
    if not names:
        return {}
    n = np.array([sizes[name] for name in names], dtype=float)
    means = np.array([results[name][metric] for name in names], dtype=float)
    value = float((means * n).sum() / n.sum())
    stderrs = np.array([results[name].get(f"{metric}_stderr", math.nan) for name in names])
    pooled_var = ((n - 1) * stderrs**2 * n).sum() / (n.sum() - len(n))
    return {metric: value, f"{metric}_stderr": float(math.sqrt(pooled_var / n.sum()))}
