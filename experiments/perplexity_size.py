"""Size and power of the perplexity unit's test (docs/results/perplexity-size.md).

    .venv/bin/python experiments/perplexity_size.py [--reps 2000] [--resamples 999] [--jobs 2]
        [--wikitext /work/shared/data/wikitext-2/wikitext-2-raw/wiki.test.raw]

Simulates per-document extra losses d_i (nats) and sizes w_i (words) and runs the tests of
`regress.stats.perplexity` on them: the sign-flip test (the gate's test before issue 25), the
bootstrap-t test, and the gate's test before issue 50, which rejected only when both did;
beside them the bootstrap-t that also resamples one unseen document in H0's favour, and the
gate's test now (the larger p of the sign-flip test and that one). Sizes are the share of runs
with p < 0.05 under five nulls and issue 50's rare-large-gain case, with zero corpus change,
for H0 "no increase" (`pvalue`) and, on separate runs simulated at exactly a 2% increase, for
H0 "increase <= 2%" (`margin_pvalue`). Power is for issue 12's constructed case (the longest
fifth of documents +6% per word, the rest -1%: +2.9% in the corpus with its lengths), and for
the same construction on WikiText-2's 62 test pages when --wikitext is readable. Pure numpy,
seeded: every cell draws from its own seed, so --jobs does not change a figure.
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from _common import cpu_flags

from regress.stats import BootstrapT, Side, SignFlip, corpus_shift
from regress.tasks.wikitext import count_words, split_pages

SEED = 20261202
ALPHA = 0.05
MARGIN = 0.02
TESTS = ("sign-flip", "bootstrap-t", "old gate", "bootstrap-t + unseen", "gate")
GAIN, GAINING = math.log(0.85), 0.05
"""Issue 50's rare large gains: 5% of documents 15% better per word."""

Draw = Callable[[np.random.Generator, int], tuple[np.ndarray, np.ndarray]]
"""(rng, documents) -> (weights, per-document extra loss with zero corpus change)."""


def lognormal_lengths(rng: np.random.Generator, n: int) -> np.ndarray:
    """Issue 12's document lengths: lognormal words (median 413; 10th-90th percentile 13x)."""
    return np.round(rng.lognormal(6, 1.0, n)) + 10


def symmetric(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A normal per-word change per document (sd 1%) and normal per-token noise."""
    w = lognormal_lengths(rng, n)
    return w, w * rng.normal(0, 0.01, n) + np.sqrt(w) * rng.normal(0, 0.05, n)


def quarter_worse(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Right-skewed (README's null): a quarter of documents 3% worse per word, the rest 1%
    better."""
    w = lognormal_lengths(rng, n)
    return w, w * (np.where(rng.random(n) < 0.25, 0.03, -0.01) + rng.normal(0, 0.003, n))


def quarter_better(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Left-skewed (issue 25's mirror): a quarter of documents 3% better per word, the rest 1%
    worse."""
    w = lognormal_lengths(rng, n)
    return w, w * (np.where(rng.random(n) < 0.25, -0.03, 0.01) + rng.normal(0, 0.003, n))


def heavy_tailed(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """t with 3 df, both for the per-word change per document and for per-token noise."""
    w = lognormal_lengths(rng, n)
    return w, w * rng.standard_t(3, n) * 0.01 + np.sqrt(w) * rng.standard_t(3, n) * 0.05


def length_heterogeneous(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Lengths log-uniform over 200-2000 words; the per-word change's sd grows as sqrt(length),
    so a document's noise grows as length^1.5 and the longest documents carry the variance."""
    w = np.round(np.exp(rng.uniform(math.log(200), math.log(2000), n)))
    return w, w * rng.normal(0, 0.01, n) * np.sqrt(w / 630)


def rare_gains(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Issue 50's case: 5% of documents 15% better per word, the rest 0.86% worse (zero
    expected change per word), normal noise (sd 0.3%)."""
    w = lognormal_lengths(rng, n)
    rest = -GAINING * GAIN / (1 - GAINING)
    per_word = np.where(rng.random(n) < GAINING, GAIN, rest) + rng.normal(0, 0.003, n)
    return w, w * per_word


NULLS: dict[str, Draw] = {
    "symmetric": symmetric,
    "right-skewed (quarter 3% worse)": quarter_worse,
    "left-skewed (quarter 3% better)": quarter_better,
    "heavy-tailed (t, 3 df)": heavy_tailed,
    "length-heterogeneous": length_heterogeneous,
    "rare large gains (5% 15% better)": rare_gains,
}


def longest_fifth(w: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Issue 12's constructed increase: the longest fifth +6% per word, the rest -1%."""
    factor = np.where(w >= np.quantile(w, 0.8), 1.06, 0.99)
    return w * (np.log(factor) + rng.normal(0, 0.005, w.size))


def pvalues(
    extra: np.ndarray, w: np.ndarray, nulls: tuple[float, ...], resamples: int, seed: int
) -> np.ndarray:
    """One-sided p of H0 "R <= null" by each test of TESTS (columns), for each null (rows).

    The old tests are built as `corpus_ratio_test` built them before issue 50 (the same
    generator, in the same order); the last two columns are the module's own `CorpusShift`,
    whose sign flips draw first from the same seed, so they are the old ones to the bit."""
    rng = np.random.default_rng(seed)
    ratio = float(extra.sum() / w.sum())
    residuals = extra - ratio * w
    se = math.sqrt(float(np.sum(residuals**2))) / float(w.sum())
    flips = SignFlip(extra, w, resamples, rng)
    boot = BootstrapT(ratio, se, residuals, w, resamples, rng)
    shift = corpus_shift(np.zeros(w.size), -extra, w, resamples, seed)
    unseen = shift.boots[Side.BEYOND]
    rows = []
    for null in nulls:
        flip, bt = flips.pvalue(null), boot.pvalue(null)
        rows.append((flip, bt, max(flip, bt), unseen.pvalue(null), shift.pvalue(null, Side.BEYOND)))
    return np.array(rows)


def cell(job: tuple[str, int, float, int, int, int]) -> tuple[str, int, float, np.ndarray, float]:
    """Rejection rates at ALPHA of the three tests over `reps` runs of one null at `n`
    documents, with the truth shifted to log(1 + shift) per word, against H0 R <= that; or,
    for the power case, against both H0 "no increase" and H0 "increase <= MARGIN". Also the
    runs' mean corpus change."""
    name, n, shift, reps, resamples, stream = job
    rng = np.random.default_rng([SEED, stream, n, round(shift * 1000)])
    nulls = (0.0, math.log1p(MARGIN)) if name == "power" else (math.log1p(shift),)
    rejected, change = np.zeros((len(nulls), len(TESTS))), 0.0
    for i in range(reps):
        if name == "power":
            w = lognormal_lengths(rng, n)
            extra = longest_fifth(w, rng)
        else:
            w, extra = NULLS[name](rng, n)
            extra = extra + math.log1p(shift) * w
        rejected += pvalues(extra, w, nulls, resamples, i) < ALPHA
        change += math.expm1(extra.sum() / w.sum()) / reps
    return name, n, shift, rejected / reps, change


def wikitext_power(path: Path, reps: int, resamples: int) -> tuple[float, np.ndarray] | None:
    """The constructed case on WikiText-2's own test-page lengths: mean corpus change, power."""
    if not path.is_file():
        return None
    w = np.array([count_words(page) for page in split_pages(path.read_text())], dtype=float)
    rng = np.random.default_rng([SEED, 99])
    rejected, change = np.zeros((2, len(TESTS))), 0.0
    for i in range(reps):
        extra = longest_fifth(w, rng)
        rejected += pvalues(extra, w, (0.0, math.log1p(MARGIN)), resamples, i) < ALPHA
        change += math.expm1(extra.sum() / w.sum()) / reps
    return change, rejected / reps


def by_gains(reps: int, resamples: int, n: int = 62) -> None:
    """Issue 50's case at the margin, split by how many documents gained: the share of runs
    with each count and the share of those the old and the new gate flag."""
    rng = np.random.default_rng([SEED, len(NULLS) + 1, n])
    runs, flagged = np.zeros(5), np.zeros((5, 2))
    for i in range(reps):
        w, extra = rare_gains(rng, n)
        gains = min(int(np.sum(extra / w < GAIN / 2)), 4)
        p = pvalues(extra + math.log1p(MARGIN) * w, w, (math.log1p(MARGIN),), resamples, i)[0]
        runs[gains] += 1
        flagged[gains] += p[[2, 4]] < ALPHA
    print(
        f"\nIssue 50's case at exactly +{MARGIN:.0%}, {n} documents, by documents gaining "
        f"({reps} runs, {resamples} resamples): share of runs flagged by each gate's margin test."
    )
    print(
        "| documents gaining | share of runs | old gate | gate | old gate's share | gate's share |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for gains in range(5):
        share, (old, new) = runs[gains] / reps, flagged[gains] / max(runs[gains], 1)
        label = f"{gains}+" if gains == 4 else str(gains)
        rates = f"{old:.3f} | {new:.3f} | {share * old:.3f} | {share * new:.3f}"
        print(f"| {label} | {share:.3f} | {rates} |")
    old, new = flagged.sum(axis=0) / reps
    print(f"| all | 1.000 | {old:.3f} | {new:.3f} | {old:.3f} | {new:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--resamples", type=int, default=999)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument(
        "--wikitext",
        type=Path,
        default=Path("/work/shared/data/wikitext-2/wikitext-2-raw/wiki.test.raw"),
    )
    parser.add_argument(
        "--gains-only", action="store_true", help="only issue 50's case split by gains"
    )
    args = parser.parse_args()
    started = time.perf_counter()
    if args.gains_only:
        by_gains(args.reps, args.resamples)
        print(f"\n{time.perf_counter() - started:.0f} s; CPU flags: {cpu_flags()}")
        return
    jobs = [
        (name, n, shift, args.reps, args.resamples, stream)
        for stream, name in enumerate(NULLS)
        for n in (62, 200)
        for shift in (0.0, MARGIN)
    ]
    jobs += [("power", n, 0.0, args.reps, args.resamples, len(NULLS)) for n in (62, 200)]
    with ProcessPoolExecutor(args.jobs) as pool:
        results = list(pool.map(cell, jobs))
    rates = {(name, n, shift): rate for name, n, shift, rate, _ in results}
    changes = {(name, n): change for name, n, _, _, change in results}

    se = math.sqrt(ALPHA * (1 - ALPHA) / args.reps)
    print(
        f"Size at alpha {ALPHA}: share of {args.reps} runs per cell with p < {ALPHA} "
        f"({args.resamples} resamples per test; Monte Carlo SE {se:.4f} at a true {ALPHA}).\n"
        f"p: H0 no increase, zero corpus change. margin p: H0 increase <= {MARGIN:.0%}, "
        f"simulated at exactly +{MARGIN:.0%}.\n"
    )
    header = " | ".join(f"{test} p | {test} margin p" for test in TESTS)
    print(f"| null | documents | {header} |")
    print("|---|---:|" + "---:|" * 2 * len(TESTS))
    for name in NULLS:
        for n in (62, 200):
            pair = zip(rates[name, n, 0.0][0], rates[name, n, MARGIN][0], strict=True)
            row = " | ".join(f"{p:.3f} | {m:.3f}" for p, m in pair)
            print(f"| {name} | {n} | {row} |")

    print(
        f"\nPower at alpha {ALPHA}: issue 12's longest fifth +6% per word, the rest -1% "
        f"(mean corpus change over the runs); p: H0 no increase, margin p: H0 <= {MARGIN:.0%}."
    )
    print(f"| lengths | documents | corpus change | {header} |")
    print("|---|---:|---:|" + "---:|" * 2 * len(TESTS))

    def power_row(label: str, n: int, change: float, power: np.ndarray) -> None:
        row = " | ".join(f"{p:.3f} | {m:.3f}" for p, m in zip(*power, strict=True))
        print(f"| {label} | {n} | {change:+.1%} | {row} |")

    for n in (62, 200):
        power_row("lognormal (issue 12)", n, changes["power", n], rates["power", n, 0.0])
    wikitext = wikitext_power(args.wikitext, args.reps, args.resamples)
    if wikitext is not None:
        power_row("WikiText-2 test pages", 62, *wikitext)
    by_gains(args.reps, args.resamples)
    print(
        f"\nIn the rare-large-gain case, runs with no gaining document at all (every document "
        f"worse, as under a uniform increase) are {(1 - GAINING) ** 62:.3f} at 62 documents; "
        f"with at most one, {(1 - GAINING) ** 62 + 62 * GAINING * (1 - GAINING) ** 61:.3f}."
    )
    print(
        f"\n{time.perf_counter() - started:.0f} s with {args.jobs} jobs; CPU flags: {cpu_flags()}"
    )


if __name__ == "__main__":
    main()
