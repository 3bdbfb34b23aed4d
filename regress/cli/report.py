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
@handles_errors
def report(inputs: tuple[Path, ...], output: Path, title: str) -> None:
    """Write one HTML page (opens offline) from stored runs, gate JSON reports
    (`check --report-json`), bench JSON files (`bench -o FILE.json`) and sweep folders
    (`regress sweep -o DIR`: their table and three trade-off charts).

    \b
    The gate reports' verdicts head the page. Charts: accuracy by task with intervals, the
    gate's units (in points), answers flipped by the baseline's margin (first run against
    the others), latency distributions, accuracy vs latency and vs memory, resource use over
    time, a radar across models, history. A chart the inputs cannot draw is left out, with
    a line saying which input would add it.

    \b
    Example:
      regress report baselines/main runs/candidate bench.json gate.json -o report.html
    """
    require_extra("plotly")
    from regress.report.html import render_page
    from regress.report.sources import load_inputs

    page = render_page(load_inputs(list(inputs)), title)
    write_report(output, page.text)
    left_out = f"; {len(page.left_out)} left out for want of data" if page.left_out else ""
    stderr.print(f"wrote {output} ({len(page.drawn)} charts{left_out})")
