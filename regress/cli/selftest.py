"""`regress selftest`: would this baseline's gate catch a drop of X? (regress.proxy.selftest)"""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from regress.cli.baseline import store_option
from regress.cli.common import handles_errors, policy_option, stdout
from regress.cli.proxy import calibration_option
from regress.core.store import Store
from regress.gate.policy import load_policy
from regress.gate.stats import SEED
from regress.proxy.flip_rates import load_calibration
from regress.proxy.selftest import (
    DROPS,
    PROFILES,
    Profile,
    ProfileSelftest,
    SelftestOptions,
    SelftestResult,
    UnitSelftest,
    selftest_baseline,
)


def _drops(_: click.Context, __: click.Parameter, text: str | None) -> tuple[float, ...]:
    if text is None:
        return DROPS
    try:
        values = tuple(float(x) for x in text.split(","))
    except ValueError as exc:
        raise click.BadParameter("a comma-separated list of drops, e.g. 0.001,0.02") from exc
    if not all(0 <= v < 1 for v in values):
        raise click.BadParameter("drops are fractions in [0, 1): 0.02 is two points")
    return tuple(sorted({0.0, *values}))


@click.command("selftest")
@click.option("--baseline", "name", required=True, help="Baseline (plain or proxy) to test.")
@click.option(
    "--inject-drop",
    "drops",
    callback=_drops,
    default=None,
    help="Comma-separated true drops to inject (fractions; no drop is always included). "
    "Default 0.001,0.01,0.02,0.03,0.05.",
)
@click.option("--runs", type=click.IntRange(100), default=1000, show_default=True)
@click.option("--seed", type=int, default=SEED, show_default=True)
@click.option(
    "--discordance",
    type=click.FloatRange(0, 1, min_open=True, max_open=True),
    default=None,
    help="Share of answers a candidate changes (default: the calibration's mean).",
)
@click.option(
    "--reversed",
    "stress",
    is_flag=True,
    help="Also simulate flips placed where the baseline was surest (the calibration mirrored), "
    "a stress test; the headline then counts it too.",
)
@calibration_option
@policy_option("Policy whose verdicts are simulated (default: built-in).")
@store_option
@handles_errors
def selftest_command(
    name: str,
    drops: tuple[float, ...],
    runs: int,
    seed: int,
    discordance: float | None,
    stress: bool,
    calibration_path: Path | None,
    policy_path: Path | None,
    store: Path,
) -> None:
    """Simulate candidates from a baseline's own records: P(verdict) by injected drop, MDE.

    Flips are placed by the calibration's margin profile and, since real flips need not
    follow it, flat across margins too. The first line is the headline: each unit's minimum
    detectable drop under the worse of the two.

    \b
    Example:
      regress selftest --baseline main --inject-drop 0.001,0.02 --runs 1000
    """
    options = SelftestOptions(
        drops=drops,
        runs=runs,
        seed=seed,
        discordance=discordance,
        calibration=load_calibration(calibration_path),
        policy=load_policy(policy_path),
        profiles=(*PROFILES, Profile.REVERSED) if stress else PROFILES,
    )
    show(selftest_baseline(Store(store).load(name), options))


def show(result: SelftestResult) -> None:
    """Print the headline MDEs, then one table per unit and its MDE under each profile."""
    click.echo(headline(result))
    what = f"proxy of {result.proxy_of}" if result.proxy_of else "plain baseline"
    click.echo(
        f"baseline {result.baseline!r} ({what}), {result.runs:,} simulated candidates per row, "
        f"seed {result.seed}; flips placed by {result.calibration}"
    )
    for unit in result.units:
        if not unit.simulated:
            click.echo(f"{unit.name}: not right/wrong, not simulated")
            continue
        size = f"n {unit.n:,}" + (f" of {unit.population:,}" if unit.population != unit.n else "")
        table = Table(
            title=f"{unit.name}: {size}, rule {unit.rule}, max_drop {unit.threshold:.1%}, "
            f"{unit.discordance:.1%} of answers change" + ("" if unit.gated else " (not gated)")
        )
        for column in ("true drop", "flip profile", "REGRESSION", "INCONCLUSIVE", "PASS"):
            table.add_column(column, justify="left" if column == "flip profile" else "right")
        for row, drop in enumerate(unit.points):
            if row:
                table.add_section()
            for outcome in unit.profiles:
                p = outcome.points[row]
                table.add_row(
                    f"{drop.drop * 100:.1f} pts" if outcome is unit.profiles[0] else "",
                    str(outcome.profile),
                    f"{p.regression:.1%}",
                    f"{p.inconclusive:.1%}",
                    f"{p.passed:.1%}",
                )
        stdout().print(table)
        if not unit.gated:
            click.echo(f"{unit.name}: not gated, no minimum detectable drop")
            continue
        each = "; ".join(f"{o.profile} {_mde(o)}" for o in unit.profiles)
        click.echo(
            f"{unit.name}: minimum detectable drop (REGRESSION in {result.power:.0%} of runs): "
            f"{each}"
        )


def headline(result: SelftestResult) -> str:
    """One line: each gated unit's MDE under its worst simulated flip profile."""
    names = [str(p) for p in result.profiles]
    which = (
        f"the worse of the {names[0]} and {names[1]} flip profiles"
        if len(names) == 2
        else f"the worst of the {', '.join(names[:-1])} and {names[-1]} flip profiles"
        if len(names) > 2
        else f"the {names[0]} flip profile"
    )
    units = ", ".join(_unit_headline(u) for u in result.units) or "no units"
    return f"minimum detectable drop (REGRESSION in {result.power:.0%} of runs, {which}): {units}"


def _unit_headline(unit: UnitSelftest) -> str:
    if not unit.simulated:
        return f"{unit.name} not simulated"
    if unit.headline is None:
        return f"{unit.name} not gated"
    return f"{unit.name} {_mde(unit.headline)} ({unit.headline.profile})"


def _mde(outcome: ProfileSelftest) -> str:
    if outcome.mde is not None:
        return f"{outcome.mde * 100:.1f} pts"
    return f"none up to {outcome.largest_drop * 100:.1f} pts (the most these examples can drop)"
