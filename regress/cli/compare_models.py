"""`regress compare`: accuracy, speed and memory of several models, and which one to ship."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from regress.bench.choose import Choice, Constraints, choose, parse_bytes
from regress.bench.prompts import BUILTIN_PROMPTS
from regress.cli.bench import require_extra
from regress.cli.common import (
    LIMIT,
    cache_folder,
    data_options,
    data_source,
    handles_errors,
    parse_args,
    stderr,
    stdout,
)
from regress.run.runner import RunPlan, suite_specs
from regress.run.suite import inline_suite


def _table(choice: Choice) -> Table:
    table = Table(
        "model",
        "quant",
        "accuracy [95% CI]",
        "from",
        "tg t/s",
        "pp t/s",
        "TTFT p50 ms",
        "peak RSS",
        "fits",
    )
    for c in choice.contenders:
        acc = "-" if c.accuracy is None else f"{c.accuracy:.3f} [{c.accuracy_low:.3f}, "
        acc += "" if c.accuracy is None else f"{c.accuracy_high:.3f}]"
        mark = "★ chosen" if c is choice.chosen else choice.rejected.get(c.model, "yes")
        table.add_row(
            c.model,
            c.quantization,
            acc,
            c.accuracy_from or "-",
            f"{c.tg_tps:.1f}",
            f"{c.pp_tps:.1f}",
            f"{c.ttft_p50_ms:.0f}",
            f"{c.peak_rss_bytes / 2**20:.0f} MiB",
            mark,
        )
    return table


@click.command("compare")
@click.option(
    "--models",
    "-m",
    "model_lists",
    multiple=True,
    required=True,
    help="Models to compare: A,B,C (or -m repeated).",
)
@click.option(
    "--from",
    "inputs",
    multiple=True,
    type=click.Path(path_type=Path, exists=True),
    help="Stored runs and bench JSON files to take figures from (matched by sha256).",
)
@click.option(
    "--tasks",
    "-t",
    default=None,
    help="Evaluate accuracy on these tasks for models without a stored run.",
)
@click.option(
    "--limit",
    type=LIMIT,
    default=None,
    help="First N documents per task, or a fraction of them (0.1), as lm-eval's --limit.",
)
@click.option("--max-memory", default=None, help="Largest peak RSS allowed (1GB, 512MiB).")
@click.option("--min-tps", type=float, default=None, help="Slowest generation allowed, tok/s.")
@click.option("--max-ttft", type=float, default=None, help="Slowest median TTFT allowed, ms.")
@click.option("--model-args", default=None, help="Backend settings for every model.")
@click.option(
    "--runs",
    "-r",
    type=click.IntRange(1),
    default=3,
    show_default=True,
    help="Bench repetitions for models without a bench file.",
)
@data_options
@handles_errors
def compare_models(
    model_lists: tuple[str, ...],
    inputs: tuple[Path, ...],
    tasks: str | None,
    limit: int | float | None,
    max_memory: str | None,
    min_tps: float | None,
    max_ttft: float | None,
    model_args: str | None,
    runs: int,
    data_dir: Path | None,
    hf_datasets: bool,
) -> None:
    """Put models side by side (accuracy, generation and prompt speed, TTFT, peak memory) and
    recommend one under constraints, saying why (or why none fits).

    \b
    Examples:
      regress compare -m smollm2-135m,gemma3-270m -t builtin --limit 20 --max-memory 1GB
      regress compare -m smollm2-135m,q8.gguf --from baselines/main --from bench.json \\
          --min-tps 50
    """
    require_extra("psutil")
    from regress.bench.contenders import ContenderOptions, measure_contenders
    from regress.bench.run import BenchOptions
    from regress.report.sources import load_inputs

    # Checked before anything runs, so a typo costs no benchmark.
    limits = Constraints(
        max_memory_bytes=parse_bytes(max_memory) if max_memory else None,
        min_tps=min_tps,
        max_ttft_ms=max_ttft,
    )
    models = [m.strip() for text in model_lists for m in text.split(",") if m.strip()]
    args = parse_args(model_args)
    given = load_inputs(list(inputs)) if inputs else None
    plan = None
    if tasks:
        plan = RunPlan(
            specs=tuple(suite_specs(inline_suite(tasks, None, limit))),
            model="",
            model_args=args,
            source=data_source(data_dir, hf_datasets),
            cache_dir=cache_folder(False, None),
        )
    options = ContenderOptions(
        bench=BenchOptions(
            models=tuple(models), model_args=args, runs=runs, output_len=32, prompts=BUILTIN_PROMPTS
        ),
        eval_plan=plan,
    )
    contenders = measure_contenders(
        models,
        [r.run for r in given.accuracy] if given else [],
        given.bench if given else [],
        options,
        lambda line: stderr.print(line, highlight=False),
    )
    choice = choose(contenders, limits)
    stdout().print(_table(choice))
    if choice.chosen is None:
        stdout().print(f"No recommendation: {choice.reason}.", highlight=False)
    else:
        stdout().print(f"Recommended: {choice.chosen.model}: {choice.reason}.", highlight=False)
