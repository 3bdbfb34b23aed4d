"""selftest under flip profiles other than the calibration's (issue 25, item 5).

The baseline is the committed `baselines/main` (real SmolLM2 records on the builtin suite)
and a proxy drawn from it. A plain unit's tests see only how many answers flip, not where, so
there the profiles agree within noise; a proxy weighs each sampled example by N_h / n_h and
samples the unsure strata most, so flips at sure answers cost it power. That is where a
profile the calibration did not foresee shows, and where the reversed profile is checked.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from regress.cli import cli
from regress.core.errors import BadInput
from regress.core.manifest import Run
from regress.core.store import Store
from regress.proxy.build import ProxyOptions, build_proxy
from regress.proxy.flip_rates import DEFAULT
from regress.proxy.selftest import (
    PROFILES,
    Profile,
    ProfileSelftest,
    SelftestOptions,
    propensity,
    selftest_baseline,
    worst,
)

REPO = Path(__file__).resolve().parents[1]
RUNS = 2000
DROP = 0.05


@pytest.fixture(scope="module")
def main() -> Run:
    return Store(REPO / "baselines").load("main")


@pytest.fixture(scope="module")
def proxy(main: Run) -> Run:
    return build_proxy(main, "proxy", ProxyOptions(budget=250))


def test_the_profiles_place_flips_as_named():
    quantiles = [0.05, 0.35, 0.65, 0.95]
    calibrated = propensity(DEFAULT, quantiles, Profile.CALIBRATED)
    assert list(calibrated) == sorted(calibrated, reverse=True)  # least sure flip most
    reversed_ = propensity(DEFAULT, quantiles, Profile.REVERSED)
    assert list(reversed_) == pytest.approx(list(calibrated[::-1]))  # linear interpolation
    assert set(propensity(DEFAULT, quantiles, Profile.FLAT)) == {1.0}


def test_the_reversed_profile_costs_a_real_proxy_power_and_the_headline_is_the_worst(proxy):
    options = SelftestOptions(drops=(0.0, DROP), runs=RUNS, profiles=tuple(Profile))
    (unit,) = selftest_baseline(proxy, options).units
    by = {o.profile: o for o in unit.profiles}
    caught = {p: by[p].points[1].regression for p in Profile}
    # Beyond simulation noise: the two proportions over RUNS runs each lie 3 SE apart.
    se = math.sqrt(
        sum(caught[p] * (1 - caught[p]) for p in (Profile.CALIBRATED, Profile.REVERSED)) / RUNS
    )
    assert caught[Profile.REVERSED] < caught[Profile.CALIBRATED] - 3 * se
    mdes = [o.mde for o in unit.profiles]
    assert None not in mdes and unit.headline.mde == max(mdes)
    assert unit.headline.mde >= by[Profile.CALIBRATED].mde

    # The default simulates calibrated and flat, and the headline is the worse of the two.
    (default,) = selftest_baseline(proxy, SelftestOptions(drops=(0.0, DROP), runs=RUNS)).units
    calibrated, flat = default.profiles
    assert (calibrated.profile, flat.profile) == PROFILES
    assert default.headline.mde == max(calibrated.mde, flat.mde)
    # Each profile's rows do not depend on which others are simulated alongside it.
    assert calibrated == by[Profile.CALIBRATED] and flat == by[Profile.FLAT]
    # The fields that predate profiles keep their meaning: the calibrated profile's figures.
    assert (default.points, default.mde, default.largest_drop) == (
        calibrated.points,
        calibrated.mde,
        calibrated.largest_drop,
    )


def test_a_plain_units_power_hardly_depends_on_where_flips_fall(main):
    options = SelftestOptions(drops=(DROP,), runs=RUNS, profiles=tuple(Profile))
    (unit,) = selftest_baseline(main, options).units
    caught = np.array([o.points[0].regression for o in unit.profiles])
    se = math.sqrt(float(np.sum(caught * (1 - caught))) / RUNS)
    assert np.ptp(caught) < 4 * se


def test_the_first_line_of_the_cli_is_the_headline(main, tmp_path):
    options = SelftestOptions(drops=(0.0, DROP), runs=200)
    (unit,) = selftest_baseline(main, options).units
    result = CliRunner().invoke(
        cli,
        ["selftest", "--baseline", "main", "--store", str(REPO / "baselines"), "--runs", "200",
         "--inject-drop", str(DROP)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    first = result.output.splitlines()[0]
    assert "the worse of the calibrated and flat flip profiles" in first
    assert f"builtin {unit.headline.mde * 100:.1f} pts ({unit.headline.profile})" in first
    for outcome in unit.profiles:
        assert f"{outcome.profile} {outcome.mde * 100:.1f} pts" in result.output


def test_no_detectable_drop_is_the_worst_headline_and_ties_go_to_the_calibrated_profile():
    def outcome(profile: Profile, mde: float | None) -> ProfileSelftest:
        return ProfileSelftest(profile, (), mde, largest_drop=0.1)

    calibrated, flat = outcome(Profile.CALIBRATED, 0.04), outcome(Profile.FLAT, None)
    assert worst([calibrated, flat]) is flat
    assert worst([calibrated, outcome(Profile.FLAT, 0.04)]) is calibrated


def test_profiles_must_start_with_the_calibrated_one(main):
    with pytest.raises(BadInput, match="start with the calibrated"):
        selftest_baseline(main, SelftestOptions(runs=100, profiles=(Profile.FLAT,)))
    with pytest.raises(BadInput, match="each profile once"):
        selftest_baseline(
            main, SelftestOptions(runs=100, profiles=(Profile.CALIBRATED, Profile.CALIBRATED))
        )
