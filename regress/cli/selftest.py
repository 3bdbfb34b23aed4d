"""`regress selftest`: would this baseline's gate catch a drop of X? (regress.proxy.selftest)"""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from regress.checks import Throughput, measure_throughput
from regress.cli.baseline import store_option
from regress.cli.common import (
    data_options,
    handles_errors,
    policy_option,
    stdout,
    task_options,
    timing,
    timing_options,
)
from regress.cli.proxy import calibration_option
from regress.core.store import Store
from regress.gate.policy import load_policy
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
from regress.stats import SEED, SPENDING, SequentialDesign


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
@click.option(
    "--sequential",
    is_flag=True,
    help="Also simulate each gated unit under the policy's sequential design (or looks at "
    "20/50/100%): verdict rates and expected examples beside the fixed gate's.",
)
@calibration_option
@policy_option("Policy whose verdicts are simulated (default: built-in).")
@store_option
@timing_options
@task_options
@data_options
@handles_errors
def selftest_command(
    name: str,
    drops: tuple[float, ...],
    runs: int,
    seed: int,
    discordance: float | None,
    stress: bool,
    calibration_path: Path | None,
    sequential: bool,
    policy_path: Path | None,
    store: Path,
    time_model: str | None,
    time_examples: int | None,
    include_path: tuple[Path, ...],
    golden: tuple[Path, ...],
    data_dir: Path | None,
    hf_datasets: bool,
) -> None:
    """Simulate candidates from a baseline's own records: P(verdict) by injected drop, MDE.

    Flips are placed by the calibration's margin profile and, since real flips need not
    follow it, flat across margins too. The first line is the headline: each unit's minimum
    detectable drop under the worse of the two.

    \b
    Example:
      regress selftest --baseline main --inject-drop 0.001,0.02 --runs 1000
      regress selftest --baseline main --sequential --time smollm2-135m
    """
    policy = load_policy(policy_path)
    baseline = Store(store).load(name)
    options = SelftestOptions(
        drops=drops,
        runs=runs,
        seed=seed,
        discordance=discordance,
        calibration=load_calibration(calibration_path),
        policy=policy,
        profiles=(*PROFILES, Profile.REVERSED) if stress else PROFILES,
        sequential=(policy.sequential or SequentialDesign()) if sequential else None,
    )
    result = selftest_baseline(baseline, options)
    chosen = timing(time_model, time_examples, include_path, golden, data_dir, hf_datasets)
    show(result, None if chosen is None else measure_throughput(baseline, chosen))


def show(result: SelftestResult, measured: Throughput | None = None) -> None:
    """Print the headline MDEs, then one table per unit and its MDE under each profile (and
    the sequential design's table, priced at `measured` when given)."""
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
        if unit.sequential and result.sequential is not None:
            _show_sequential(unit, result.sequential, measured)
    if measured is not None:
        click.echo(f"minutes at {measured.describe()}")


def _show_sequential(
    unit: UnitSelftest, design: SequentialDesign, measured: Throughput | None
) -> None:
    looks = "/".join(f"{t:.0%}" for t in design.looks)
    table = Table(
        title=f"{unit.name} under the sequential gate: looks at {looks}, "
        f"{SPENDING[design.spending]} spending, flips placed flat, alpha split over the gated "
        "units"
    )
    columns = ["true drop", "REGRESSION seq / fixed", "PASS seq / fixed", "expected n"]
    if measured is not None:
        columns.append("expected min / fixed")
    for column in columns:
        table.add_column(column, justify="right")
    for p in unit.sequential:
        row = [
            f"{p.drop * 100:.1f} pts",
            f"{p.regression:.1%} / {p.fixed_regression:.1%}",
            f"{p.passed:.1%} / {p.fixed_passed:.1%}",
            f"{p.mean_n:,.0f} of {p.n:,}",
        ]
        if measured is not None:
            expected = measured.unit_seconds(unit.name, p.mean_n) / 60
            row.append(f"{expected:.1f} / {measured.unit_seconds(unit.name, p.n) / 60:.1f}")
        table.add_row(*row)
    stdout().print(table)


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
