"""`regress history`: the gate's history file drawn as one offline page."""

from __future__ import annotations

from pathlib import Path

import click

from regress.cli.bench import require_extra
from regress.cli.common import handles_errors, stderr, write_report


@click.command()
@click.option(
    "--file",
    "-f",
    "history_file",
    type=click.Path(path_type=Path),
    default=Path("history.jsonl"),
    show_default=True,
    help="The history file `regress check --record-history` appends to.",
)
@click.option(
    "--output", "-o", type=click.Path(path_type=Path), required=True, help="The HTML file to write."
)
@click.option("--title", default="regress history", show_default=True, help="Page title.")
@handles_errors
def history(history_file: Path, output: Path, title: str) -> None:
    """Draw the gate's history file (`check --record-history`) as one offline page.

    \b
    One panel per unit: the candidate's accuracy at each run with its 95% band, markers
    coloured by the unit's verdict. Where the fingerprint (runtime or scoring), the baseline
    or the suite changed, a dashed line says so and the points are not joined across it.
    A table lists every run: commit, date, baseline, candidate, runtime, verdict, tokens.

    \b
    Example:
      regress check -b main -m model.gguf --record-history history.jsonl
      regress history --file history.jsonl -o history.html
    """
    require_extra("plotly")
    from regress.report.history import read_history
    from regress.report.history_page import history_page

    entries = read_history(history_file)
    write_report(output, history_page(entries, title))
    units = len({u.name for e in entries for u in e.units})
    stderr.print(f"wrote {output} ({len(entries)} runs, {units} units)")
