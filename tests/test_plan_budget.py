"""`regress plan --budget` (issue 50): flip profiles from a baseline's own margins, and the
pool, margin and looks that decide typical candidates within a CI budget, exactly.

Every plan here is made on the committed `baselines/main` (real SmolLM2 records on the
built-in suite, one unit of 500), priced with --rate so that no model loads. Pools are kept at
60-100 examples: each exact law costs about a second there.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from regress.checks import (
    PROFILES,
    BudgetOptions,
    BudgetPlan,
    Throughput,
    flip_chance,
    flip_share,
    plan_budget,
)
from regress.cli import cli
from regress.cli.plan import Budget
from regress.core.errors import BadInput
from regress.core.manifest import Run
from regress.core.records import Record
from regress.core.store import Store
from regress.gate.policy import Policy
from regress.stats import SequentialDesign, stopping_law

REPO = Path(__file__).resolve().parents[1]
FIXED = SequentialDesign(looks=(1.0,))
DESIGNS = (FIXED, SequentialDesign())


@pytest.fixture(scope="module")
def main() -> Run:
    return Store(REPO / "baselines").load("main")


def _plan(main: Run, seconds: float, designs: tuple[SequentialDesign, ...]) -> BudgetPlan:
    """At one second an example, a budget of `seconds` affords that many examples."""
    options = BudgetOptions(seconds, {"builtin": 1.0}, margins=(0.02,), designs=designs)
    return plan_budget(main, Policy(), options)


@pytest.mark.parametrize(
    ("text", "seconds"), [("10m", 600.0), ("90s", 90.0), ("1.5h", 5400.0), ("10", 600.0)]
)
def test_a_budget_reads_seconds_minutes_and_hours(text, seconds):
    assert Budget().convert(text, None, None) == seconds


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--baseline", "main", "--budget", "0", "--rate", "1"], "must be positive"),
        (["--baseline", "main", "--budget", "10x", "--rate", "1"], "is not a time"),
        (["--budget", "10m", "--rate", "1"], "give --baseline"),
        (["--baseline", "main", "--budget", "10m"], "--time MODEL or --rate"),
        (["--baseline", "nope", "--budget", "10m", "--rate", "1"], "no baseline 'nope'"),
        (["--baseline", "main", "--budget", "1s", "--rate", "0.5"], "affords no example"),
        (["--baseline", "main", "--json"], "give --budget"),
    ],
)
def test_bad_budget_input_is_one_line_and_exit_2(args, says):
    done = CliRunner().invoke(cli, ["plan", "--store", str(REPO / "baselines"), *args])
    assert done.exit_code == 2, done.output
    assert says in done.output.strip().splitlines()[-1]


def test_a_budget_smaller_than_the_load_is_refused(main):
    options = BudgetOptions(10.0, {"builtin": 1.0}, load_seconds=12.0, margins=(0.02,))
    with pytest.raises(BadInput, match="does not cover the load"):
        plan_budget(main, Policy(), options)


def test_flip_chances_are_what_the_noise_does_to_the_real_records(main):
    """The quadrature against a seeded simulation of the same noise on the real choices."""
    records = [r for task in sorted(main.records) for r in main.records[task]]
    rng = np.random.default_rng(50)
    for noise in (profile.noise for profile in PROFILES):
        flipped = []
        for record in records:
            x = np.asarray(record.scores["loglik"])
            assert record.right == (int(np.argmax(x)) == record.target)
            moved = x + noise * rng.standard_normal((4000, x.size))
            flipped.append(np.mean((np.argmax(moved, axis=1) == record.target) != record.right))
            chance = flip_chance(record, noise)
            assert chance is not None and abs(chance - flipped[-1]) < 0.04
        assert flip_share(records, noise) == pytest.approx(np.mean(flipped), abs=0.004)
    light, typical = (flip_share(records, p.noise) or 0.0 for p in PROFILES)
    assert 0 < light < typical < 0.5


def test_acc_norm_moves_each_choice_by_its_own_length_and_a_generation_has_no_profile():
    logliks, chars = [-4.0, -6.0, -9.0], [2, 6, 3]
    record = Record("t", 0, "", "", 1, 1, 1, {}, {"loglik": logliks, "chars": chars})
    rng = np.random.default_rng(7)
    moved = np.asarray(logliks) + 0.8 * rng.standard_normal((200_000, 3))
    changed = np.mean(np.argmax(moved / np.asarray(chars), axis=1) != 1)
    assert flip_chance(record, 0.8, "acc_norm") == pytest.approx(changed, abs=0.005)
    assert flip_chance(record, 0.8, "acc") != pytest.approx(changed, abs=0.05)
    generation = Record("g", 0, "", "", "4", "4", 1, {"exact_match": 1.0})
    assert flip_chance(generation, 0.8) is None and flip_share([generation], 0.8) is None


def test_the_chosen_plan_decides_as_stopping_law_says_and_beats_the_other(main):
    planned = _plan(main, 60.0, DESIGNS)
    (unit,) = planned.units
    assert (unit.n, unit.affordable, unit.pool, unit.margin) == (500, 60, 60, 0.02)
    records = [r for task in sorted(main.records) for r in main.records[task]]
    scores = {}
    for design in DESIGNS:
        decided = []
        for profile, outcome in zip(PROFILES, unit.outcomes, strict=True):
            drop = 0.0 if profile.passes else 0.04  # twice the default max_drop
            flips = max(flip_share(records, profile.noise) or 0.0, drop)
            alpha = 0.05  # one gated unit: the PASS and REGRESSION tests both at 0.05
            law = stopping_law(60, drop, flips, design, alpha, 0.02)
            decided.append(law.passed if profile.passes else law.regression)
            if design.looks == unit.looks:
                assert outcome.decided == pytest.approx(decided[-1], abs=1e-12)
                assert outcome.discordance == pytest.approx(flips)
                assert outcome.expected_n == pytest.approx(law.expected_n)
        scores[design.looks] = min(decided)
    assert unit.decided == max(scores.values())


def test_a_larger_budget_never_decides_less(main):
    found = [_plan(main, seconds, (FIXED,)).units[0] for seconds in (60.0, 100.0, 100.9)]
    assert [u.pool for u in found] == [60, 100, 100]
    assert found[1] == found[2]  # a fraction of an example buys nothing
    for a, b in zip(found[0].outcomes, found[1].outcomes, strict=True):
        assert b.decided > a.decided


def test_the_json_plan_is_the_library_plan(main):
    done = CliRunner().invoke(
        cli,
        [
            "plan",
            "--store",
            str(REPO / "baselines"),
            "--baseline",
            "main",
            "--budget",
            "1m",
            "--rate",
            "1",
            "--margin",
            "0.02",
            "--json",
        ],
    )
    assert done.exit_code == 0, done.output
    shown = json.loads(done.output)
    (unit,) = _plan(main, 60.0, DESIGNS).units
    (row,) = shown["units"]
    assert (row["pool"], row["margin"], tuple(row["looks"])) == (60, 0.02, unit.looks)
    assert [o["decided"] for o in row["outcomes"]] == [o.decided for o in unit.outcomes]


def test_a_measured_rate_prices_each_example_by_its_tokens_after_the_load(main, monkeypatch):
    """--time's wiring without a model: 100 tokens an example at 100 tokens/s is a second an
    example, and the 5 s load comes off the budget first (the timing itself is model-tested
    in test_sequential.py)."""
    measured = Throughput("m.gguf", "llama_cpp", "AVX2 FMA", 10, 1000, 10.0, 5.0, {"builtin": 100})
    monkeypatch.setattr("regress.cli.plan.measure_throughput", lambda run, options: measured)
    store = str(REPO / "baselines")
    args = ["plan", "--store", store, "--baseline", "main", "--budget", "65s", "--time", "m"]
    done = CliRunner().invoke(cli, [*args, "--margin", "0.02", "--json"])
    assert done.exit_code == 0, done.output
    shown = json.loads(done.output)
    assert "AVX2 FMA" in shown["rate"] and shown["fixed_seconds"] == 5.0
    assert shown["units"][0]["affordable"] == 60
