"""`regress check`: rerun a baseline's examples on a candidate and gate on the paired test."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import click

from regress.backends import BACKENDS
from regress.backends.base import result_params
from regress.cli.baseline import store_option
from regress.cli.common import (
    data_options,
    data_source,
    exit_with,
    handles_errors,
    parse_args,
    run_options,
    run_with_progress,
)
from regress.compare import compare
from regress.comparison import Comparison
from regress.errors import BadInput
from regress.lm_eval_import import read_lm_eval_run
from regress.manifest import Run
from regress.policy import load_policy
from regress.report.json_report import render_json
from regress.report.markdown import render_markdown
from regress.runner import Outcome, baseline_specs
from regress.store import Store, read_run, write_run
from regress.tasks.base import DataSource


def rerun_baseline(
    label: str,
    base: Run,
    model: str,
    backend: str,
    model_args: str | None,
    source: DataSource,
    *,
    name: str,
    **options: Any,
) -> Outcome:
    """Rerun exactly the baseline's examples on `model`, behind a progress bar.

    The baseline's result-relevant load parameters carry over when the backend is the same;
    `model_args` (k=v,...) overrides them. `options` go to `run_with_progress` (cache, shard).
    """
    inherited: dict[str, Any] = {}
    if base.manifest.backend.name == backend:
        inherited = result_params(base.manifest.backend.params)
    return run_with_progress(
        label,
        baseline_specs(base),
        model,
        backend,
        {**inherited, **parse_args(model_args)},
        source,
        name=name,
        suite_name=base.manifest.suite_name,
        **options,
    )


@click.command()
@click.option("--baseline", "-b", "baseline_name", required=True, help="Baseline name in --store.")
@click.option("--model", "-m", help="Candidate: .gguf path, folder or packaged name.")
@click.option(
    "--candidate-run",
    type=click.Path(path_type=Path),
    help="Gate an already stored run (a merged shard run) instead of running --model.",
)
@click.option(
    "--candidate-samples",
    type=click.Path(path_type=Path),
    help="Gate an lm-eval run (its --output_path, written with --log_samples) instead of "
    "running --model.",
)
@click.option(
    "--backend", type=click.Choice(BACKENDS), default=None, help="Default: the baseline's backend."
)
@click.option("--model-args", default=None, help="k=v,... (default: the baseline's n_ctx etc.).")
@click.option(
    "--policy",
    "policy_path",
    type=click.Path(path_type=Path),
    default=None,
    help="Policy YAML (alpha, correction, test, max_drop, ...). Default: built-in.",
)
@click.option(
    "--report-md", type=click.Path(path_type=Path), help="Write the Markdown report here."
)
@click.option("--report-json", type=click.Path(path_type=Path), help="Write the JSON report here.")
@click.option(
    "--allow-mismatch",
    is_flag=True,
    help="Pair only identical documents when dataset/prompt hashes differ, instead of "
    "refusing (exit 2).",
)
@click.option(
    "--allow-backend-change",
    is_flag=True,
    help="Allow a candidate on another backend than the baseline (adds real noise).",
)
@data_options
@store_option
@run_options
@handles_errors
def check(
    baseline_name: str,
    model: str | None,
    candidate_run: Path | None,
    candidate_samples: Path | None,
    backend: str | None,
    model_args: str | None,
    policy_path: Path | None,
    report_md: Path | None,
    report_json: Path | None,
    allow_mismatch: bool,
    allow_backend_change: bool,
    data_dir: Path | None,
    hf_datasets: bool,
    store: Path,
    shard: str | None,
    save_run: Path | None,
    no_cache: bool,
    cache_dir: Path | None,
) -> None:
    """Gate a candidate MODEL against a stored baseline.

    Reruns exactly the baseline's examples with the same prompts, pairs them example by
    example, runs a one-sided McNemar test per unit (Holm-corrected), applies the policy and
    writes the reports.

    \b
    Exit: 0 pass (inconclusive warns), 1 regression, 2 bad input or incompatible baseline,
          3 the run failed (model would not load, error rate above policy).
    \b
    Examples:
      regress check --baseline main --model cand.gguf --report-md report.md
      regress check --baseline main --model cand.gguf --shard 0/2 --save-run shard0/
      regress merge shard0/ shard1/ -o cand/ && regress check -b main --candidate-run cand/
      regress check -b main --candidate-samples lm-eval-out/
    """
    if sum(x is not None for x in (model, candidate_run, candidate_samples)) != 1:
        raise click.UsageError(
            "give exactly one of --model, --candidate-run or --candidate-samples"
        )
    if shard and not save_run:
        raise click.UsageError("--shard needs --save-run DIR; gate the merged run afterwards")
    base = Store(store).load(baseline_name)
    policy = load_policy(policy_path)  # validated before the model runs
    if candidate_run is not None:
        result = compare(base, read_run(candidate_run), policy, allow_mismatch=allow_mismatch)
        emit(result, report_md, report_json)
        exit_with(result.exit_code)
        return
    if candidate_samples is not None:
        # The user chose these files, so a backend change needs no opt-in; it is still noise.
        candidate = read_lm_eval_run(candidate_samples, "candidate")
        result = compare(base, candidate, policy, allow_mismatch=allow_mismatch)
        theirs, ours = candidate.manifest.backend.name, base.manifest.backend.name
        if theirs != ours:
            note = (
                f"candidate read from lm-eval files ({theirs}), baseline ran on {ours}: part of "
                "any difference is backend noise, not the model"
            )
            result = dataclasses.replace(result, warnings=(note, *result.warnings))
        emit(result, report_md, report_json)
        exit_with(result.exit_code)
        return
    assert model is not None
    base_backend = base.manifest.backend.name
    if backend is None and base_backend not in BACKENDS:
        raise click.UsageError(
            f"baseline {baseline_name!r} came from {base_backend}: choose --backend for the "
            "candidate (with --allow-backend-change)"
        )
    chosen = backend or base_backend
    warnings = []
    if chosen != base_backend:
        if not allow_backend_change:
            raise BadInput(
                f"baseline {baseline_name!r} ran on {base_backend}, candidate on {chosen}: "
                "cross-backend log-probs differ (pass --allow-backend-change to compare anyway)"
            )
        warnings.append(
            f"candidate backend {chosen} differs from the baseline's {base_backend}: part of "
            "any difference is backend noise, not the model"
        )
    outcome = rerun_baseline(
        f"check {model}",
        base,
        model,
        chosen,
        model_args,
        data_source(data_dir, hf_datasets),
        name="candidate",
        no_cache=no_cache,
        cache_dir=cache_dir,
        shard=shard,
    )
    if save_run:
        write_run(outcome.run, save_run)
    if shard:
        click.echo(f"stored shard {shard} of the candidate run -> {save_run}")
        return
    result = compare(base, outcome.run, policy, allow_mismatch=allow_mismatch)
    if warnings:
        result = dataclasses.replace(result, warnings=(*warnings, *result.warnings))
    emit(result, report_md, report_json)
    exit_with(result.exit_code)


def emit(result: Comparison, report_md: Path | None, report_json: Path | None) -> None:
    """Write the reports and print the Markdown summary to stdout."""
    markdown = render_markdown(result)
    if report_md:
        report_md.parent.mkdir(parents=True, exist_ok=True)
        report_md.write_text(markdown, encoding="utf-8")
    if report_json:
        report_json.parent.mkdir(parents=True, exist_ok=True)
        report_json.write_text(render_json(result), encoding="utf-8")
    click.echo(markdown)
