"""Recovery (`units: {U: {max_relative_drop: r}}`): the candidate keeps at least 1 - r of the
baseline's accuracy, a rule of its own in the gate's one alpha (regress.gate.recovery). Pure
logic on crafted records; its size is checked by seeded simulation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_compare import info, record, run, runs

from regress.core.errors import BadInput, ExitCode
from regress.gate.compare import compare
from regress.gate.policy import Policy, UnitPolicy, parse_policy
from regress.gate.recovery import recovery_test
from regress.gate.results import Verdict
from regress.report.markdown import render_markdown
from regress.stats import recovery_point

ALPHA = 0.05
DOCS = Path(__file__).resolve().parents[1] / "docs" / "gate.md"


def _policy(r: float, **unit: float) -> Policy:
    return Policy(units={"arc": UnitPolicy(max_relative_drop=r, **unit)})


@pytest.mark.parametrize(
    ("baseline", "discordance", "n", "least"),
    [(0.6, 0.10, 300, 0.95), (0.5, 0.02, 300, 0.98)],
)
def test_recovery_holds_its_size_at_the_margin_by_simulation(baseline, discordance, n, least):
    """Candidates whose true recovery is exactly `least`: neither side is shown more often
    than alpha, within simulation error (1,000 runs: 2 standard errors is 0.014). The second
    case has 6 discordant pairs in 300: a t-test of the linearised ratio is shown above the
    margin in 8.4% of such runs; the exact margin test is not."""
    candidate = least * baseline
    b = (discordance + baseline - candidate) / 2
    cells = [baseline - b, b, discordance - b, 1 - baseline - discordance + b]
    rng = np.random.default_rng(7)
    below = above = 0
    runs_ = 1000
    seen: dict[tuple[int, int, int], tuple[float, float]] = {}
    for _ in range(runs_):
        count = np.bincount(rng.choice(4, size=n, p=cells), minlength=4)
        key = (int(count[0]), int(count[1]), int(count[2]))
        if key not in seen:
            right = (count[0] + count[1]) / n
            seen[key] = recovery_test(key[1], key[2], n, right, least)
        fail_p, pass_p = seen[key]
        below += fail_p < ALPHA
        above += pass_p < ALPHA
    limit = ALPHA + 2 * (ALPHA * (1 - ALPHA) / runs_) ** 0.5
    assert below / runs_ <= limit and above / runs_ <= limit


def test_a_candidate_shown_below_its_recovery_fails_the_gate_and_says_so_first():
    """A 12.5-pt drop on a 56%-accurate unit is within a 30-pt max_drop, but keeps 78% of the
    baseline's accuracy: shown below 95%, the recovery rule alone fails the gate."""
    base, cand = runs({"arc": (400, 60, 10)})
    result = compare(base, cand, _policy(0.05, max_drop=0.3))
    [unit] = result.units
    [kept] = result.recovery
    assert unit.verdict is Verdict.PASS
    assert kept.recovery == pytest.approx(cand_right(cand) / cand_right(base))
    assert kept.verdict is Verdict.REGRESSION and kept.at_most is not None
    assert kept.recovery < kept.at_most < kept.min_recovery == pytest.approx(0.95)
    assert result.verdict is Verdict.REGRESSION and result.exit_code == ExitCode.REGRESSION
    first = render_markdown(result).splitlines()[0]
    assert first.startswith("## regress: ❌ REGRESSION in **recovery of arc**: recovery 77.8%")
    assert "### Recovery" in render_markdown(result)
    assert result.to_dict()["recovery"][0]["verdict"] == "REGRESSION"


def cand_right(side) -> int:
    return sum(r.right for r in side.records["arc"])


def test_a_candidate_shown_above_its_recovery_passes_with_its_lower_bound():
    base, cand = runs({"arc": (400, 2, 2)})
    result = compare(base, cand, _policy(0.10))
    [kept] = result.recovery
    assert kept.recovery == pytest.approx(1.0)
    assert kept.verdict is Verdict.PASS and result.verdict is Verdict.PASS
    assert kept.min_recovery < kept.at_least < 1.0
    assert kept.reason.startswith("recovery 100.0%, at least ")


@pytest.mark.parametrize(("b", "c"), [(12, 2), (16, 2), (20, 1), (8, 8), (3, 3), (30, 5)])
def test_the_bounds_agree_with_the_verdict(b, c):
    """Shown below iff the upper bound is under the minimum; shown above iff the lower bound
    is over it."""
    base, cand = runs({"arc": (200, b, c)})
    [kept] = compare(base, cand, _policy(0.05, max_drop=0.5)).recovery
    assert (kept.verdict is Verdict.REGRESSION) == (kept.at_most < kept.min_recovery)
    assert (kept.verdict is Verdict.PASS) == (kept.at_least > kept.min_recovery)


def test_without_the_key_the_report_has_no_recovery():
    base, cand = runs({"arc": (300, 5, 5)})
    result = compare(base, cand, Policy())
    assert result.recovery == () and "recovery" not in result.to_dict()
    assert "Recovery" not in render_markdown(result)


def test_bad_recovery_settings_are_refused_in_one_line():
    with pytest.raises(BadInput, match=r"units.arc.max_relative_drop must be a number in \(0, 1\)"):
        parse_policy({"units": {"arc": {"max_relative_drop": 1.5}}})
    assert parse_policy({"units": {"arc": {"max_relative_drop": 0.05}}}) == _policy(0.05)
    rolling = info("arc", metric="word_perplexity", output_type="loglikelihood_rolling")
    docs = [record("arc", i, 1, metrics={"loglik": -10.0, "n_words": 5}) for i in range(3)]
    side = run("base", {"arc": docs}, [rolling])
    with pytest.raises(BadInput, match="perplexity unit max_relative_increase"):
        compare(side, side, _policy(0.05))


def test_the_exact_operating_table_holds_alpha_agrees_with_simulation_and_is_the_docs_one():
    """n = 100, baseline 60%, 10% of answers flipped, true recovery exactly 95%: the exact sum
    over outcomes (regress.stats.recovery) is at most alpha on both sides, matches 4,000
    seeded runs of the gate's own test within 3 standard errors, and is docs/gate.md's row."""
    point = recovery_point(100, 0.6, 0.10, 0.95, 0.05)
    assert point.regression <= ALPHA and point.passed <= ALPHA
    b = (0.10 + 0.6 * 0.05) / 2
    cells = [0.6 - b, b, 0.10 - b, 1 - 0.6 - 0.10 + b]
    rng = np.random.default_rng(11)
    below = above = 0
    runs_ = 4000
    seen: dict[tuple[int, int, int], tuple[float, float]] = {}
    for _ in range(runs_):
        count = np.bincount(rng.choice(4, size=100, p=cells), minlength=4)
        key = (int(count[0]), int(count[1]), int(count[2]))
        if key not in seen:
            seen[key] = recovery_test(key[1], key[2], 100, (key[0] + key[1]) / 100, 0.95)
        below += seen[key][0] < ALPHA
        above += seen[key][1] < ALPHA
    for exact, simulated in ((point.regression, below / runs_), (point.passed, above / runs_)):
        assert abs(exact - simulated) <= 3 * (exact * (1 - exact) / runs_) ** 0.5
    row = f"| 100 | 60% | 10% | 95% | {point.regression:.3f} | {point.passed:.3f} |"
    assert row in DOCS.read_text(encoding="utf-8")
