"""Operating characteristics of the gate: how often each verdict comes, by true drop.

docs/gate.md shows three tables and a sentence made here; a test fails when they differ from
what the code computes. Regenerate them with `python -m regress.stats.operating`.

One accuracy unit of n paired examples, with a true drop δ and a share ψ of flipped examples:
m = b + c ~ Binomial(n, ψ) and b | m ~ Binomial(m, (ψ + δ) / 2ψ). The margin and PASS tests'
rejection regions come from the exact tests themselves (regress.stats.margin), and every
probability is a sum over (b, m): exact, not simulated.

- `size_grid`: P(REGRESSION) and P(PASS) when the true drop is exactly max_drop, over n and
  the discordance: the guarantee that neither is shown falsely more often than alpha.
- `verdict_table`: P(REGRESSION) / P(INCONCLUSIVE) / P(PASS) at true drops of 0-5 points, for
  each rule and each `pass_requires`.
- `sequential_oc`: one unit under the sequential gate (regress.checks.sequential), seeded
  simulation of the same exact tests at each look's nominal level, beside the fixed design.
- `stopping_law`: the same unit's verdicts and examples used, exactly: the paired counts'
  distribution carried look to look, what each look's exact tests decide taken out (what
  `regress plan` and the `no_early_stop` warning read, instead of a normal approximation).
- `family_false_alarms`: the whole gate's chance of any REGRESSION when nothing changed (or
  every rule sits at its threshold), three units, a failure class and a golden set in one
  Holm family. Seeded simulation of the gate's own tests.
- `creep_chains`: the creep guard (docs/gate.md#creep-guard) over successive promotions,
  each a little worse than the last: how often the gate against the last baseline alone
  passes every step, and how soon the gate with the anchor's rows in its family stops the
  slide; and, with every true change at its threshold, its chance of any REGRESSION. Seeded
  simulation of the gate's own exact tests.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import signal, special
from scipy import stats as sps

from regress.stats.decision import PassRequires, Rule, inconclusive, regression
from regress.stats.margin import Side, margin_pvalue, margin_rejects, rejection_edges
from regress.stats.paired import (
    SEED,
    Test,
    adjust_pvalues,
    mcnemar_pvalue,
    paired_mean_test,
    tango_score,
)
from regress.stats.spending import SequentialDesign, cut

ALPHA = 0.05
MAX_DROP = 0.02
DISCORDANCE = 0.15
"""About what SmolLM2's Q4_0 and Q2_K requantizations flip (15.7-16.6% of ARC-Easy:
docs/results/proxy-efficiency.md)."""
SIZE_NS = (100, 200, 300, 500, 1000)
SIZE_DISCORDANCES = (0.02, 0.03, 0.05, 0.10, 0.15, 0.25, 0.50)
"""A drop of max_drop needs at least max_drop of the answers to flip: 2% is the lowest."""
VERDICT_NS = (100, 300, 1000, 3000)
DROPS = (0.0, 0.01, 0.02, 0.03, 0.05)
CI_ALPHA = 0.05
"""The reports' interval is 95%: `no_evidence_of_harm`'s INCONCLUSIVE asks whether it reaches
beyond max_drop."""
SPREAD = 9
"""Standard deviations of m kept around each discordance: what lies beyond weighs < 1e-18."""


@dataclass(frozen=True)
class SizePoint:
    """How often one test rejects when the true drop is exactly max_drop."""

    side: Side
    """BEYOND: a false REGRESSION. WITHIN: a false PASS."""
    n: int
    discordance: float
    probability: float


@dataclass(frozen=True)
class VerdictPoint:
    """The verdict probabilities of one unit at one true drop."""

    rule: Rule
    pass_requires: PassRequires
    n: int
    drop: float
    regression: float
    inconclusive: float
    passed: float


@dataclass(frozen=True)
class FamilyRate:
    """How often a whole gate run falsely fails, in seeded simulated runs."""

    at_threshold: bool
    """False: nothing changed. True: every rule's true change sits exactly at its threshold."""
    runs: int
    regression: float
    """Share of runs in which any rule, after the one Holm family, failed the gate."""
    se: float


def _m_range(n: int, low: float, high: float) -> range:
    """The m = b + c that discordances in [low, high] produce with any weight."""
    spread = SPREAD * math.sqrt(n * 0.25)
    return range(max(0, math.floor(n * low - spread)), min(n, math.ceil(n * high + spread)) + 1)


def _weights(n: int, m: range, drop: float, discordance: float) -> np.ndarray:
    """P(b, m) on the grid b = 0..max(m), rows m: zero where b > m."""
    ms = np.asarray(m)[:, None]
    b = np.arange(ms.max() + 1)[None, :]
    share = (discordance + drop) / (2 * discordance)
    return np.asarray(sps.binom.pmf(ms, n, discordance) * sps.binom.pmf(b, ms, share))


def size_grid(
    ns: Sequence[int] = SIZE_NS, discordances: Sequence[float] = SIZE_DISCORDANCES
) -> list[SizePoint]:
    """P(REGRESSION) and P(PASS) at a true drop of exactly max_drop, by exact enumeration."""
    points = []
    for n in ns:
        m = _m_range(n, min(discordances), max(discordances))
        ms = np.asarray(m)
        for side in Side:
            edges = rejection_edges(n, MAX_DROP, ALPHA, side, m)
            for discordance in discordances:
                share = (discordance + MAX_DROP) / (2 * discordance)
                weight = sps.binom.pmf(ms, n, discordance)
                if side is Side.BEYOND:
                    inside = sps.binom.sf(edges - 1, ms, share)
                else:
                    inside = sps.binom.cdf(edges, ms, share)
                probability = float(np.sum(weight * inside))
                points.append(SizePoint(side, n, discordance, probability))
    return points


def verdicts(
    b: np.ndarray, c: np.ndarray, n: int, rule: Rule, pass_requires: PassRequires
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """REGRESSION, INCONCLUSIVE and PASS masks of single accuracy units with counts (b, c) of
    n, as `regress.gate.compare` judges them (one unit: nothing to correct)."""
    b, c = np.asarray(b), np.asarray(c)
    regressed = regressions(b, c, n, rule)
    change_p = np.asarray(mcnemar_pvalue(b, c, Test.MIDP))
    if pass_requires is PassRequires.EVIDENCE:
        m = b + c
        low, high = int(m.min()), int(m.max())
        undecided = ~regressed & (b > _edges(n, Side.WITHIN, low, high)[m - low])
    else:
        # The 95% Tango interval reaches beyond max_drop exactly when the score statistic at
        # Δ = -max_drop is below z(0.975); only "beyond or not" matters here.
        reaches = tango_score(-MAX_DROP, b, c, n) < sps.norm.isf(CI_ALPHA / 2)
        upper = np.where(reaches, 1.0, 0.0)
        undecided = inconclusive(regressed, ALPHA, change_p, upper, MAX_DROP)
    return regressed, undecided, ~regressed & ~undecided


def regressions(b: np.ndarray, c: np.ndarray, n: int, rule: Rule) -> np.ndarray:
    """The REGRESSION mask of single accuracy units with counts (b, c) of n, as `verdicts`
    (and `regress.gate.compare`) judge them, without the PASS test's rejection region."""
    b, c = np.asarray(b), np.asarray(c)
    if rule is Rule.MARGIN:
        m = b + c
        low, high = int(m.min()), int(m.max())
        rule_p = np.where(b >= _edges(n, Side.BEYOND, low, high)[m - low], 0.0, 1.0)
    else:
        rule_p = np.asarray(mcnemar_pvalue(b, c, Test.MIDP))
    return np.asarray(regression(rule, ALPHA, rule_p, (b - c) / n, MAX_DROP))


def verdict_table(
    ns: Sequence[int] = VERDICT_NS, drops: Sequence[float] = DROPS
) -> list[VerdictPoint]:
    """Each verdict's probability for each rule, pass_requires, n and true drop, exactly."""
    points = []
    for n in ns:
        m = _m_range(n, DISCORDANCE, DISCORDANCE)
        ms = np.asarray(m)[:, None]
        b = np.broadcast_to(np.arange(ms.max() + 1)[None, :], (len(m), ms.max() + 1))
        possible = b <= ms
        b, c = b[possible], np.broadcast_to(ms, possible.shape)[possible] - b[possible]
        weights = {drop: _weights(n, m, drop, DISCORDANCE)[possible] for drop in drops}
        for rule in Rule:
            for pass_requires in PassRequires:
                masks = verdicts(b, c, n, rule, pass_requires)
                for drop in drops:
                    regressed, undecided, passed = (float(weights[drop][x].sum()) for x in masks)
                    points.append(
                        VerdictPoint(rule, pass_requires, n, drop, regressed, undecided, passed)
                    )
    return points


@functools.lru_cache(maxsize=64)
def _edges(n: int, side: Side, low: int, high: int) -> np.ndarray:
    """The unit tests' rejection edges for m in [low, high], once per table."""
    return rejection_edges(n, MAX_DROP, ALPHA, side, range(low, high + 1))


@functools.lru_cache(maxsize=100_000)
def _exact(b: int, c: int, n: int, margin: float) -> float:
    return margin_pvalue(b, c, n, margin, Side.BEYOND)


def family_false_alarms(
    at_threshold: bool = False, runs: int = 2000, seed: int = SEED
) -> FamilyRate:
    """P(any REGRESSION) of whole simulated gate runs: 3 accuracy units of n = 300 (15% of
    answers flipping), one failure class's rate on 100 generated documents (policy
    max_failure_increase 0.05) and a golden set of 50 items at 60% passing (5% flipping), all
    in one Holm family, each tested as the gate tests it. `at_threshold` puts every true
    change exactly at its threshold: the worst case the family must hold."""
    rng = np.random.default_rng(seed)
    drop, increase, golden_share = (MAX_DROP, 0.05, 0.05 * 0.6) if at_threshold else (0, 0, 0)
    failed = 0
    for _ in range(runs):
        pvalues = []
        for _unit in range(3):
            b, c, _rest = rng.multinomial(
                300, [(DISCORDANCE + drop) / 2, (DISCORDANCE - drop) / 2, 1 - DISCORDANCE]
            )
            pvalues.append(_exact(int(b), int(c), 300, MAX_DROP))
        # A failure class: each document's share of 4 generations in it, before and after.
        before = rng.binomial(4, 0.2, size=100) / 4
        after = rng.binomial(4, 0.2 + increase, size=100) / 4
        rates = paired_mean_test(1 - before, 1 - after, margin=0.05)
        pvalues.append(rates.margin_pvalue)
        # The golden set's relative drop, tested as an absolute drop of 5% of its rate.
        right = rng.random(50) < 0.6
        lose = rng.random(50) < (0.05 + golden_share) / 2 / 0.6
        gain = rng.random(50) < (0.05 - golden_share) / 2 / 0.4
        b, c = int(np.sum(right & lose)), int(np.sum(~right & gain))
        pvalues.append(_exact(b, c, 50, 0.05 * float(right.mean())))
        failed += min(adjust_pvalues(pvalues)) < ALPHA
    rate = failed / runs
    return FamilyRate(at_threshold, runs, rate, math.sqrt(rate * (1 - rate) / runs))


CREEP_N = 2000
CREEP_STEP_DISCORDANCE = 0.012
"""The share of answers SmolLM2's Q8_0 requantization flipped (1.2% of 300 ARC-Easy answers,
docs/results/sequential-gate.md): the gentlest real change, each step of a slow slide."""
CREEP_STEP_DROP = 0.008
MAX_CUMULATIVE_DROP = 0.03


@dataclass(frozen=True)
class CreepPoint:
    """One promotion step of simulated chains: what the gate said with and without the anchor."""

    step: int
    cumulative_drop: float
    """The true drop since the anchor after this step."""
    step_passed: float
    """P(PASS) of the gate against the last baseline alone (one unit)."""
    every_step_passed: float
    """P(every step so far PASSED that gate): a team promoting on PASS got here."""
    regression: float
    """P(REGRESSION) of the gate with the creep guard (both rows in one Holm family)."""
    stopped: float
    """P(the guarded gate said REGRESSION at this step or an earlier one)."""


def creep_chains(
    chains: int = 100,
    steps: int = 10,
    drop: float = CREEP_STEP_DROP,
    discordance: float = CREEP_STEP_DISCORDANCE,
    n: int = CREEP_N,
    seed: int = SEED,
) -> list[CreepPoint]:
    """Chains of `steps` promotions from an anchor at 60% accuracy, each step dropping `drop`
    with `discordance` of answers flipping, judged as `creep_verdicts` judges them."""
    rng = np.random.default_rng(seed)
    table = _anchored(rng, chains, n)
    points = []
    passed_all = np.ones(chains, bool)
    stopped = np.zeros(chains, bool)
    for step in range(1, steps + 1):
        step_counts, table = _promote(rng, table, drop, discordance, n)
        alone = np.array(
            [_passes(b, c, n, MAX_DROP, ALPHA) for b, c in zip(*step_counts, strict=True)]
        )
        regressed = creep_verdicts(step_counts, (table[1, 0], table[0, 1]), n)[0]
        passed_all &= alone
        stopped |= regressed
        points.append(
            CreepPoint(
                step,
                step * drop,
                float(alone.mean()),
                float(passed_all.mean()),
                float(regressed.mean()),
                float(stopped.mean()),
            )
        )
    return points


def creep_false_alarms(
    at_threshold: bool, runs: int = 400, n: int = CREEP_N, seed: int = SEED
) -> FamilyRate:
    """P(REGRESSION) of the guarded gate when nothing changed since the anchor, or when the
    candidate is exactly max_drop below its baseline and exactly max_cumulative_drop below
    the anchor (the baseline sits in between): the worst case both rows' alpha must hold."""
    rng = np.random.default_rng(seed)
    first, second = (MAX_CUMULATIVE_DROP - MAX_DROP, MAX_DROP) if at_threshold else (0.0, 0.0)
    # Each step flips as much as the gentlest real requantization, and at least its drop.
    _, table = _promote(rng, _anchored(rng, runs, n), first, CREEP_STEP_DISCORDANCE + first, n)
    step_counts, table = _promote(rng, table, second, CREEP_STEP_DISCORDANCE + second, n)
    regressed = creep_verdicts(step_counts, (table[1, 0], table[0, 1]), n)[0]
    rate = float(regressed.mean())
    return FamilyRate(at_threshold, runs, rate, math.sqrt(rate * (1 - rate) / runs))


Table = dict[tuple[int, int], np.ndarray]
"""Per simulated run, its examples counted by (anchor right, current baseline right)."""


def _anchored(rng: np.random.Generator, runs: int, n: int) -> Table:
    """Runs whose current baseline is the anchor itself, at 60% accuracy."""
    right = rng.binomial(n, 0.6, size=runs)
    zero = np.zeros(runs, dtype=np.int64)
    return {(1, 1): right, (1, 0): zero, (0, 1): zero, (0, 0): n - right}


def _promote(
    rng: np.random.Generator, table: Table, drop: float, discordance: float, n: int
) -> tuple[tuple[np.ndarray, np.ndarray], Table]:
    """One candidate `drop` worse than the current baseline, `discordance` of its answers
    flipped: its counts (b, c) against that baseline, and the table with it promoted."""
    right = (table[1, 1] + table[0, 1]) / n
    lose, gain = (discordance + drop) / 2 / right, (discordance - drop) / 2 / (1 - right)
    moved = {cell: rng.binomial(table[cell], lose if cell[1] else gain) for cell in table}
    counts = (moved[1, 1] + moved[0, 1], moved[1, 0] + moved[0, 0])
    promoted = {(a, now): table[a, now] - moved[a, now] + moved[a, 1 - now] for a, now in table}
    return counts, promoted


def creep_verdicts(
    step: tuple[np.ndarray, np.ndarray],
    creep: tuple[np.ndarray, np.ndarray],
    n: int,
    max_drop: float = MAX_DROP,
    budget: float = MAX_CUMULATIVE_DROP,
) -> tuple[np.ndarray, np.ndarray]:
    """REGRESSION and PASS masks of one unit gated against its last baseline, counts `step`
    (b, c), and against the anchor, counts `creep`, with both margin tests in one Holm family
    and both within-margin tests each at alpha (the PASS is an intersection-union test), as
    `regress.gate.compare` judges them."""
    regressed, passed = [], []
    for b, c, bk, ck in zip(*step, *creep, strict=True):
        # Holm over two: the smaller p against alpha / 2 (the larger needs it first).
        regressed.append(
            _shown(int(b), int(c), n, max_drop, Side.BEYOND, ALPHA / 2)
            or _shown(int(bk), int(ck), n, budget, Side.BEYOND, ALPHA / 2)
        )
        passed.append(
            not regressed[-1]
            and _shown(int(b), int(c), n, max_drop, Side.WITHIN, ALPHA)
            and _shown(int(bk), int(ck), n, budget, Side.WITHIN, ALPHA)
        )
    return np.array(regressed), np.array(passed)


def _passes(b: int, c: int, n: int, margin: float, level: float) -> bool:
    """A single unit's PASS: no REGRESSION shown, and its drop shown within `margin`."""
    b, c = int(b), int(c)
    return not _shown(b, c, n, margin, Side.BEYOND, level) and _shown(
        b, c, n, margin, Side.WITHIN, level
    )


@functools.lru_cache(maxsize=100_000)
def _shown(b: int, c: int, n: int, margin: float, side: Side, level: float) -> bool:
    """Whether the exact margin test shows the drop beyond (or within) `margin` at `level`:
    the p-value's decision, without the p-value where bounds of it settle that."""
    if side is Side.WITHIN and b - c >= margin * n:
        return False  # A drop observed beyond the margin is never shown within it.
    return margin_rejects(b, c, n, margin, side, level)


@dataclass(frozen=True)
class SequentialPoint:
    """A sequential unit's verdict rates and expected examples, beside the fixed design's."""

    n: int
    drop: float
    discordance: float
    regression: float
    passed: float
    mean_n: float
    """Expected paired examples used before the unit stopped."""
    fixed_regression: float
    """P(REGRESSION) of the fixed design at the same n (exact)."""
    fixed_passed: float


def sequential_oc(
    n: int,
    drop: float,
    discordance: float,
    design: SequentialDesign,
    runs: int = 4000,
    seed: int = SEED,
    alpha: float = ALPHA,
    margin: float = MAX_DROP,
) -> SequentialPoint:
    """Seeded simulation of one unit under the sequential gate (margin rule, PASS needs
    evidence): the gate's exact tests at each look's nominal level, a unit stopping at its
    first REGRESSION or PASS; the fixed design's rates at the same n beside it, exact."""
    rng = np.random.default_rng(seed)
    share = (discordance + drop) / (2 * discordance)
    # The examples of each look's increment: (b, c) counts drawn as the gate sees them.
    sizes = [cut(n, t) for t in design.looks]
    steps = np.diff([0, *sizes])
    probs = [discordance * share, discordance * (1 - share), 1 - discordance]
    draws = np.stack([rng.multinomial(s, probs, size=runs)[:, :2] for s in steps], axis=1)
    totals = np.cumsum(draws, axis=1)
    # Each look's edges over the m its runs reach, walked once per side (rejection_edges):
    # the same edges as bisecting each m apart, for about two exact tests per m instead of
    # seven.
    ms = totals.sum(axis=2)
    edges: dict[tuple[int, Side], tuple[int, np.ndarray]] = {}
    for k, size in enumerate(sizes):
        first, last = int(ms[:, k].min()), int(ms[:, k].max()) + 1
        level = design.nominal_level(alpha, k)
        for side in Side:
            edges[k, side] = (first, _look_edges(size, margin, level, side, first, last))
    regressed = passed = 0
    used = 0.0
    for run in totals:
        for k, (b, c) in enumerate(run):
            (first, up), (_, down) = edges[k, Side.BEYOND], edges[k, Side.WITHIN]
            if b >= up[b + c - first]:
                regressed += 1
            elif b <= down[b + c - first]:
                passed += 1
            else:
                continue
            used += sizes[k]
            break
        else:
            used += sizes[-1]
    fixed = {}
    for side in Side:
        m = _m_range(n, discordance, discordance)
        edge = _look_edges(n, margin, alpha, side, m.start, m.stop)
        weight = sps.binom.pmf(np.asarray(m), n, discordance)
        tail = (
            sps.binom.sf(edge - 1, np.asarray(m), share)
            if side is Side.BEYOND
            else sps.binom.cdf(edge, np.asarray(m), share)
        )
        fixed[side] = float(np.sum(weight * tail))
    return SequentialPoint(
        n, drop, discordance, regressed / runs, passed / runs, used / runs,
        fixed[Side.BEYOND], fixed[Side.WITHIN],
    )  # fmt: skip


@dataclass(frozen=True)
class StoppingLaw:
    """A sequential unit's exact verdict rates and the examples it uses."""

    sizes: tuple[int, ...]
    """Examples seen at each look."""
    stopped: tuple[float, ...]
    """P(the unit stops at each look with a REGRESSION or a PASS); the rest runs to the end."""
    regression: float
    passed: float

    @property
    def expected_n(self) -> float:
        """Expected examples used: a unit that never stops uses them all."""
        early = sum(p * s for p, s in zip(self.stopped[:-1], self.sizes[:-1], strict=True))
        return early + (1.0 - sum(self.stopped[:-1])) * self.sizes[-1]


MASS = 1e-13
"""Paired counts rarer than this at a look are carried on undecided: their verdict moves no
rate or expected n by more than it, and skipping them spares exact tests."""


def stopping_law(
    n: int,
    drop: float,
    discordance: float,
    design: SequentialDesign,
    alpha: float = ALPHA,
    margin: float = MAX_DROP,
) -> StoppingLaw:
    """Exactly what `sequential_oc` simulates: the joint law of the counts (b, c) of the
    examples seen so far is carried from look to look (a trinomial step per look's new
    examples), and at each look the outcomes its exact tests decide at their nominal level
    (REGRESSION: b at or beyond the margin test's edge; PASS: at or within the WITHIN edge)
    leave it. Needs 0 < |drop| <= discordance or drop 0 < discordance."""
    if not 0 < discordance <= 1 or abs(drop) > discordance:
        raise ValueError(f"need 0 < discordance <= 1 and |drop| <= it, got {drop}, {discordance}")
    sizes = tuple(cut(n, t) for t in design.looks)
    law = np.ones((1, 1))  # P(b, c) of the undecided runs, b rows, c columns
    before, stopped, regressed, passed = 0, [], 0.0, 0.0
    for k, size in enumerate(sizes):
        law = signal.fftconvolve(law, _trinomial(size - before, drop, discordance))
        law = np.clip(law, 0.0, None)  # FFT rounding leaves specks below zero
        before = size
        level = design.nominal_level(alpha, k)
        b, c = np.indices(law.shape)
        m = b + c
        masses = np.bincount(m.ravel(), weights=law.ravel())
        likely = np.flatnonzero(masses > MASS)
        up = np.full(masses.size, size + 1)
        down = np.full(masses.size, -1)
        if likely.size:
            first, last = int(likely[0]), int(likely[-1]) + 1
            up[first:last] = _look_edges(size, margin, level, Side.BEYOND, first, last)
            down[first:last] = _look_edges(size, margin, level, Side.WITHIN, first, last)
        worse, within = (b >= up[m]) & (m <= size), (b <= down[m]) & (m <= size)
        regressed += float(law[worse].sum())
        passed += float(law[within].sum())
        stopped.append(float(law[worse | within].sum()))
        law = np.where(worse | within, 0.0, law)
    return StoppingLaw(sizes, tuple(stopped), regressed, passed)


@functools.lru_cache(maxsize=256)
def _look_edges(
    size: int, margin: float, level: float, side: Side, first: int, last: int
) -> np.ndarray:
    """rejection_edges over m in [first, last), kept: the m a discordance makes likely are the
    same whatever the drop, so a plan's three drops share them."""
    edges = rejection_edges(size, margin, level, side, range(first, last))
    edges.setflags(write=False)
    return edges


def _trinomial(steps: int, drop: float, discordance: float) -> np.ndarray:
    """P(b, c) over `steps` examples, each a regression, an improvement or neither."""
    share = (discordance + drop) / (2 * discordance)
    b, c = np.indices((steps + 1, steps + 1))
    m = b + c
    inside = m <= steps
    log_p = (
        special.gammaln(steps + 1)
        - special.gammaln(b + 1)
        - special.gammaln(c + 1)
        - special.gammaln(np.maximum(steps - m, 0) + 1)
        + special.xlogy(b, discordance * share)
        + special.xlogy(c, discordance * (1 - share))
        + special.xlog1py(np.maximum(steps - m, 0), -discordance)
    )
    return np.where(inside, np.exp(np.where(inside, log_p, 0.0)), 0.0)


SEQUENTIAL_N = 300
SEQUENTIAL_CELLS = ((0.0, 0.15), (0.02, 0.05), (0.02, 0.15), (0.05, 0.15), (0.10, 0.15))
"""(true drop, discordance) rows of docs/gate.md's sequential table."""


@dataclass(frozen=True)
class GatePassPoint:
    """P(gate PASS) of alike independent units, with and without Holm on the PASS tests."""

    units: int
    n: int
    drop: float
    discordance: float
    holm: float
    """Every unit's within-margin test rejected by Holm at alpha (the gate before issue 50)."""
    intersection: float
    """Every unit's within-margin test rejected at alpha: the intersection-union test."""


def within_rate(
    n: int, drop: float, discordance: float, level: float, margin: float = MAX_DROP
) -> float:
    """P(one unit's drop is shown within `margin` at `level`), exactly: the sum over m of the
    WITHIN test's rejection edges' binomial tails."""
    ms = np.asarray(_m_range(n, discordance, discordance))
    edges = rejection_edges(n, margin, level, Side.WITHIN, range(int(ms[0]), int(ms[-1]) + 1))
    share = (discordance + drop) / (2 * discordance)
    inside = np.where(edges < 0, 0.0, sps.binom.cdf(np.maximum(edges, 0), ms, share))
    return float(np.sum(sps.binom.pmf(ms, n, discordance) * inside))


def gate_pass(
    units: int,
    n: int,
    drop: float,
    discordance: float,
    alpha: float = ALPHA,
    margin: float = MAX_DROP,
) -> GatePassPoint:
    """P(gate PASS) of `units` independent accuracy units of n examples, each with the same
    true drop and discordance, margin rule, `pass_requires: evidence`, exactly.

    A unit shown within its margin at a level below 0.5 is never shown beyond it (the two
    tests order the outcomes by one statistic, so their p-values sum to at least 1), so the
    gate PASSes exactly when every within-margin test rejects. Holm rejects them all when
    the j-th smallest p lies below alpha / (units - j + 1) for every j: a sum over how many
    units fall between consecutive Holm levels (a multinomial of the per-level rates).
    """
    levels = [alpha / (units - j) for j in range(units)]
    below = [within_rate(n, drop, discordance, level, margin) for level in levels]
    cells = np.diff([0.0, *below])
    holm = 0.0
    for counts in _compositions(units, units):
        if all(sum(counts[: j + 1]) >= j + 1 for j in range(units)):
            ways = math.factorial(units) / math.prod(math.factorial(k) for k in counts)
            holm += ways * math.prod(float(p) ** k for p, k in zip(cells, counts, strict=True))
    return GatePassPoint(units, n, drop, discordance, holm, below[-1] ** units)


def _compositions(total: int, parts: int) -> list[tuple[int, ...]]:
    """Every way to write `total` as `parts` counts of at least 0, in order."""
    if parts == 1:
        return [(total,)]
    return [(k, *rest) for k in range(total + 1) for rest in _compositions(total - k, parts - 1)]


GATE_PASS_CELLS = tuple(
    (units, n, discordance)
    for units in (3, 5)
    for n in (300, 1000)
    for discordance in (0.01, 0.03, 0.15)
)
"""(units, n, discordance) rows of docs/gate.md's PASS-family table: an unchanged candidate."""
