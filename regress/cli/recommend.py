"""`regress recommend`: a sweep's table and Pareto front, and the configuration to ship under
constraints."""

from __future__ import annotations

from pathlib import Path

import click

from regress.bench.choose import parse_bytes
from regress.cli.common import handles_errors
from regress.core.errors import BadInput
from regress.sweep.recommend import Limits, Option, Prefer, parse_latency_ms, recommend, render


@click.command("recommend")
@click.option(
    "--sweep",
    "sweep_dir",
    type=click.Path(path_type=Path, file_okay=False),
    required=True,
    help="A `regress sweep` output folder.",
)
@click.option("--max-latency", default=None, help="Per generated token: 50ms, 0.05s.")
@click.option("--max-memory", default=None, help="Peak RSS: 4GB, 512MiB.")
@click.option("--min-accuracy", type=float, default=None, help="Pooled accuracy floor: 0.5.")
@click.option(
    "--prefer",
    type=click.Choice([p.value for p in Prefer]),
    default="latency",
    show_default=True,
    help="Among configurations the paired accuracy test cannot tell apart, the best in this.",
)
@click.option(
    "--objectives",
    default=None,
    help="Pareto objectives, two or more of accuracy, latency_ms, pp_ts, peak_rss, size, ppl, "
    "kld (default: accuracy,latency_ms,peak_rss).",
)
@click.option(
    "--reference",
    default=None,
    help="Hypervolume reference point, one value per objective (default: each objective's "
    "worst, 10% of its range further out).",
)
@click.option("--alpha", type=float, default=0.05, show_default=True, help="Two-sided, per pair.")
@click.option("--table/--no-table", default=True, show_default=True, help="Print the table.")
@handles_errors
def recommend_command(
    sweep_dir: Path,
    max_latency: str | None,
    max_memory: str | None,
    min_accuracy: float | None,
    prefer: str,
    objectives: str | None,
    reference: str | None,
    alpha: float,
    table: bool,
) -> None:
    """The sweep's table and Pareto front, then the best configuration meeting the limits,
    why, and what relaxing each limit would buy.

    \b
    Example:
      regress recommend --sweep sweeps/smollm2 --max-latency 50ms --max-memory 4GB
    """
    # pandas and scipy load only when the command runs, so `regress` starts fast.
    from regress.report.sweep_markdown import sweep_table
    from regress.sweep.frontier import DEFAULT_OBJECTIVES, accuracy_test, analyse, parse_objectives

    if not 0 < alpha < 1:
        raise BadInput("--alpha must be in (0, 1)")
    ref = None
    if reference:
        try:
            ref = tuple(float(v) for v in reference.split(","))
        except ValueError:
            raise BadInput(
                f"--reference: expected numbers separated by commas: {reference}"
            ) from None
    chosen = parse_objectives(objectives) if objectives else DEFAULT_OBJECTIVES
    sweep, frontier = analyse(sweep_dir, chosen, alpha, ref)
    limits = Limits(
        max_latency_ms=parse_latency_ms(max_latency) if max_latency else None,
        max_memory_bytes=parse_bytes(max_memory) if max_memory else None,
        min_accuracy=min_accuracy,
    )
    distinct = [r for r in sweep.results if r.identical_to is None]
    options = [
        Option(
            r.name,
            r.overall.accuracy,
            r.overall.low,
            r.overall.high,
            r.speed.latency_ms,
            r.speed.peak_rss_bytes,
            r.size_bytes,
        )
        for r in distinct
    ]
    rec = recommend(options, limits, accuracy_test(sweep_dir, distinct), alpha, Prefer(prefer))
    if table:
        click.echo(sweep_table(sweep, frontier))
    asked = [
        f"--max-latency {max_latency}" if max_latency else "",
        f"--max-memory {max_memory}" if max_memory else "",
        f"--min-accuracy {min_accuracy:g}" if min_accuracy is not None else "",
    ]
    click.echo(render(rec, " ".join(a for a in asked if a)))
