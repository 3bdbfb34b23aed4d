"""Print docs/generation.md's coverage table of the per-turn accuracy interval clustered by
conversation: seeded simulation of conversations that each have their own difficulty
(probit shift, sd 1.5) and 2-4 checked turns, at 10-60 conversations and a true per-turn
accuracy of 30-95%, for the interval regress reports (a Wilson interval at the design
effect's effective n, t quantile; regress.tasks.conversation.cluster_interval) and the
percentile cluster bootstrap it replaced (2,000 resamples, scipy).

    .venv/bin/python experiments/cluster_coverage.py
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from regress.tasks.conversation import cluster_interval

TRUTHS = (0.3, 0.6, 0.85, 0.95)
CONVERSATIONS = (10, 20, 30, 60)
SPREAD = 1.5
"""sd of a conversation's probit difficulty: strong clustering (intra-class about 0.7)."""


def simulate(
    rng: np.random.Generator, truth: float, conversations: int
) -> tuple[np.ndarray, np.ndarray]:
    """Passed and checked turns of one simulated set, true pooled accuracy `truth`."""
    ease = rng.normal(0.0, SPREAD, size=conversations)
    p = stats.norm.cdf(stats.norm.ppf(truth) * np.sqrt(1 + SPREAD**2) + ease)
    checked = rng.integers(2, 5, size=conversations)
    return rng.binomial(checked, p).astype(float), checked.astype(float)


def coverage(truth: float, conversations: int, trials: int, seed: int = 50) -> float:
    """Share of seeded simulated sets whose reported interval holds the true accuracy."""
    rng = np.random.default_rng(seed)
    held = 0
    for _ in range(trials):
        passed, checked = simulate(rng, truth, conversations)
        low, high = cluster_interval(passed.tolist(), checked.tolist())
        held += low <= truth <= high
    return held / trials


def bootstrap_coverage(truth: float, conversations: int, trials: int, seed: int = 50) -> float:
    """The same sets under the percentile cluster bootstrap used before."""
    rng = np.random.default_rng(seed)
    held = 0
    for _ in range(trials):
        passed, checked = simulate(rng, truth, conversations)
        if np.ptp(passed / checked) == 0:
            rate = passed.sum() / checked.sum()
            held += rate == truth
            continue
        result = stats.bootstrap(
            (passed, checked),
            lambda p, c, axis: p.sum(axis=axis) / c.sum(axis=axis),
            paired=True,
            vectorized=True,
            method="percentile",
            n_resamples=2000,
            random_state=np.random.default_rng(0),
        )
        held += result.confidence_interval.low <= truth <= result.confidence_interval.high
    return held / trials


def main() -> None:
    print("| true accuracy | conversations | reported interval | percentile bootstrap (before) |")
    print("| ---: | ---: | ---: | ---: |")
    for truth in TRUTHS:
        for conversations in CONVERSATIONS:
            now = coverage(truth, conversations, 4000)
            before = bootstrap_coverage(truth, conversations, 1000)
            print(f"| {truth:.0%} | {conversations} | {now:.3f} | {before:.3f} |")


if __name__ == "__main__":
    main()
