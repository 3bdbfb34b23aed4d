"""`regress tasks`: the built-in and loaded tasks, with source, output type, metrics, size."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from regress.cli.common import (
    data_options,
    data_source,
    handles_errors,
    stdout,
    task_catalog,
    task_options,
)
from regress.tasks.listing import ListOptions, list_tasks


@click.command("tasks")
@click.argument("names", nargs=-1)
@click.option("--no-sizes", is_flag=True, help="Do not read the data to count documents.")
@task_options
@data_options
@handles_errors
def tasks_command(
    names: tuple[str, ...],
    no_sizes: bool,
    include_path: tuple[Path, ...],
    golden: tuple[Path, ...],
    data_dir: Path | None,
    hf_datasets: bool,
) -> None:
    """List tasks (all, or the NAMES given: tasks or groups) and what each one is.

    \b
    Examples:
      regress tasks --data-dir ../shared/data
      regress tasks --include-path examples/tasks --golden examples/golden/assistant.jsonl \\
          product_knowledge golden_assistant
    """
    catalog = task_catalog(include_path, golden)
    options = ListOptions(tuple(names), data_source(data_dir, hf_datasets), not no_sizes)
    table = Table("task", "unit", "output type", "metrics", "size", "source")
    rows = list_tasks(catalog, options)
    for row in rows:
        size = f"{row.size:,}" if row.size is not None else "-"
        table.add_row(row.name, row.unit, row.output_type, ", ".join(row.metrics), size, row.source)
    stdout().print(table)
    if not no_sizes and any(row.size is None for row in rows):
        click.echo("size '-': the task's data is not here (--data-dir, --hf-datasets)", err=True)
