"""`regress eval`: score a model on tasks and write lm-eval compatible files."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from regress.cli.common import (
    LIMIT,
    LmEvalFlags,
    TasksCommand,
    cache_folder,
    check_task_names,
    chosen_suite,
    command_line,
    data_options,
    data_source,
    formats_option,
    generation_options,
    handles_errors,
    lm_eval_options,
    model_options,
    parse_args,
    parse_shard,
    run_options,
    run_with_progress,
    stdout,
    task_catalog,
    task_options,
)
from regress.core.store import check_replaceable, write_run
from regress.gate.format_spread import FormatSpread, format_spreads
from regress.gate.integrity import check_fit_to_store
from regress.report.lm_eval import group_metrics, header_line, model_folder, write_lm_eval
from regress.run.cost import Prices, TaskCost, load_prices, run_costs
from regress.run.engine import TaskRun
from regress.run.generation import GenerationSettings
from regress.run.runner import RunPlan, suite_specs


@click.command("eval", cls=TasksCommand)
@model_options
@click.option("--tasks", "-t", help="Comma-separated tasks or groups (mmlu, arc_easy, builtin).")
@click.option("--suite", type=click.Path(path_type=Path), help="A suite YAML instead of --tasks.")
@click.option("--num-fewshot", "-k", type=click.IntRange(0), default=None, help="Shots per prompt.")
@click.option(
    "--limit",
    type=LIMIT,
    default=None,
    help="First N documents per task, or a fraction of them (0.1), as lm-eval's --limit.",
)
@formats_option
@click.option(
    "--output-path",
    "-o",
    type=click.Path(path_type=Path),
    help="Folder for results: they go to its subfolder named after the model, as lm-eval's.",
)
@click.option("--log-samples", is_flag=True, help="Also write samples_<task>_<date>.jsonl.")
@click.option(
    "--prices",
    type=click.Path(path_type=Path),
    help="A price table (YAML: input_per_1k, output_per_1k, per_second, currency): adds "
    "cost and cost per success to the generation tasks' token table.",
)
@task_options
@data_options
@run_options
@handles_errors
@generation_options
@lm_eval_options
def eval_command(
    model: str,
    backend: str,
    model_args: str | None,
    tasks: str | None,
    suite: Path | None,
    num_fewshot: int | None,
    limit: int | float | None,
    formats: int | None,
    output_path: Path | None,
    log_samples: bool,
    prices: Path | None,
    include_path: tuple[Path, ...],
    golden: tuple[Path, ...],
    data_dir: Path | None,
    hf_datasets: bool,
    shard: str | None,
    save_run: Path | None,
    no_cache: bool,
    cache_dir: Path | None,
    generation: GenerationSettings,
    flags: LmEvalFlags,
) -> None:
    """Evaluate MODEL on tasks, lm-evaluation-harness style.

    \b
    Examples:
      regress eval -m smollm2-135m -t builtin --limit 100
      regress eval -m smollm2-135m -t arc_easy,mmlu -k 5 --limit 100 \\
          --data-dir ../shared/data -o out/ --log-samples
    """
    spec = chosen_suite(tasks, suite, num_fewshot, limit, golden, formats)
    backend = spec.backend or backend
    args = flags.model_args(backend, {**spec.model_args, **parse_args(model_args)})
    generation = flags.generation(generation)
    catalog = task_catalog(include_path, golden, spec)
    check_task_names(spec, catalog)
    specs = suite_specs(spec, catalog, generation)
    if save_run:
        check_replaceable(save_run)  # before the run, not after it

    source = data_source(data_dir, hf_datasets)
    plan = RunPlan(
        specs=tuple(specs),
        model=model,
        backend=backend,
        model_args=args,
        source=source,
        name="eval",
        suite_name=spec.name,
        cache_dir=cache_folder(no_cache, cache_dir),
        shard=parse_shard(shard),
        command=command_line(),
    )
    price_table = load_prices(prices) if prices else None
    outcome = run_with_progress(f"eval {model}", plan)
    batch_size = args.get("batch_size", 1) if backend == "hf" else flags.batch_size or 1
    click.echo(
        header_line(
            backend,
            {"pretrained": model, **args},
            generation.gen_kwargs,
            limit,
            num_fewshot,
            batch_size,
        )
    )
    stdout().print(results_table(outcome.task_runs))
    spreads = format_spreads(
        {r.task.name: r.info for r in outcome.task_runs},
        {r.task.name: r.records for r in outcome.task_runs},
    )
    if spreads:
        stdout().print(spread_table(spreads))
    generating = {
        r.task.name: r.records for r in outcome.task_runs if r.info.output_type == "generate_until"
    }
    if generating:
        costs = run_costs(generating, price_table or Prices(), outcome.elapsed_s)
        stdout().print(cost_table(costs, price_table))
    check_fit_to_store(outcome.run)  # a broken or empty run writes no result files
    if save_run:
        write_run(outcome.run, save_run)
    if output_path:
        config = {
            "model": model,
            "backend": outcome.run.manifest.backend.name,
            "model_args": outcome.run.manifest.backend.params,
            "model_sha256": outcome.run.manifest.model.sha256,
        }
        folder = model_folder(output_path, model)
        for path in write_lm_eval(
            outcome.task_runs, folder, config, outcome.elapsed_s, log_samples
        ):
            click.echo(f"wrote {path}", err=True)


def cost_table(costs: list[TaskCost], prices: Prices | None) -> Table:
    """Tokens, reasoning overhead, Token Efficiency Score and (with prices) cost per task."""
    table = Table(
        "Task",
        "Samples",
        "Successes",
        "Output tok/sample",
        "Reasoning",
        "TES",
        "Cost",
        "Per success",
    )
    for c in costs:
        money = prices is not None
        table.add_row(
            c.task,
            str(c.samples),
            f"{c.successes:g}",
            f"{c.output_tokens / max(c.samples, 1):.1f}",
            "n/a" if c.reasoning_overhead is None else f"{c.reasoning_overhead:.2f}x",
            "n/a" if c.tes is None else f"{c.tes:.2f}",
            f"{c.cost:.6f} {prices.currency}" if prices is not None else "no prices",
            f"{c.cost_per_success:.6f}" if money and c.cost_per_success is not None else "-",
        )
    return table


def spread_table(spreads: list[FormatSpread]) -> Table:
    """Each unit's accuracy in every prompt format, and the spread with its interval."""
    table = Table(
        "Unit", "n", "Accuracy per format", "Worst", "Median", "Best", "Spread [95% CI]",
        title="Prompt formats (docs/tasks.md#prompt-formats)",
    )  # fmt: skip
    for s in spreads:
        per = "  ".join(
            f"{label.replace('fmt', 'f') or 'as is'} {a:.1%}"
            for label, a in zip(s.formats, s.accuracy, strict=True)
        )
        table.add_row(
            s.unit, str(s.n), per, f"{s.worst:.1%}", f"{s.median:.1%}", f"{s.best:.1%}",
            f"{s.spread * 100:.1f} pts [{s.low * 100:.1f}, {s.high * 100:.1f}]",
        )  # fmt: skip
    return table


def results_table(runs: list[TaskRun]) -> Table:
    """lm-eval's results table: one row per task metric, groups first."""
    table = Table("Tasks", "Version", "Filter", "n-shot", "Metric", "", "Value", "", "Stderr")
    groups: dict[str, list[TaskRun]] = {}
    for member in runs:
        if member.task.group:
            groups.setdefault(member.task.group, []).append(member)
    rows: list[tuple[str, TaskRun | None, dict[str, float], TaskRun]] = [
        (name, None, group_metrics(members), members[0]) for name, members in groups.items()
    ]
    rows += [(" - " + r.task.name if r.task.group else r.task.name, r, r.metrics, r) for r in runs]
    for label, run, metrics, ref in rows:
        hib = ref.task.higher_is_better
        for metric, value in sorted(metrics.items()):
            if metric.endswith("_stderr"):
                continue
            stderr = metrics.get(f"{metric}_stderr")
            table.add_row(
                label,
                str(run.task.version) if run else "",
                "none",
                str(ref.info.num_fewshot),
                metric,
                "↑" if hib.get(metric, not metric.startswith("failure_")) else "↓",
                f"{value:.4f}",
                "±" if stderr is not None else "",
                f"{stderr:.4f}" if stderr is not None else "N/A",
            )
            label = ""
    return table
