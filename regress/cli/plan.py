"""`regress plan`: what a gate can detect, and how many examples a given drop needs."""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, replace
from pathlib import Path

import click

from regress.checks import (
    MAX_JOBS,
    PROFILES,
    TYPICAL_DISCORDANCE,
    BudgetOptions,
    BudgetPlan,
    FlipProfile,
    ShardOptions,
    Throughput,
    TimingOptions,
    UnitPlan,
    gate_time,
    measure_throughput,
    plan_baseline,
    plan_budget,
    plan_shards,
    unit_tokens,
)
from regress.cli.common import (
    data_options,
    handles_errors,
    policy_option,
    task_options,
    timing,
    timing_options,
)
from regress.core.store import Store
from regress.gate.policy import Policy, load_policy
from regress.stats import SPENDING, Rule, SequentialDesign, accuracy_n, pass_n

FRACTION = click.FloatRange(0, 1, min_open=True, max_open=True)
UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}


class Budget(click.ParamType):
    """A wall time: a number and s, m or h (`10m`, `90s`, `1.5h`); a bare number is minutes."""

    name = "TIME"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        if isinstance(value, float):
            return value
        found = re.fullmatch(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*([smh]?)\s*", str(value))
        if found is None:
            self.fail(f"{value!r} is not a time: a number and s, m or h (10m, 90s, 1.5h)", param)
        seconds = float(found[1]) * UNITS[found[2] or "m"]
        if seconds <= 0:
            self.fail(f"{value!r}: a budget must be positive", param)
        return seconds


@click.command()
@click.option(
    "--discordance",
    type=click.FloatRange(0, 1, min_open=True),
    default=None,
    help="Share of examples whose answer changes, (b+c)/n. Without --baseline it is required; "
    f"with it, default {TYPICAL_DISCORDANCE} (real requantizations of SmolLM2: "
    "docs/results/proxy-efficiency.md).",
)
@click.option(
    "--drop",
    type=click.FloatRange(0, 1, min_open=True),
    default=None,
    help="True accuracy drop to detect, absolute (0.03 = three points). Required without "
    "--baseline; with it, default twice each unit's max_drop.",
)
@click.option(
    "--max-drop",
    type=click.FloatRange(0, 1, max_open=True),
    default=0.0,
    show_default=True,
    help="Without --baseline: the policy's max_drop (0: only the drop must be significant).",
)
@click.option(
    "--rule",
    type=click.Choice([r.value for r in Rule]),
    default=Rule.MARGIN.value,
    show_default=True,
    help="Without --baseline: the decision rule (docs/gate.md).",
)
@click.option("--alpha", type=FRACTION, default=0.05, show_default=True, help="False-alarm rate.")
@click.option(
    "--power", type=FRACTION, default=0.8, show_default=True, help="Chance to flag the drop."
)
@click.option(
    "--units",
    type=click.IntRange(1),
    default=1,
    show_default=True,
    help="Without --baseline: gated units sharing alpha (planned at alpha/units).",
)
@click.option("--baseline", "name", default=None, help="Plan every unit of this baseline.")
@click.option(
    "--store",
    type=click.Path(path_type=Path),
    default=Path("baselines"),
    show_default=True,
    help="Folder holding the baselines.",
)
@policy_option(
    "With --baseline: the policy's rule, thresholds, alpha and power (default: built-in)."
)
@click.option(
    "--sequential",
    is_flag=True,
    help="With --baseline: the expected examples under a sequential gate (the policy's "
    "`sequential:` design, or looks at 20/50/100%).",
)
@click.option(
    "--shards",
    is_flag=True,
    help="With --baseline: print the CI matrix (JSON for a workflow's strategy.matrix) of the "
    f"fewest `--shard i/n` jobs, at most {MAX_JOBS}, that each run in --job-minutes, at the "
    "throughput --time measures or --examples-per-second gives.",
)
@click.option(
    "--job-minutes",
    type=click.FloatRange(0, min_open=True),
    default=30.0,
    show_default=True,
    help="With --shards: each job's time budget.",
)
@click.option(
    "--setup-minutes",
    type=click.FloatRange(0),
    default=0.0,
    show_default=True,
    help="With --shards: what a job spends before regress runs (checkout, install).",
)
@click.option(
    "--examples-per-second",
    "--rate",
    type=click.FloatRange(0, min_open=True),
    default=None,
    help="With --shards or --budget: a rate measured before, instead of --time.",
)
@click.option(
    "--budget",
    type=Budget(),
    default=None,
    help="With --baseline: the CI budget of a check (10m, 90s, 1.5h): per gated accuracy unit, "
    "the pool, margin and looks that decide a Q8_0-like and a Q4_0-like candidate most surely "
    "within it, exactly (docs/gate.md#sequential-gate). Needs --time or --rate.",
)
@click.option(
    "--margin",
    "margins",
    type=FRACTION,
    multiple=True,
    help="With --budget: a max_drop to choose from (repeatable; default half, once and one "
    "and a half each unit's).",
)
@click.option("--json", "as_json", is_flag=True, help="With --budget: the plan as JSON.")
@timing_options
@task_options
@data_options
@handles_errors
def plan(
    discordance: float | None,
    drop: float | None,
    max_drop: float,
    rule: str,
    alpha: float,
    power: float,
    units: int,
    name: str | None,
    store: Path,
    policy_path: Path | None,
    sequential: bool,
    shards: bool,
    job_minutes: float,
    setup_minutes: float,
    examples_per_second: float | None,
    budget: float | None,
    margins: tuple[float, ...],
    as_json: bool,
    time_model: str | None,
    time_examples: int | None,
    include_path: tuple[Path, ...],
    golden: tuple[Path, ...],
    data_dir: Path | None,
    hf_datasets: bool,
) -> None:
    """Print the n a gate needs for a drop, or a baseline's MDE and n per unit.

    \b
    Examples:
      regress plan --discordance 0.12 --drop 0.03
      regress plan --discordance 0.15 --drop 0.04 --max-drop 0.02 --rule margin
      regress plan --baseline main --drop 0.05
      regress plan --baseline main --sequential --time smollm2-135m
      regress plan --baseline main --shards --job-minutes 30 --time smollm2-135m
      regress plan --baseline main --budget 10m --time smollm2-135m
    """
    if budget is not None:
        if name is None:
            raise click.UsageError("--budget plans a stored baseline: give --baseline")
        if (time_model is None) == (examples_per_second is None):
            raise click.UsageError("--budget needs exactly one of --time MODEL or --rate")
        chosen = timing(time_model, time_examples, include_path, golden, data_dir, hf_datasets)
        _plan_budget(
            name,
            store,
            load_policy(policy_path),
            budget,
            chosen,
            examples_per_second,
            margins,
            drop,
            as_json,
        )
        return
    if margins or as_json:
        raise click.UsageError("--margin and --json shape a --budget plan: give --budget")
    if shards:
        if name is None:
            raise click.UsageError("--shards plans a stored baseline: give --baseline")
        if (time_model is None) == (examples_per_second is None):
            raise click.UsageError(
                "--shards needs exactly one of --time MODEL or --examples-per-second"
            )
        chosen = timing(time_model, time_examples, include_path, golden, data_dir, hf_datasets)
        _plan_shards(
            name,
            store,
            chosen,
            examples_per_second,
            ShardOptions(job_minutes * 60, setup_minutes * 60),
        )
        return
    if examples_per_second is not None:
        raise click.UsageError("--examples-per-second prices --shards or --budget: give one")
    if name is not None:
        policy = load_policy(policy_path)
        if sequential and policy.sequential is None:
            policy = replace(policy, sequential=SequentialDesign())
        chosen = timing(time_model, time_examples, include_path, golden, data_dir, hf_datasets)
        _plan_baseline(name, store, policy, discordance or TYPICAL_DISCORDANCE, drop, chosen)
        return
    if sequential or time_model:
        raise click.UsageError("--sequential and --time plan a stored baseline: give --baseline")
    if discordance is None or drop is None:
        raise click.UsageError("give --discordance and --drop, or --baseline NAME")
    if drop > discordance:
        raise click.BadParameter("a drop cannot exceed the discordance", param_hint="--drop")
    if drop <= max_drop:
        raise click.BadParameter("a drop within --max-drop never fails", param_hint="--drop")
    n = accuracy_n(discordance, drop, max_drop, Rule(rule), alpha / units, power)
    click.echo(
        f"n = {n} examples per unit to detect a {drop:.1%} drop at {discordance:.1%} discordance "
        f"(rule {rule}, max_drop {max_drop:.1%}, one-sided alpha {alpha / units:.4g}, "
        f"power {power:.0%})"
    )
    # A PASS is an intersection of the units' tests, each at the full alpha.
    to_pass = pass_n(discordance, max_drop, alpha, power)
    if to_pass is not None:
        click.echo(
            f"n = {to_pass} examples per unit to show an unchanged candidate within max_drop "
            f"{max_drop:.1%} (a PASS under pass_requires: evidence), at the full alpha "
            f"{alpha:.4g} and the same power"
        )


def _plan_baseline(
    name: str,
    store: Path,
    policy: Policy,
    discordance: float,
    drop: float | None,
    timed: TimingOptions | None,
) -> None:
    baseline = Store(store).load(name)
    plans = plan_baseline(baseline, policy, discordance, drop)
    gated = sum(p.gated for p in plans)
    click.echo(
        f"baseline {name!r}: {gated} gated units sharing alpha {policy.alpha} (Bonferroni), "
        f"power {policy.power:.0%}, assuming {discordance:.1%} of answers flip "
        "(--discordance; real requantizations of SmolLM2 flipped 2.1-27.6% of ARC-Easy: "
        "docs/results/proxy-efficiency.md)"
    )
    header = "unit | kind | n | rule | max_drop | MDE | target drop | n for target | n to pass"
    design = policy.sequential
    if design is not None:
        header += " | expected n if unchanged / at max_drop / at 2x max_drop"
        looks = ", ".join(f"{t:.0%}" for t in design.looks)
        click.echo(
            f"sequential: looks at {looks} of each unit, {SPENDING[design.spending]} spending; the "
            "expected n is what a unit uses before it stops (exact: each look's tests)"
        )
    click.echo(header)
    for unit in plans:
        click.echo(" | ".join(_row(unit)))
    if timed is not None:
        _show_time(plans, measure_throughput(baseline, timed))


def _plan_budget(
    name: str,
    store: Path,
    policy: Policy,
    seconds: float,
    timed: TimingOptions | None,
    rate: float | None,
    margins: tuple[float, ...],
    drop: float | None,
    as_json: bool,
) -> None:
    """The budget plan: a table, or (--json) the same as one JSON document."""
    baseline = Store(store).load(name)
    units = unit_tokens(baseline)
    if timed is not None:
        measured = measure_throughput(baseline, timed)
        price = {unit: measured.unit_seconds(unit, 1) for unit in units}
        load, where = measured.load_seconds, measured.describe()
    else:
        assert rate is not None  # one of the two: checked by the caller
        price = {unit: 1 / rate for unit in units}
        load, where = 0.0, f"{rate:g} examples/s (--rate)"
    designs = (SequentialDesign(looks=(1.0,)), policy.sequential or SequentialDesign())
    profiles = tuple(p if p.passes or drop is None else replace(p, drop=drop) for p in PROFILES)
    options = BudgetOptions(seconds, price, load, margins or None, designs, profiles)
    planned = plan_budget(baseline, policy, options)
    if as_json:
        click.echo(json.dumps({"baseline": name, "rate": where, **asdict(planned)}, indent=2))
        return
    _show_budget(name, planned, where, profiles)


def _show_budget(
    name: str, planned: BudgetPlan, where: str, profiles: tuple[FlipProfile, ...]
) -> None:
    click.echo(
        f"baseline {name!r}, budget {planned.seconds / 60:.1f} min at {where}; "
        f"{planned.fixed_seconds / 60:.1f} min go to the load and the units run whole"
    )
    shown = " | ".join(f"P({'PASS' if p.passes else 'REGRESSION'}) {p.name}" for p in profiles)
    click.echo(
        "profiles: choice log-likelihoods moved by normal noise (Q8_0-like "
        f"{profiles[0].noise:g} nats, unchanged; Q4_0-like {profiles[1].noise:g} nats, "
        "twice max_drop unless --drop), flips from each unit's own margins "
        "(docs/results/flip-profiles.md); P exact (regress.stats.stopping_law)"
    )
    click.echo(
        f"unit | n | affordable | pool | margin | looks | {shown} | flips | E[n] | expected min"
    )
    for unit in planned.units:
        looks = "fixed" if unit.looks == (1.0,) else "/".join(f"{t:.0%}" for t in unit.looks)
        cells = [
            unit.name,
            f"{unit.n:,}",
            f"{unit.affordable:,}",
            f"{unit.pool:,}",
            f"{unit.margin * 100:g} pts",
            looks,
            *(f"{o.decided:.3f}" for o in unit.outcomes),
            " / ".join(f"{o.discordance:.1%}" for o in unit.outcomes)
            + ("" if unit.from_margins else " (assumed)"),
            " / ".join(f"{o.expected_n:,.0f}" for o in unit.outcomes),
            " / ".join(f"{o.expected_seconds / 60:.1f}" for o in unit.outcomes),
        ]
        click.echo(" | ".join(cells))


def _plan_shards(
    name: str,
    store: Path,
    timed: TimingOptions | None,
    examples_per_second: float | None,
    options: ShardOptions,
) -> None:
    """The matrix on stdout (one JSON line for $GITHUB_OUTPUT), what it rests on on stderr."""
    baseline = Store(store).load(name)
    rate = measure_throughput(baseline, timed) if timed is not None else examples_per_second
    assert rate is not None  # one of the two: checked by the caller
    planned = plan_shards(baseline, rate, options)
    click.echo(f"baseline {name!r}: {planned.describe()}", err=True)
    click.echo(json.dumps(planned.matrix(), separators=(",", ":")))


def _show_time(plans: list[UnitPlan], measured: Throughput) -> None:
    """The gate's minutes at the measured throughput, fixed and (with a design) sequential."""
    spent = gate_time(plans, measured)
    click.echo(f"wall time at {measured.describe()}:")
    click.echo(f"fixed gate, every example: {spent.fixed / 60:.1f} min")
    if spent.sequential is not None:
        unchanged, at_threshold, at_twice = (s / 60 for s in spent.sequential)
        click.echo(
            f"sequential gate, expected: {unchanged:.1f} min if unchanged / {at_threshold:.1f} "
            f"at max_drop / {at_twice:.1f} at 2x max_drop"
        )


def _row(unit: UnitPlan) -> list[str]:
    points = "–" if unit.kind.value == "perplexity" else f"{unit.threshold * 100:.1f} pts"
    return [
        unit.name + ("" if unit.gated else " (not gated)"),
        str(unit.kind),
        f"{unit.n:,}",
        str(unit.rule),
        points,
        "–" if unit.mde is None else f"{unit.mde * 100:.1f} pts",
        "–" if unit.drop is None else f"{unit.drop * 100:.1f} pts",
        "–" if unit.n_needed is None else f"{unit.n_needed:,}",
        "–" if unit.n_to_pass is None else f"{unit.n_to_pass:,}",
        *(
            []
            if unit.expected_n is None
            else [" / ".join(f"{math.ceil(x):,}" for x in unit.expected_n)]
        ),
    ]
