"""`regress sweep`: quantization configurations measured for accuracy, perplexity, KL
divergence, speed and memory."""

from __future__ import annotations

from pathlib import Path

import click

from regress.cli.bench import require_extra
from regress.cli.common import (
    LIMIT,
    chosen_suite,
    data_options,
    data_source,
    handles_errors,
    renamed_option,
    stderr,
)
from regress.core.errors import BadInput


@click.command()
@click.option("--model", "-m", required=True, help="Source model: a .gguf path or packaged name.")
@click.option("--types", default=None, help="Quantization types, comma-separated: Q8_0,Q4_K_M,...")
@click.option(
    "--config",
    "config_file",
    type=click.Path(path_type=Path),
    default=None,
    help="YAML config space: types, pure, output_tensor_type, token_embedding_type (lists).",
)
@click.option("--tasks", "-t", default=None, help="Accuracy tasks (default arc_easy).")
@click.option("--suite", type=click.Path(path_type=Path), default=None, help="A suite YAML.")
@click.option(
    "--limit",
    type=LIMIT,
    default=None,
    help="Examples per task, or a fraction of them (0.1) (--tasks only).",
)
@click.option("--num-fewshot", "-k", type=int, default=None, help="Shots (--tasks only).")
@click.option("--ppl-chunks", type=int, default=4, show_default=True, help="WikiText-2 chunks.")
@click.option("--ppl-ctx", type=int, default=512, show_default=True, help="Tokens per chunk.")
@click.option(
    "--runs",
    "-r",
    "bench_runs",
    type=int,
    default=5,
    show_default=True,
    help="Timed repetitions of each speed test (as `regress bench -r`).",
)
@click.option(
    "--n-prompt",
    "-p",
    type=click.IntRange(1),
    default=512,
    show_default=True,
    help="Prompt-processing test size in tokens (as `regress bench -p`; one size per sweep).",
)
@click.option(
    "--n-gen",
    "-n",
    type=click.IntRange(1),
    default=128,
    show_default=True,
    help="Generation test size in tokens (as `regress bench -n`; one size per sweep).",
)
# The same option names as `regress bench` (issue #27).
@renamed_option("sweep", "--bench-runs", "--runs")
@click.option("--threads", type=int, default=None, help="llama.cpp threads (default: all).")
@click.option("--stop-after", type=int, default=None, help="Measure at most N new configurations.")
@click.option(
    "--reevaluate",
    is_flag=True,
    help="Evaluate the accuracy of stored configurations again (after a scoring change of "
    "the backend); KL divergence and speed are kept.",
)
@click.option(
    "--output", "-o", type=click.Path(path_type=Path), required=True, help="Sweep folder."
)
@data_options
@handles_errors
def sweep(
    model: str,
    types: str | None,
    config_file: Path | None,
    tasks: str | None,
    suite: Path | None,
    limit: int | float | None,
    num_fewshot: int | None,
    ppl_chunks: int,
    ppl_ctx: int,
    bench_runs: int,
    n_prompt: int,
    n_gen: int,
    threads: int | None,
    stop_after: int | None,
    reevaluate: bool,
    output: Path,
    data_dir: Path | None,
    hf_datasets: bool,
) -> None:
    """Quantize MODEL into each configuration and measure it against MODEL: accuracy per task
    (paired test), WikiText-2 perplexity, KL divergence and same top token, pp/tg speed and
    peak RSS. Resumable: run the same command again after a kill (or --stop-after N).

    \b
    Example:
      regress sweep -m smollm2-135m --types Q8_0,Q4_K_M,Q4_0,Q2_K -t arc_easy --limit 300 \\
          -o sweeps/smollm2
      regress recommend --sweep sweeps/smollm2 --max-latency 50ms --max-memory 1GB
    """
    require_extra("psutil")
    from regress.sweep.run import SweepOptions, load_config_space, parse_types, run_sweep
    from regress.sweep.token_kld import DivergenceOptions

    if types is not None and config_file is None:
        configs = parse_types(types)
    elif config_file is not None and types is None:
        configs = load_config_space(config_file)
    else:
        raise BadInput("give one of --types or --config")
    options = SweepOptions(
        model=model,
        configs=configs,
        out_dir=output,
        suite=chosen_suite(tasks if tasks or suite else "arc_easy", suite, num_fewshot, limit, ()),
        source=data_source(data_dir, hf_datasets),
        divergence=DivergenceOptions(n_ctx=ppl_ctx, n_chunks=ppl_chunks, threads=threads),
        n_prompt=n_prompt,
        n_gen=n_gen,
        bench_runs=bench_runs,
        threads=threads,
        stop_after=stop_after,
        reevaluate=reevaluate,
    )
    done = run_sweep(options, lambda line: stderr.print(line))
    stderr.print(
        f"{len(done.results)} measured, {len(done.skipped)} skipped, {len(done.pending)} to go "
        f"in {output}"
    )
