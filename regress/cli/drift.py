"""`regress drift`: rerun a pinned baseline model with today's runtime."""

from __future__ import annotations

from pathlib import Path

import click

from regress.checks import DriftOptions, check_drift
from regress.cli.baseline import store_option
from regress.cli.common import (
    command_line,
    data_options,
    data_source,
    exit_with,
    handles_errors,
    parse_args,
    policy_option,
    progress_bar,
    task_catalog,
    task_options,
    write_report,
)
from regress.core.store import Store
from regress.gate.drift import parse_age
from regress.gate.policy import load_policy
from regress.report.drift import render_drift_json, render_drift_markdown


@click.command()
@click.option("--baseline", "-b", "baseline_name", required=True, help="Baseline to re-check.")
@click.option(
    "--max-age",
    default="30d",
    show_default=True,
    help="Warn when the baseline is older than this (h, d or w).",
)
@click.option(
    "--model",
    "-m",
    default=None,
    help="Where the pinned model file is now (default: the baseline's model ref).",
)
@click.option(
    "--model-args",
    default=None,
    help="Override a setting (e.g. n_ctx=512) to see whether it moves results.",
)
@policy_option("Policy YAML: alpha and correction for the noise tests (default: built-in).")
@click.option("--report-md", type=click.Path(path_type=Path))
@click.option("--report-json", type=click.Path(path_type=Path))
@task_options
@data_options
@store_option
@handles_errors
def drift(
    baseline_name: str,
    max_age: str,
    model: str | None,
    model_args: str | None,
    policy_path: Path | None,
    report_md: Path | None,
    report_json: Path | None,
    include_path: tuple[Path, ...],
    golden: tuple[Path, ...],
    data_dir: Path | None,
    hf_datasets: bool,
    store: Path,
) -> None:
    """Check that a pinned model still gives its baseline's answers with today's runtime.

    Reruns without the result cache, names the cause of any difference (the model file, the
    runtime or a setting, the CPU build, nothing) and tests the paired answers against the
    measured noise of that cause: another CPU build that moves a few answers is STABLE.

    \b
    Exit: 0 stable (log-prob movement alone only warns), 1 drift (the pinned file changed,
          or answers moved beyond the cause's noise), 2 bad input, 3 the run failed.
    """
    options = DriftOptions(
        policy=load_policy(policy_path),
        source=data_source(data_dir, hf_datasets),
        max_age=parse_age(max_age),
        model=model,
        model_args=parse_args(model_args),
        command=command_line(),
        tasks=task_catalog(include_path, golden),
    )
    report = check_drift(Store(store).load(baseline_name), options, progress_bar)
    markdown = render_drift_markdown(report)
    if report_md:
        write_report(report_md, markdown)
    if report_json:
        write_report(report_json, render_drift_json(report))
    click.echo(markdown)
    exit_with(report.exit_code)
