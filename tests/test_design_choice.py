"""The extendable design chosen on exact numbers (issue 50): the mixture e-process's law
against a brute force over every sequence of flips, its level at every example by seeded
simulation, and cells of docs/gate.md's design table recomputed (the early-spending design's
goal cell among them)."""

from __future__ import annotations

import itertools
import math
import re
from pathlib import Path

import numpy as np
import pytest

from regress.stats import (
    ALPHA,
    BETS,
    MAX_DROP,
    Side,
    design_point,
    eprocess_law,
    eprocess_pvalue,
    log_wealth,
)

DOCS = Path(__file__).resolve().parents[1] / "docs" / "gate.md"


def _factors(side: Side, margin: float) -> np.ndarray:
    """Per stake (rows) the wealth factor of d = +1, -1, 0 (columns), written out afresh."""
    rows = []
    for share in BETS:
        if side is Side.BEYOND:
            lam = share / (1 + margin)
            rows.append([1 + lam * (1 - margin), 1 + lam * (-1 - margin), 1 - lam * margin])
        else:
            lam = share / (1 - margin)
            rows.append([1 + lam * (margin - 1), 1 + lam * (margin + 1), 1 + lam * margin])
    return np.array(rows)


def test_the_law_is_the_sum_over_every_sequence_of_flips() -> None:
    """n = 10 examples looked at after 4, 7 and 10: every one of the 3^10 sequences weighed,
    its mixture wealth multiplied example by example, stopped at the first look that decides."""
    n, drop, flips, looks = 10, 0.1, 0.4, (0.4, 0.7, 1.0)
    margin, alpha = 0.05, 0.3  # a high alpha, so that ten examples can decide
    sequences = np.array(list(itertools.product(range(3), repeat=n)))  # 0: +1, 1: -1, 2: 0
    probs = np.array([(flips + drop) / 2, (flips - drop) / 2, 1 - flips])
    weight = np.prod(probs[sequences], axis=1)
    up, down = _factors(Side.BEYOND, margin), _factors(Side.WITHIN, margin)
    regressed = passed = 0.0
    alive = np.ones(len(sequences), bool)
    for size in (4, 7, 10):
        beyond = np.prod(up[:, sequences[:, :size]], axis=2).mean(axis=0)
        within = np.prod(down[:, sequences[:, :size]], axis=2).mean(axis=0)
        worse = alive & (beyond >= 1 / alpha)
        better = alive & ~worse & (within >= 1 / alpha)
        regressed += weight[worse].sum()
        passed += weight[better].sum()
        alive &= ~(worse | better)
    law = eprocess_law(n, drop, flips, looks, alpha, margin)
    assert law.regression == pytest.approx(regressed, abs=1e-12)
    assert law.passed == pytest.approx(passed, abs=1e-12)
    assert regressed > 0 and passed > 0


@pytest.mark.parametrize("side", list(Side))
def test_the_eprocess_holds_alpha_looked_at_after_every_example(side: Side) -> None:
    """Seeded simulation at the margin: wealth reaching 1/alpha at any of 1,000 examples, the
    worst case of looking, in at most alpha of runs (Ville's inequality)."""
    rng = np.random.default_rng(50)
    runs, n, flips = 2000, 1000, 0.05
    probs = [(flips + MAX_DROP) / 2, (flips - MAX_DROP) / 2, 1 - flips]
    steps = rng.multinomial(1, probs, size=(runs, n))
    b, c = np.cumsum(steps[:, :, 0], axis=1), np.cumsum(steps[:, :, 1], axis=1)
    sizes = np.arange(1, n + 1)
    wealth = np.stack(
        [log_wealth(b[:, i], c[:, i], int(sizes[i]), MAX_DROP, side) for i in range(n)], axis=1
    )
    crossed = float(np.mean(np.max(wealth, axis=1) >= math.log(1 / ALPHA)))
    assert crossed <= ALPHA
    # Its p-value is 1 / wealth at the counts.
    assert eprocess_pvalue(int(b[0, -1]), int(c[0, -1]), n, MAX_DROP, side) == pytest.approx(
        min(1.0, math.exp(-wealth[0, -1]))
    )


def _documented(design: str, n: int, flips: float, drop: float) -> list[str]:
    text = DOCS.read_text()
    row = re.search(
        rf"^\| {n:,} \| {flips:.0%} \| {drop * 100:.0f} \| {design} \| ([^|]+) \| ([^|]+) \| "
        rf"([^|]+) \| ([^|]+) \|$",
        text,
        re.M,
    )
    assert row is not None, (design, n, flips, drop)
    return [cell.strip() for cell in row.groups()]


@pytest.mark.parametrize(
    ("design", "n", "drop", "flips"),
    [
        ("obf-early", 500, MAX_DROP, 0.15),
        ("e-process", 500, MAX_DROP, 0.15),
        ("e-process", 500, 0.0, 0.01),
        ("obf-early", 500, 0.05, 0.05),
        # The goal's cell: a Q8_0-like candidate of a 2,000 pool, half the runs PASSed by 400.
        ("obf-early", 2000, 0.0, 0.01),
    ],
)
def test_the_docs_show_the_design_table_the_code_computes(
    design: str, n: int, drop: float, flips: float
) -> None:
    point = design_point(design, n, drop, flips)
    shown = _documented(design, n, flips, drop)
    quartiles = " / ".join(f"{q:,}" for q in point.quartiles)
    assert shown == [
        f"{point.regression:.4f}",
        f"{point.passed:.4f}",
        f"{point.expected_n:,.0f}",
        quartiles,
    ]
    if drop == MAX_DROP:
        assert max(point.regression, point.passed) <= ALPHA


def test_the_early_look_passes_a_q8_0_like_candidate_within_a_quarter_of_its_pool():
    """Issue 50's goal: an unchanged candidate flipping 1% of a 2,000 pool PASSes, in half the
    runs, by the first look of the early-spending design (400 examples); under O'Brien-Fleming
    alone its first look never decides, and half the runs need 1,000."""
    early = design_point("obf-early", 2000, 0.0, 0.01)
    obf = design_point("obf", 2000, 0.0, 0.01)
    assert early.quartiles[1] < 2000 / 4 <= obf.quartiles[1]
    assert early.passed > 0.99 and obf.quartiles[0] > 500
