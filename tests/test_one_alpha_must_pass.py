"""What "One alpha" (docs/gate.md) leaves out: must-pass golden items fail the gate on one
example, a rule and not a test. A clean candidate whose 10 must-pass items each flip with
probability 2% for noise alone fails 1 - 0.98^10 = 18.3% of runs: computed exactly and by a
seeded simulation through the golden rule itself."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
from scipy import stats

from regress.core.manifest import TaskInfo
from regress.core.records import Record
from regress.gate.golden_rules import judge_golden

ITEMS, FLIP = 10, 0.02


def _record(doc: int, correct: int) -> Record:
    return Record("golden", doc, f"d{doc}", f"p{doc}", 0, 0 if correct else 1, correct,
                  {"must_pass": 1.0})  # fmt: skip


def test_ten_must_pass_items_flipping_two_percent_fail_eighteen_percent_of_clean_runs():
    exact = float(stats.binom.sf(0, ITEMS, FLIP))  # P(at least one item flips)
    assert math.isclose(exact, 1 - (1 - FLIP) ** ITEMS)
    assert round(exact, 3) == 0.183  # the figure docs/gate.md states
    baseline = [_record(i, 1) for i in range(ITEMS)]
    base_run = SimpleNamespace(records={"golden": baseline})
    info = TaskInfo("golden", None, ITEMS, 0, "acc", "multiple_choice", "d", "p")
    rng = np.random.default_rng(20261206)
    runs = 4000
    flipped = rng.random((runs, ITEMS)) < FLIP
    # The items are alike, so a run's verdict depends on how many flipped: each count is
    # judged once by the golden rule and weighted by its runs.
    counts, times = np.unique(flipped.sum(axis=1), return_counts=True)
    failed = 0
    for k, weight in zip(counts, times, strict=True):
        pairs = [(b, _record(b.doc_id, 0 if i < k else 1)) for i, b in enumerate(baseline)]
        [result] = judge_golden(base_run, [info], {"golden": pairs}, max_relative_drop=0.05)
        assert result.failed == (k > 0)  # one flipped item is enough
        failed += weight * result.failed
    # Far beyond alpha = 0.05 and within simulation error of the exact rate.
    share = failed / runs
    assert abs(share - exact) < 3 * math.sqrt(exact * (1 - exact) / runs)
    assert share > 3 * 0.05
