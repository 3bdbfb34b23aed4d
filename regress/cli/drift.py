"""`regress drift`: rerun a pinned baseline model with today's runtime."""

from __future__ import annotations

from pathlib import Path

import click

from regress.cli.baseline import store_option
from regress.cli.check import rerun_baseline
from regress.cli.common import (
    data_options,
    data_source,
    exit_with,
    handles_errors,
)
from regress.drift import drift_report, parse_age, render_drift_json, render_drift_markdown
from regress.errors import BadInput
from regress.models import file_sha256, resolve_model_path
from regress.store import Store


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
@click.option("--report-md", type=click.Path(path_type=Path))
@click.option("--report-json", type=click.Path(path_type=Path))
@data_options
@store_option
@handles_errors
def drift(
    baseline_name: str,
    max_age: str,
    model: str | None,
    model_args: str | None,
    report_md: Path | None,
    report_json: Path | None,
    data_dir: Path | None,
    hf_datasets: bool,
    store: Path,
) -> None:
    """Check that a pinned model still gives its baseline's answers with today's runtime.

    Verifies the model file's sha256 (exit 2 if it changed), reruns without the result cache,
    and reports flips, log-prob movement and what changed: library versions, CPU and llama.cpp
    build features, settings.

    \b
    Exit: 0 no answer changed (log-prob movement only warns), 1 answers changed (drift),
          2 model file swapped or bad input, 3 the run failed.
    """
    age = parse_age(max_age)
    base = Store(store).load(baseline_name)
    pinned = base.manifest.model
    ref = model or pinned.ref
    path = resolve_model_path(ref)
    actual = file_sha256(path) if path.is_file() else None
    if pinned.sha256 and actual != pinned.sha256:
        raise BadInput(
            f"model {ref} has sha256 {str(actual)[:12]}, baseline {baseline_name!r} pinned "
            f"{pinned.sha256[:12]}: the model file changed, this is not a drift check"
        )
    backend = base.manifest.backend.name
    outcome = rerun_baseline(
        f"drift {baseline_name}",
        base,
        ref,
        backend,
        model_args,
        data_source(data_dir, hf_datasets),
        name="drift",
        no_cache=True,
    )
    report = drift_report(base, outcome.run, age)
    markdown = render_drift_markdown(report)
    if report_md:
        report_md.write_text(markdown, encoding="utf-8")
    if report_json:
        report_json.write_text(render_drift_json(report), encoding="utf-8")
    click.echo(markdown)
    exit_with(report.exit_code)
