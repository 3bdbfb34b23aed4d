"""The exact stopping law of a sequential unit (regress.stats.stopping_law): it agrees with
the seeded simulation of the same exact tests, and the expected examples `regress plan` and
the `no_early_stop` warning read differ from the normal approximation they read before
(docs/gate.md's table, recomputed here)."""

from __future__ import annotations

import importlib.util
import math
import sys
from pathlib import Path

import pytest

from regress.checks import sequential_n
from regress.stats import SequentialDesign, cut, sequential_oc, stopping_law

ROOT = Path(__file__).resolve().parents[1]


def _experiment():
    spec = importlib.util.spec_from_file_location(
        "sequential_expected_n", ROOT / "experiments" / "sequential_expected_n.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("drop", "flips"), [(0.05, 0.15)])
def test_the_exact_law_is_what_the_simulation_of_the_same_tests_finds(drop, flips):
    """n = 300: P(REGRESSION), P(PASS) and the expected examples of 4,000 seeded simulated
    runs lie within three standard errors of the exact law's."""
    design, runs = SequentialDesign(), 4000
    exact = stopping_law(300, drop, flips, design)
    simulated = sequential_oc(300, drop, flips, design, runs=runs)
    for p, q in ((exact.regression, simulated.regression), (exact.passed, simulated.passed)):
        assert abs(p - q) <= 3 * math.sqrt(max(p * (1 - p), 1e-4) / runs)
    # Examples used lie between the first look's and 300: sd at most half that range.
    first = cut(300, design.looks[0])
    assert abs(exact.expected_n - simulated.mean_n) <= 3 * (300 - first) / 2 / math.sqrt(runs)
    assert sum(exact.stopped) == pytest.approx(exact.regression + exact.passed)


def test_plan_reads_the_exact_law_and_the_docs_table_is_it():
    """An unchanged candidate flipping 1% at n = 500 uses 0.89 of its examples by the exact
    tests, where the normal approximation says 0.54 (issue 50): plan's expected n is the
    exact one, and docs/gate.md's rows for n = 300 and 500 are what the experiment prints."""
    experiment = _experiment()
    design = SequentialDesign()
    exact = stopping_law(500, 0.0, 0.01, design).expected_n
    assert sequential_n(design, 500, 0.01, 0.02, 0.05)[0] == exact
    assert exact / 500 > experiment.normal_fraction(design, 500, 0.01) + 0.2
    page = (ROOT / "docs" / "gate.md").read_text()
    assert experiment.HEADER in page
    for n in (300, 500):
        for flips in (0.01, 0.03):
            assert experiment.row(n, flips) in page


def test_the_built_in_pool_passes_what_its_first_500_leave_inconclusive():
    """An unchanged candidate flipping 2% of answers (SmolLM2's Q8_0 flipped 2.3% of the
    built-in pool's) is left INCONCLUSIVE by the fixed gate over the embedded default's 500
    questions in about one check in eight, and PASSed by the default design over the pool of
    2,000; results/sequential-gate.md's rows are what the experiment prints."""
    experiment = _experiment()
    fixed = stopping_law(500, 0.0, 0.02, SequentialDesign(looks=(1.0,)))
    pool = stopping_law(2000, 0.0, 0.02, SequentialDesign())
    assert 0.85 < fixed.passed < 0.9 and pool.passed > 0.999 and pool.expected_n < 1000
    page = (ROOT / "docs" / "results" / "sequential-gate.md").read_text()
    assert experiment.POOL_HEADER in page
    for flips in (0.02, 0.023):
        assert experiment.pool_row(flips) in page


def test_a_drop_beyond_its_flips_is_refused():
    with pytest.raises(ValueError, match="discordance"):
        stopping_law(300, 0.05, 0.02, SequentialDesign())
