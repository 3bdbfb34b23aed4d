"""`regress report`: one self-contained HTML page of accuracy runs, gate reports and benches."""

from __future__ import annotations

from pathlib import Path

import click

from regress.cli.bench import require_extra
from regress.cli.common import handles_errors, stderr, write_report


@click.command()
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path, exists=True))
@click.option(
    "--output", "-o", type=click.Path(path_type=Path), required=True, help="The HTML file to write."
)
@click.option("--title", default="regress report", show_default=True, help="Page title.")
@click.option(
    "--view",
    type=click.Choice(["exec", "dev", "efficiency", "all"]),
    default=None,
    help="A report for one reader: exec (verdicts, decision gates, frontier, cost, trend), dev "
    "(paired units, task heatmaps, failure modes, examples by outcome), efficiency (tokens, "
    "TES, over-thinkers); all: the three as tabs. Default: every chart on one page.",
)
@click.option(
    "--prices",
    type=click.Path(path_type=Path),
    default=None,
    help="A price table (YAML: input_per_1k, output_per_1k, currency, and a judge: block) "
    "for the views' cost per success and the judge's calls.",
)
@handles_errors
def report(
    inputs: tuple[Path, ...], output: Path, title: str, view: str | None, prices: Path | None
) -> None:
    """Write one HTML page (opens offline) from stored runs, gate JSON reports
    (`check --report-json`), bench JSON files (`bench -o FILE.json`), sweep folders
    (`regress sweep -o DIR`: their table and three trade-off charts) and history files
    (`check --record-history`, `.jsonl`).

    \b
    The gate reports' verdicts head the page. Charts: accuracy by task with intervals, the
    gate's units (in points), answers flipped by the baseline's margin (first run against
    the others), latency distributions, accuracy vs latency and vs memory, resource use over
    time, a radar across models, history. A chart the inputs cannot draw is left out, with
    a line saying which input would add it.

    \b
    Examples:
      regress report baselines/main runs/candidate bench.json gate.json -o report.html
      regress report baselines/main runs/cand gate.json bench.json history.jsonl \
          --view all --prices prices.yaml -o views.html
    """
    require_extra("plotly")
    if prices is not None and view is None:
        raise click.UsageError("--prices applies to the views: add --view")
    from regress.report.html import render_page
    from regress.report.sources import load_inputs

    loaded = load_inputs(list(inputs))
    if view is None:
        page = render_page(loaded, title)
    else:
        from regress.report.views import View, render_views
        from regress.run.cost import load_prices

        table = load_prices(prices) if prices is not None else None
        page = render_views(loaded, View(view), title, table)
    write_report(output, page.text)
    left_out = f"; {len(page.left_out)} left out for want of data" if page.left_out else ""
    charts = f"{len(page.drawn)} chart{'' if len(page.drawn) == 1 else 's'}"
    stderr.print(f"wrote {output} ({charts}{left_out})")
