"""`regress merge`: join shard runs into one run or baseline."""

from __future__ import annotations

from pathlib import Path

import click

from regress.cli.baseline import store_option
from regress.cli.common import command_line, handles_errors
from regress.core.merge import merge_runs
from regress.core.store import Store, check_replaceable, read_run, validate_name, write_run
from regress.gate.integrity import check_fit_to_store


@click.command()
@click.argument("shards", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--output", "-o", type=click.Path(path_type=Path), help="Write the merged run here.")
@click.option("--baseline", "baseline_name", help="Or store it as this baseline.")
@store_option
@handles_errors
def merge(
    shards: tuple[Path, ...], output: Path | None, baseline_name: str | None, store: Path
) -> None:
    """Join the runs of `--shard i/n` into one, deterministically.

    Records are identical to a run on one machine; the shards must share model, backend and
    suite and cover every shard exactly once.

    \b
    Example: regress merge s0/ s1/ s2/ --baseline main
    """
    if (output is None) == (baseline_name is None):
        raise click.UsageError("give exactly one of --output or --baseline")
    if baseline_name:
        validate_name(baseline_name)
    check_replaceable(output if output is not None else Store(store).path(str(baseline_name)))
    runs = [read_run(path) for path in shards]
    merged = merge_runs(runs, name=baseline_name or "merged", command=command_line())
    if baseline_name:
        check_fit_to_store(merged)  # a broken run never becomes a baseline
        target = Store(store).save(merged)
    else:
        assert output is not None
        write_run(merged, output)
        target = output
    n = sum(len(v) for v in merged.records.values())
    click.echo(f"merged {len(runs)} shards: {n} records in {len(merged.records)} tasks -> {target}")
