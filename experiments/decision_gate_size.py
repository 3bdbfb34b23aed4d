"""Size of the decision gates' tests of per-example rates and grades (docs/gate.md#decision-gates).

    .venv/bin/python experiments/decision_gate_size.py [--runs 20000]

Simulates candidates whose true rate or mean grade is exactly a gate's bound, under skewed
per-example distributions, and counts the runs in which each one-sided test rejects at 0.05:
"shown met" and "shown failing" each should happen in at most 5% of them. The one-sided
t-test the gates used before (constant values: p = 1, as the gate had it) against the betting
test they use now (regress.stats.bounded_mean_pvalue, on the range the gate gives it). Pure
numpy, seeded per cell; prints the markdown table docs/gate.md carries, which
tests/test_stats_bounded_mean.py recomputes.
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import stats

from regress.stats import Direction, bounded_mean_pvalue

SEED = 20261206
ALPHA = 0.05
NS = (50, 100, 300)
RUNS = 20_000

Draw = Callable[[np.random.Generator, int, int], np.ndarray]
"""(rng, runs, n) -> runs x n per-example values whose mean is the gate's bound."""


@dataclass(frozen=True)
class Null:
    """A gate and a distribution of per-example values whose mean is exactly its bound."""

    gate: str
    values: str
    draw: Draw
    bound: float
    at_least: bool
    """The gate is `>= bound` (else `<=`)."""
    low: float
    high: float
    """The range the gate gives the betting test."""


def _grades(p: dict[int, float]) -> Draw:
    return lambda rng, runs, n: rng.choice(list(p), p=list(p.values()), size=(runs, n)).astype(
        float
    )


NULLS = (
    Null(
        "refusal_rate <= 2%",
        "5 samples per example, each refused with p 2%",
        lambda rng, runs, n: rng.binomial(5, 0.02, size=(runs, n)) / 5,
        0.02,
        False,
        0.0,
        1.0,
    ),
    Null(
        "refusal_rate <= 2%",
        "5 samples per example; a tenth of examples refuse 20%, the rest never",
        lambda rng, runs, n: rng.binomial(5, np.where(rng.random((runs, n)) < 0.1, 0.2, 0.0)) / 5,
        0.02,
        False,
        0.0,
        1.0,
    ),
    Null(
        "quality >= 4.0",
        "1-5 grades 1 / 4 / 5 with p 0.2 / 0.2 / 0.6",
        _grades({1: 0.2, 4: 0.2, 5: 0.6}),
        4.0,
        True,
        1.0,
        10.0,
    ),  # fmt: skip
    Null(
        "quality >= 4.0",
        "1-5 grades 2 / 4 / 5 with p 0.05 / 0.85 / 0.10",
        _grades({2: 0.05, 4: 0.85, 5: 0.10}),
        4.0,
        True,
        1.0,
        10.0,
    ),  # fmt: skip
)


@dataclass(frozen=True)
class Size:
    """Share of runs at the bound in which each test showed the gate met or failing."""

    null: Null
    n: int
    t_met: float
    t_failing: float
    betting_met: float
    betting_failing: float


def _t_pvalue(x: np.ndarray, bound: float, alternative: str) -> np.ndarray:
    """The one-sided t-test the gate used, constant samples p = 1."""
    constant = np.all(x == x[:, :1], axis=1)
    # Near-constant rows warn of precision loss; the constant ones are replaced below.
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        p = stats.ttest_1samp(x, bound, axis=1, alternative=alternative).pvalue
    return np.where(constant, 1.0, p)


def size(null: Null, n: int, runs: int = RUNS) -> Size:
    """Both tests' rejection rates at the bound, from seed SEED + the cell's index."""
    cell = NULLS.index(null) * 100 + NS.index(n) if n in NS else NULLS.index(null) * 100 + 99
    rng = np.random.default_rng(SEED + cell)
    x = null.draw(rng, runs, n)
    # "Met" shows the mean on the bound's good side, "failing" on its bad side.
    good, bad = ("greater", "less") if null.at_least else ("less", "greater")
    direction = {"greater": Direction.ABOVE, "less": Direction.BELOW}

    def betting(alternative: str) -> float:
        p = bounded_mean_pvalue(x, null.bound, direction[alternative], null.low, null.high)
        return float(np.mean(p < ALPHA))

    return Size(
        null,
        n,
        float(np.mean(_t_pvalue(x, null.bound, good) < ALPHA)),
        float(np.mean(_t_pvalue(x, null.bound, bad) < ALPHA)),
        betting(good),
        betting(bad),
    )


HEADER = (
    "| gate | per-example values at the bound | n | t-test: met / failing | "
    "betting: met / failing |\n| --- | --- | ---: | ---: | ---: |"
)


def row(s: Size) -> str:
    """One markdown row of docs/gate.md's size table."""
    return (
        f"| `{s.null.gate}` | {s.null.values} | {s.n} | {s.t_met:.3f} / {s.t_failing:.3f} | "
        f"{s.betting_met:.3f} / {s.betting_failing:.3f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=RUNS)
    runs = parser.parse_args().runs
    print(HEADER)
    for null in NULLS:
        for n in NS:
            print(row(size(null, n, runs)))


if __name__ == "__main__":
    main()
