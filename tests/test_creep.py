"""The creep guard: a candidate is tested against an anchor baseline too, in the gate's one
alpha, so drops that each pass cannot add up unseen (docs/gate.md#creep-guard)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from test_compare import info, record, run

from regress.checks import CandidateModel, CheckOptions, check
from regress.cli import cli
from regress.core.errors import BadInput, ExitCode
from regress.core.store import Store
from regress.gate.policy import Policy, parse_policy
from regress.gate.results import Verdict
from regress.report.markdown import render_markdown
from regress.report.operating import render_creep
from regress.stats import (
    ALPHA,
    CREEP_N,
    CREEP_STEP_DISCORDANCE,
    CREEP_STEP_DROP,
    SequentialDesign,
    creep_chains,
    creep_false_alarms,
    creep_verdicts,
)

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def chains():
    return creep_chains()


@pytest.fixture(scope="module")
def rates():
    return [creep_false_alarms(False), creep_false_alarms(True)]


def test_a_slide_that_passes_every_step_is_stopped_by_the_anchor(chains):
    """Ten promotions each 0.8 points worse: the gate against the last baseline passes them
    all in most chains, the guarded gate stops every chain, and never before the slide
    exceeds the budget more often than alpha."""
    assert chains[-1].cumulative_drop == pytest.approx(0.08)
    assert chains[-1].every_step_passed >= 0.9
    assert chains[-1].stopped == 1.0
    slack = 2 * np.sqrt(ALPHA * (1 - ALPHA) / 100)
    for point in chains:
        if point.cumulative_drop <= 0.03:
            assert point.regression <= ALPHA + slack, point


def test_the_guarded_gate_holds_one_alpha(rates):
    """Nothing changed, and both true drops exactly at their thresholds (the worst case):
    any REGRESSION at most alpha."""
    for rate in rates:
        assert rate.regression <= ALPHA + 2 * rate.se, rate
    assert rates[1].regression > 0.01  # at the thresholds the tests do spend their alpha


def test_the_docs_show_the_creep_table_the_code_computes(chains, rates):
    page = (REPO / "docs" / "gate.md").read_text(encoding="utf-8")
    for line in render_creep(chains, rates).splitlines():
        assert line in page, "regenerate with: python -m regress.stats.operating"


def _chain(steps: int, seed: int = 7) -> list[np.ndarray]:
    """Per-example outcomes of an anchor and `steps` promotions, each as the simulation
    draws them: CREEP_STEP_DROP worse, CREEP_STEP_DISCORDANCE of answers flipping."""
    rng = np.random.default_rng(seed)
    outcomes = [rng.random(CREEP_N) < 0.6]
    for _ in range(steps):
        now = outcomes[-1]
        right = now.mean()
        lose = (CREEP_STEP_DISCORDANCE + CREEP_STEP_DROP) / 2 / right
        gain = (CREEP_STEP_DISCORDANCE - CREEP_STEP_DROP) / 2 / (1 - right)
        u = rng.random(CREEP_N)
        outcomes.append(np.where(now, u >= lose, u < gain))
    return outcomes


def _run(name: str, correct: np.ndarray):
    return run(name, {"t": [record("t", i, bool(x)) for i, x in enumerate(correct)]}, [info("t")])


def _counts(before: np.ndarray, after: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.array([np.sum(before & ~after)]), np.array([np.sum(~before & after)])


def test_the_simulation_judges_as_the_gate_does():
    """One chain of real records through `check` with the anchor: each step's verdict is the
    one `creep_verdicts` (the simulation's judge) gives for the same counts, the slide ends
    in a REGRESSION of the anchor row alone, and the reports show that row."""
    outcomes = _chain(8)
    anchor = _run("release-1.0", outcomes[0])
    options = CheckOptions(policy=Policy(anchor="release-1.0"), anchor=anchor)
    seen = set()
    for step in range(1, len(outcomes)):
        base, cand = outcomes[step - 1], outcomes[step]
        result = check(_run("main", base), _run("cand", cand), options).comparison
        regressed, passed = creep_verdicts(_counts(base, cand), _counts(outcomes[0], cand), CREEP_N)
        expected = (
            Verdict.REGRESSION
            if regressed[0]
            else Verdict.PASS
            if passed[0]
            else Verdict.INCONCLUSIVE
        )
        assert result.verdict is expected, step
        unit, since = result.units
        assert (unit.name, unit.since, unit.threshold) == ("t", None, 0.02)
        assert (since.name, since.since, since.threshold) == (
            "t since release-1.0",
            "release-1.0",
            0.03,
        )
        assert since.b - since.c == np.sum(outcomes[0]) - np.sum(cand)
        seen.add(result.verdict)
    assert unit.verdict is Verdict.PASS and since.verdict is Verdict.REGRESSION
    assert seen == {Verdict.PASS, Verdict.INCONCLUSIVE, Verdict.REGRESSION}
    assert "max_cumulative_drop 3.0 pts" in since.reason
    assert "| t since release-1.0 |" in render_markdown(result)
    data = json.loads(json.dumps(result.to_dict()))
    assert [u.get("since") for u in data["units"]] == [None, "release-1.0"]
    assert data["policy"]["anchor"] == "release-1.0"
    assert data["policy"]["max_cumulative_drop"] == 0.03


def test_without_an_anchor_nothing_changes():
    """No anchor: no extra row, and the JSON report has no `since` or anchor key at all."""
    outcomes = _chain(1)
    result = check(_run("main", outcomes[0]), _run("cand", outcomes[1])).comparison
    data = result.to_dict()
    assert len(data["units"]) == 1 and "since" not in data["units"][0]
    assert "anchor" not in data["policy"] and "max_cumulative_drop" not in data["policy"]


def test_an_anchor_the_gate_cannot_use_is_bad_input():
    outcomes = _chain(1)
    base, cand = _run("main", outcomes[0]), _run("cand", outcomes[1])
    with pytest.raises(BadInput, match="anchor 'release-1.0' was not loaded"):
        check(base, cand, CheckOptions(policy=Policy(anchor="release-1.0")))
    other = run(
        "old",
        {"t": [record("t", i, True) for i in range(CREEP_N)]},
        [info("t", prompt_hash="q" * 64)],
    )
    with pytest.raises(BadInput, match="anchor 'old': .*prompt"):
        check(base, cand, CheckOptions(policy=Policy(anchor="old"), anchor=other))
    sequential = Policy(anchor="old", sequential=SequentialDesign())
    with pytest.raises(BadInput, match="sequential"):
        check(base, CandidateModel("absent.gguf"), CheckOptions(policy=sequential, anchor=base))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"max_cumulative_drop": 0.03}, "max_cumulative_drop must be set with an anchor"),
        ({"anchor": 3}, "anchor must be a baseline name or folder"),
        ({"anchor": "v1", "max_cumulative_drop": 1.5}, "max_cumulative_drop must be a number in"),
    ],
)
def test_policy_refuses_a_budget_it_would_ignore(data, message):
    with pytest.raises(BadInput, match=message):
        parse_policy(data)
    assert parse_policy({"anchor": "v1"}).max_cumulative_drop == 0.03


def test_check_refuses_a_missing_anchor_before_any_model_runs(tmp_path):
    """Exit 2 naming the store's baselines; no model file exists, so none was loaded."""
    missing = str(tmp_path / "absent.gguf")
    store = str(REPO / "baselines")
    result = CliRunner().invoke(
        cli, ["check", "-b", "main", "-m", missing, "--store", store, "--anchor", "release-9"]
    )
    assert result.exit_code == ExitCode.BAD_INPUT
    assert "no baseline 'release-9'" in result.output and "main" in result.output
    result = CliRunner().invoke(
        cli, ["check", "-b", "main", "-m", missing, "--store", store, "--anchor", "runs/nothing"]
    )
    assert (
        result.exit_code == ExitCode.BAD_INPUT
        and "runs/nothing: no such run folder" in result.output
    )
    assert Store(REPO / "baselines").find(str(REPO / "baselines" / "main")).manifest.name == "main"


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args],
        check=True,
        capture_output=True,
    )


def _stored(name: str, correct: np.ndarray):
    """`_run` as the store writes it: outcomes as 0 and 1."""
    task = dataclasses.replace(info("t"), n=len(correct))
    return run(name, {"t": [record("t", i, int(x)) for i, x in enumerate(correct)]}, [task])


def test_an_anchor_n_promotions_back_comes_from_git(tmp_path):
    """A store in git whose baseline `base` was promoted three times: `base~2` is the
    version two promotions back, read from git, and the anchor row is named for it. An
    uncommitted promotion counts as the current version; more promotions than the history
    holds, or a store outside git, is bad input."""
    outcomes = _chain(3)  # a run's model sha256 repeats its name's first letter: hex, `b`
    repo = tmp_path / "repo"
    store = Store(repo / "baselines")
    _git(tmp_path, "init", "-q", str(repo))
    for i, correct in enumerate(outcomes):
        store.save(_stored("base", correct))
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", f"promote {i}")
    two = store.find("base~2")
    assert two.records == _stored("base", outcomes[1]).records
    assert two.manifest.name == "base~2"
    result = check(
        _stored("base", outcomes[3]),
        _stored("cand", outcomes[3]),
        CheckOptions(policy=Policy(anchor="base~2"), anchor=two),
    ).comparison
    assert [u.name for u in result.units] == ["t", "t since base~2"]
    since = result.units[1]
    assert since.b - since.c == np.sum(outcomes[1]) - np.sum(outcomes[3])
    # Promoted again, not yet committed: one promotion back is the newest commit.
    store.save(_stored("base", outcomes[0]))
    assert store.find("base~1").records == _stored("base", outcomes[3]).records
    with pytest.raises(BadInput, match="base~5: git holds 4 earlier version"):
        store.find("base~5")
    outside = Store(tmp_path / "plain")
    outside.save(_stored("base", outcomes[0]))
    with pytest.raises(BadInput, match="base~1: git rev-parse"):
        outside.find("base~1")
