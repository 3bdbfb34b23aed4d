"""`regress baseline ...`: create, list, show, verify and promote stored baselines."""

from __future__ import annotations

import json
from pathlib import Path

import click
from rich.table import Table

from regress.checks import small_units, verify_baseline
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
    policy_option,
    run_options,
    run_with_progress,
    stdout,
    task_catalog,
    task_options,
    write_report,
)
from regress.core.errors import BadInput
from regress.core.store import (
    SaveOptions,
    Store,
    check_baseline_target,
    check_replaceable,
    read_run,
    save_baseline,
    validate_name,
    write_run,
)
from regress.gate.golden_rules import FRAGILE_MARGIN, fragile_items
from regress.gate.integrity import as_baseline, check_fit_to_store
from regress.gate.policy import load_policy
from regress.run.generation import GenerationSettings
from regress.run.inspect_import import read_inspect_log
from regress.run.lm_eval_import import lm_eval_selection, read_lm_eval_run
from regress.run.runner import RunPlan, suite_specs

store_option = click.option(
    "--store",
    type=click.Path(path_type=Path),
    default=Path("baselines"),
    show_default=True,
    help="Folder holding the baselines.",
)
force_option = click.option(
    "--force",
    is_flag=True,
    help="Replace baseline NAME if it exists (without it, an existing one is refused).",
)


@click.group()
def baseline() -> None:
    """Manage the baseline store (baselines/<name>/, meant to be committed)."""


@baseline.command(cls=TasksCommand)
@click.option("--name", required=True, help="Baseline name, e.g. main.")
@model_options
@click.option(
    "--suite", type=click.Path(path_type=Path), help="Suite YAML (tasks, shots, subsets)."
)
@click.option("--tasks", "-t", help="Inline suite: comma-separated tasks or groups.")
@click.option("--num-fewshot", "-k", type=click.IntRange(0), default=None)
@click.option(
    "--limit",
    type=LIMIT,
    default=None,
    help="First N documents per task, or a fraction of them (0.1), as lm-eval's --limit.",
)
@formats_option
@policy_option("Policy YAML the baseline will gate with: warns about units under its min_examples.")
@task_options
@data_options
@store_option
@force_option
@run_options
@handles_errors
@generation_options
@lm_eval_options
def create(
    name: str,
    model: str,
    backend: str,
    model_args: str | None,
    suite: Path | None,
    tasks: str | None,
    num_fewshot: int | None,
    limit: int | float | None,
    formats: int | None,
    policy_path: Path | None,
    include_path: tuple[Path, ...],
    golden: tuple[Path, ...],
    data_dir: Path | None,
    hf_datasets: bool,
    store: Path,
    force: bool,
    shard: str | None,
    save_run: Path | None,
    no_cache: bool,
    cache_dir: Path | None,
    generation: GenerationSettings,
    flags: LmEvalFlags,
) -> None:
    """Evaluate a suite on MODEL and store the records as baseline NAME.

    With --shard, the partial run goes to --save-run instead of the store; join the shards
    with `regress merge DIR... --baseline NAME`.

    \b
    Example:
      regress baseline create --name main --model smollm2-135m --tasks builtin --limit 100
    """
    validate_name(name)
    if shard and not save_run:
        raise click.UsageError("--shard needs --save-run DIR (join shards with `regress merge`)")
    policy = load_policy(policy_path)  # validated before the model runs
    spec = chosen_suite(tasks, suite, num_fewshot, limit, golden, formats)
    backend = spec.backend or backend
    args = flags.model_args(backend, {**spec.model_args, **parse_args(model_args)})
    catalog = task_catalog(include_path, golden, spec)
    check_task_names(spec, catalog)
    specs = suite_specs(spec, catalog, flags.generation(generation))
    # Refuse a place the run could not be stored before spending minutes on it.
    if save_run:
        check_replaceable(save_run)
    saving = SaveOptions(force=force)
    if not shard:
        check_baseline_target(Store(store), name, saving)
    plan = RunPlan(
        specs=tuple(specs),
        model=model,
        backend=backend,
        model_args=args,
        source=data_source(data_dir, hf_datasets),
        name=name,
        suite_name=spec.name,
        cache_dir=cache_folder(no_cache, cache_dir),
        shard=parse_shard(shard),
        command=command_line(),
    )
    outcome = run_with_progress(f"baseline {name}", plan)
    check_fit_to_store(outcome.run)  # a broken or empty run is never stored
    if save_run:
        write_run(outcome.run, save_run)
        if shard:
            click.echo(f"stored shard {shard} of baseline {name!r} -> {save_run}")
            return
    path = save_baseline(Store(store), outcome.run, saving)
    n = sum(t.n for t in outcome.run.manifest.tasks.values())
    click.echo(f"stored baseline {name!r}: {n} examples in {len(specs)} tasks -> {path}")
    for task, doc_id, margin in fragile_items(outcome.run):
        click.echo(
            f"warning: {task} doc {doc_id} is must-pass but right by a margin of {margin:.3f} "
            f"nats (< {FRAGILE_MARGIN}): it may fail on another CPU with no model change",
            err=True,
        )
    for line in small_units(outcome.run, policy):
        click.echo(f"warning: {line}", err=True)


@baseline.command("list")
@store_option
@handles_errors
def list_(store: Path) -> None:
    """List the baselines in the store."""
    table = Table("name", "model", "sha256", "backend", "tasks", "examples", "created")
    st = Store(store)
    names = st.names()
    if not store.is_dir():
        raise BadInput(f"no store folder {store} (--store)")
    if not names:
        click.echo(f"no baselines in {store}", err=True)
        return
    for name in names:
        m = st.load(name).manifest
        n = sum(t.n for t in m.tasks.values())
        table.add_row(
            name,
            m.model.ref,
            m.model.sha256[:12],
            m.backend.name,
            str(len(m.tasks)),
            str(n),
            m.created,
        )
    stdout().print(table)


@baseline.command()
@click.argument("name")
@store_option
@handles_errors
def show(name: str, store: Path) -> None:
    """Show a baseline's fingerprint and per-task accuracy."""
    run = Store(store).load(name)
    m = run.manifest
    console = stdout()
    console.print(f"[bold]{m.name}[/] created {m.created} by regress {m.regress_version}")
    console.print(f"model   {m.model.ref}  sha256 {m.model.sha256}  {m.model.quantization}")
    console.print(f"backend {m.backend.name} {m.backend.version}  {m.backend.params}")
    console.print(f"suite   {m.suite_name}   command: {m.command}")
    table = Table("task", "group", "n", "shots", "metric", "value", "dataset hash", "prompt hash")
    for task, info in sorted(m.tasks.items()):
        records = run.records[task]
        values = [
            r.correct if info.output_type != "loglikelihood_rolling" else None for r in records
        ]
        scored = [v for v in values if v is not None]
        value = f"{sum(scored) / len(scored):.4f}" if scored else "-"
        table.add_row(
            task,
            info.group or "",
            str(info.n),
            str(info.num_fewshot),
            info.metric,
            value,
            info.dataset_hash[:12],
            info.prompt_hash[:12],
        )
    console.print(table)


@baseline.command()
@click.argument("name")
@store_option
@handles_errors
def verify(name: str, store: Path) -> None:
    """Check a baseline is intact: files parse and match their stored sha256, every record is
    consistent (answer, target and verdict), the task hashes match the records, and the model
    file matches its pinned sha256.

    Exit 2 when anything is off.
    """
    click.echo(verify_baseline(Store(store), name).summary())


@baseline.command()
@click.option(
    "--run",
    "run_dir",
    type=click.Path(path_type=Path),
    required=True,
    help="A candidate run saved by `regress check --save-run DIR`.",
)
@click.option("--name", required=True, help="Baseline to create (or, with --force, replace).")
@store_option
@force_option
@handles_errors
def promote(run_dir: Path, name: str, store: Path, force: bool) -> None:
    """Make a candidate's stored run the baseline NAME without rerunning it.

    Use after a merge, so the next PRs are gated against what main now produces
    (`--force`: main exists and is meant to be replaced).
    """
    saving = SaveOptions(force=force)
    check_baseline_target(Store(store), name, saving)
    run = read_run(run_dir)
    check_fit_to_store(run)
    path = save_baseline(Store(store), as_baseline(run, name), saving)
    click.echo(f"promoted {run_dir} to baseline {name!r} -> {path}")


@baseline.command("import-lm-eval")
@click.option(
    "--samples",
    "samples_dir",
    type=click.Path(path_type=Path),
    required=True,
    help="lm-eval's --output_path (or its model subfolder), written with --log_samples.",
)
@click.option("--name", required=True, help="Baseline name, e.g. main.")
@click.option("--tasks", "-t", help="Comma-separated tasks to import (default: every task).")
@store_option
@handles_errors
def import_lm_eval(samples_dir: Path, name: str, tasks: str | None, store: Path) -> None:
    """Store an lm-eval run's samples as baseline NAME, without rerunning anything.

    Examples pair with regress's own runs when the documents and prompts are identical
    (same doc and prompt hashes), so `regress check` can gate a model against it.

    \b
    Example:
      lm-eval --model hf --model_args pretrained=DIR --tasks arc_easy \\
        --output_path out/ --log_samples
      regress baseline import-lm-eval --samples out/ --name main
    """
    validate_name(name)
    wanted = [t.strip() for t in tasks.split(",") if t.strip()] if tasks else None
    run = read_lm_eval_run(samples_dir, name, wanted)
    check_fit_to_store(run)
    path = Store(store).save(run)
    n = sum(t.n for t in run.manifest.tasks.values())
    click.echo(
        f"imported lm-eval run as baseline {name!r}: {n} examples in {len(run.records)} "
        f"tasks -> {path}"
    )


@baseline.command("import-inspect")
@click.option(
    "--log",
    "log_file",
    type=click.Path(path_type=Path),
    required=True,
    help="An Inspect log (.eval or .json), as `inspect eval` writes it.",
)
@click.option("--name", required=True, help="Baseline name, e.g. main.")
@click.option("--scorer", default=None, help="The scorer to gate on (default: the log's first).")
@store_option
@handles_errors
def import_inspect(log_file: Path, name: str, scorer: str | None, store: Path) -> None:
    """Store an Inspect log's per-sample scores as baseline NAME, without rerunning anything.

    Samples pair by id (and epoch) with another log of the same task:
    `regress check -b NAME --candidate-samples other.eval`.

    \b
    Example:
      inspect eval task.py --model openai/gpt-4o-mini --log-dir logs/
      regress baseline import-inspect --log logs/2026-...eval --name main
    """
    validate_name(name)
    run = read_inspect_log(log_file, name, scorer)
    check_fit_to_store(run)
    path = Store(store).save(run)
    n = sum(t.n for t in run.manifest.tasks.values())
    click.echo(f"imported Inspect log as baseline {name!r}: {n} samples -> {path}")


@baseline.command("export-samples")
@click.argument("name")
@click.option(
    "--output",
    "-o",
    type=click.Path(path_type=Path),
    required=True,
    help="Write lm-eval's --samples JSON here.",
)
@store_option
@handles_errors
def export_samples(name: str, output: Path, store: Path) -> None:
    """Write lm-eval's `--samples` file for baseline (or proxy) NAME: each task's doc ids,
    so lm-eval evaluates exactly the gated examples and only those.

    \b
    Example:
      regress baseline export-samples proxy -o samples.json
      lm-eval --model hf --model_args pretrained=DIR --tasks arc_easy \\
        --samples samples.json --output_path out/ --log_samples
      regress check -b proxy --candidate-samples out/
    """
    run = Store(store).load(name)
    selection = lm_eval_selection(run)
    write_report(output, json.dumps(selection) + "\n")
    tasks = ",".join(selection)
    shots = sorted({info.num_fewshot for info in run.manifest.tasks.values()})
    n = sum(len(ids) for ids in selection.values())
    click.echo(f"wrote {n} doc ids of {len(selection)} tasks -> {output}")
    if len(shots) == 1:
        click.echo(
            f"run: lm-eval --tasks {tasks} --num_fewshot {shots[0]} --samples {output} "
            "--log_samples --output_path OUT (no --limit)"
        )
    else:
        each = ", ".join(f"{t} {info.num_fewshot}" for t, info in run.manifest.tasks.items())
        # One lm-eval run gives each task its own YAML's default shots; --num_fewshot one.
        click.echo(
            f"warning: the tasks ran with different shots ({each}): run lm-eval without "
            "--num_fewshot when those are the tasks' own defaults, else once per shot count",
            err=True,
        )
