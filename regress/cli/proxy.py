"""`regress proxy ...`: draw a margin-stratified proxy baseline from a full one, calibrate it."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import click
from rich.table import Table

from regress.cli.baseline import store_option
from regress.cli.common import handles_errors, stdout
from regress.core.errors import BadInput
from regress.core.proxy_design import ProxyDesign
from regress.core.store import Store, read_run
from regress.proxy import flip_rates
from regress.proxy.build import MIN_PER_STRATUM, ProxyOptions, build_proxy
from regress.stats import SEED

calibration_option = click.option(
    "--calibration",
    "calibration_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="Flip rates by margin quantile from `regress proxy calibrate` (default: the shipped "
    "SmolLM2 requantization measurement).",
)


@click.group()
def proxy() -> None:
    """Proxy baselines: a few examples chosen by margin that estimate a full suite."""


@proxy.command()
@click.option("--baseline", "parent", required=True, help="The full baseline to sample.")
@click.option("--budget", type=click.IntRange(2), required=True, help="Examples in the proxy.")
@click.option("--name", required=True, help="Name of the proxy baseline to write.")
@click.option(
    "--strata",
    type=click.IntRange(1),
    default=10,
    show_default=True,
    help="Margin strata per unit.",
)
@click.option("--seed", type=int, default=SEED, show_default=True, help="Sampling seed.")
@click.option(
    "--min-per-stratum",
    type=click.IntRange(2),
    default=MIN_PER_STRATUM,
    show_default=True,
    help="Floor of every stratum's sample.",
)
@calibration_option
@store_option
@handles_errors
def build(
    parent: str,
    budget: int,
    name: str,
    strata: int,
    seed: int,
    min_per_stratum: int,
    calibration_path: Path | None,
    store: Path,
) -> None:
    """Write baseline NAME: BUDGET examples of baseline PARENT, stratified by margin.

    \b
    Example:
      regress proxy build --baseline full --budget 600 --name proxy
      regress check --baseline proxy --model candidate.gguf   # estimates the full suite
    """
    baselines = Store(store)
    options = ProxyOptions(
        budget=budget,
        strata=strata,
        seed=seed,
        calibration=flip_rates.load_calibration(calibration_path),
        min_per_stratum=min_per_stratum,
    )
    run = build_proxy(baselines.load(parent), name, options)
    path = baselines.save(run)
    assert run.manifest.proxy is not None
    _show(run.manifest.proxy)
    click.echo(f"proxy {name!r} of {parent!r}: {budget} examples written to {path}")


@proxy.command()
@click.option("--baseline", "reference", required=True, help="The full reference baseline.")
@click.option(
    "--run",
    "runs",
    type=click.Path(path_type=Path, file_okay=False),
    multiple=True,
    required=True,
    help="A candidate run folder (--save-run) on the same examples; repeat for several.",
)
@click.option("--name", required=True, help="Name recorded in the calibration.")
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False), required=True)
@store_option
@handles_errors
def calibrate(reference: str, runs: tuple[Path, ...], name: str, output: Path, store: Path) -> None:
    """Measure flip rates by margin decile from real candidates, for `proxy build`."""
    measured = flip_rates.measure(
        Store(store).load(reference), [read_run(path) for path in runs], name
    )
    output.write_text(json.dumps(asdict(measured), indent=2) + "\n", encoding="utf-8")
    for quantile, rate in measured.points:
        click.echo(f"margin quantile {quantile:.2f}: {rate:.1%} of answers changed")
    click.echo(f"calibration {name!r} ({measured.source}) written to {output}")


@proxy.command()
@click.option("--baseline", "name", required=True, help="A proxy baseline.")
@store_option
@handles_errors
def show(name: str, store: Path) -> None:
    """Print a proxy's strata, inclusion probabilities, seed and calibration."""
    design = Store(store).load(name).manifest.proxy
    if design is None:
        raise BadInput(f"{name} is not a proxy baseline")
    _show(design)


def _show(design: ProxyDesign) -> None:
    table = Table(title=f"proxy of {design.parent} (seed {design.seed})")
    for column in ("unit", "stratum", "margin", "N_h", "n_h", "inclusion p", "flip rate"):
        table.add_column(column, justify="left" if column == "unit" else "right")
    for s in design.strata:
        table.add_row(
            s.unit,
            str(s.index),
            f"{s.margin_low:.3g} – {s.margin_high:.3g}",
            f"{s.population:,}",
            f"{s.sampled:,}",
            f"{s.inclusion_probability:.3f}",
            f"{s.flip_rate:.1%}",
        )
    stdout().print(table)
    click.echo(f"calibration {design.calibration.name}: {design.calibration.source}")
