"""Metrics over repeated samples of the same document: pass@k, pass^k, maj@k and their spread.

pass@k is the unbiased estimator of Chen et al. (2021, arXiv:2107.03374): with n samples of
which c are correct, 1 - C(n-c, k) / C(n, k), computed as a running product so that large n
never overflows. pass^k (tau-bench, Yao et al. 2024: all of k samples right, C(c, k) / C(n, k))
is the figure for a conversation that must work every time. Task-level figures average the
per-document values; their standard errors are clustered by document (Miller 2024,
arXiv:2411.00640): the samples of one document are not independent, so the spread that
counts is that of the per-document means.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Sequence

import numpy as np


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k samples drawn without replacement from n (c
    correct) is correct."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    # 1 - prod_{i = n-c+1}^{n} (1 - k / i): stable where the binomials would overflow.
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k (tau-bench, Yao et al. 2024): probability that all of k samples drawn without
    replacement from n (c correct) are correct, C(c, k) / C(n, k)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass^k needs 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if c < k:
        return 0.0
    # prod_{i=0}^{k-1} (c - i) / (n - i): stable where the binomials would overflow.
    return float(np.prod((c - np.arange(k)) / (n - np.arange(k))))


def majority(preds: Sequence[Hashable]) -> Hashable:
    """The most frequent prediction; a tie goes to the one seen first (lm-eval's
    majority_vote, which keeps Counter's insertion order)."""
    return Counter(preds).most_common(1)[0][0]


def sample_metrics(correct: Sequence[int], voted_right: bool) -> dict[str, float]:
    """A document's pass@1..pass@n from its n samples' 0/1 outcomes, and maj@n: whether the
    majority prediction is right (the task decides)."""
    n, c = len(correct), int(sum(correct))
    metrics = {f"pass@{k}": pass_at_k(n, c, k) for k in range(1, n + 1)}
    metrics[f"maj@{n}"] = float(voted_right)
    return metrics


def repeat_aggregate(per_doc: Sequence[dict[str, float]], correct: np.ndarray) -> dict[str, float]:
    """Task-level pass@k and maj@k (means over documents, document-clustered standard errors
    and 95% intervals), and the spread of accuracy across repeats."""
    out: dict[str, float] = {}
    for name in per_doc[0]:
        summary = clustered_mean([doc[name] for doc in per_doc])
        out[name] = summary["mean"]
        out[f"{name}_stderr"] = summary["stderr"]
        if name == "pass@1":
            out["pass@1_ci_low"], out["pass@1_ci_high"] = summary["ci_low"], summary["ci_high"]
    return out | repeat_spread(correct)


def clustered_mean(values: Sequence[float], alpha: float = 0.05) -> dict[str, float]:
    """Mean of per-document values, its document-clustered standard error and a t interval."""
    from scipy import stats  # a second to import: loaded by the runs that aggregate, not at start

    x = np.asarray(values, dtype=float)
    n = len(x)
    mean = float(x.mean()) if n else float("nan")
    se = float(x.std(ddof=1) / np.sqrt(n)) if n > 1 else 0.0
    half = float(stats.t.ppf(1 - alpha / 2, n - 1)) * se if n > 1 else 0.0
    return {"mean": mean, "stderr": se, "ci_low": mean - half, "ci_high": mean + half}


def repeat_spread(correct: np.ndarray) -> dict[str, float]:
    """Seed 002's variance score: the accuracy of each repeat (column) over the documents,
    their mean and standard deviation. `correct` is documents x repeats, 0/1."""
    per_repeat = correct.mean(axis=0)
    sd = float(per_repeat.std(ddof=1)) if per_repeat.size > 1 else 0.0
    return {"repeat_mean": float(per_repeat.mean()), "repeat_sd": sd}
