"""A policy unit that nearly spells one of the baseline's is a typo: refused before any model
loads, with the unit it meant (`arc-easy` kept the default limits and exited 0)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from conftest import REPO

from regress import CheckOptions, Store, check
from regress.cli import cli
from regress.core.errors import BadInput, ExitCode
from regress.gate.policy import parse_policy


@pytest.fixture(scope="module")
def main_baseline():
    return Store(REPO / "baselines").load("main")


def test_a_misspelt_unit_is_refused_with_the_unit_it_meant(main_baseline) -> None:
    unit = main_baseline.manifest.tasks["builtin_arithmetic"].group  # the suite's one unit
    typo = "built-in"
    policy = parse_policy({"units": {typo: {"max_drop": 0.5}}})
    with pytest.raises(BadInput, match=f"unit '{typo}'.*did you mean '{unit}'"):
        check(main_baseline, main_baseline, CheckOptions(policy=policy, cache_dir=None))


def test_a_unit_far_from_every_unit_stays_a_warning(main_baseline) -> None:
    """A policy shared by several suites names units some of them lack."""
    policy = parse_policy({"units": {"mmlu": {"max_drop": 0.5}}})
    result = check(main_baseline, main_baseline, CheckOptions(policy=policy, cache_dir=None))
    assert result.comparison.exit_code is ExitCode.OK
    assert "policy names unit 'mmlu', which is not in this suite" in result.comparison.warnings


def test_the_cli_exits_2_before_reading_the_candidate(main_baseline, tmp_path) -> None:
    unit = main_baseline.manifest.tasks["builtin_arithmetic"].group
    policy = tmp_path / "policy.yaml"
    policy.write_text("units:\n  built-in:\n    max_drop: 0.5\n")
    args = ["check", "-b", "main", "--store", str(REPO / "baselines"), "--policy", str(policy)]
    args += ["--candidate-run", str(REPO / "baselines" / "main")]
    done = CliRunner().invoke(cli, args)
    assert done.exit_code == ExitCode.BAD_INPUT, done.output
    assert f"did you mean '{unit}'" in done.output
