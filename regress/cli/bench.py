"""`regress bench`: speed and resources of one or more models, llama-bench and vLLM style."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.table import Table

from regress.backends import BACKENDS
from regress.bench.prompts import load_prompts
from regress.cli.common import (
    exit_with,
    handles_errors,
    parse_args,
    policy_option,
    renamed_option,
    stderr,
    stdout,
    write_report,
)
from regress.core.errors import BadInput, ExitCode, pip_install
from regress.gate.policy import load_policy

if TYPE_CHECKING:
    from regress.bench.latency import LatencyResult
    from regress.bench.run import BenchRun


def require_extra(*modules: str) -> None:
    """Fail in one line when the `bench` extra's packages are missing. The commands that
    need them import them only when they run, so `regress` starts without them."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise BadInput(f"this command needs {', '.join(missing)}: {pip_install('bench')}")


def _sizes(text: str, flag: str) -> tuple[int, ...]:
    """llama-bench's comma lists (`-p 128,512`); `0` or empty for none."""
    try:
        sizes = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError as exc:
        raise BadInput(f"{flag}: expected comma-separated token counts, got {text!r}") from exc
    return tuple(n for n in sizes if n != 0)


def _latency_cells(lat: LatencyResult | None) -> tuple[str, str, str]:
    if lat is None:
        return ("-", "-", "-")
    return (
        f"{lat.ttft.p50:.1f} / {lat.ttft.p99:.1f}",
        f"{lat.tpot.mean:.2f}",
        f"{lat.e2el.p50:.1f} / {lat.e2el.p99:.1f}",
    )


def _table(run: BenchRun) -> Table:
    """One row per llama-bench test or server concurrency level; latency and resources on a
    model's first row. Server rows show output tokens/s."""
    from regress.bench.render import model_label

    table = Table(
        "model", "test", "t/s", "TTFT p50/p99 ms", "TPOT ms", "E2EL p50/p99 ms", "peak RSS",
        "CPU %", "load s",
    )  # fmt: skip
    for r in run.results:
        res = r.resources
        rows = [(s.test, f"{s.mean_ts:.2f} ± {s.sd_ts:.2f}", r.latency) for s in r.micro]
        rows += [
            (f"c={lv.concurrency}", f"{lv.latency.output_throughput:.2f}", lv.latency)
            for lv in r.serving
        ]
        for i, (test, rate, lat) in enumerate(rows or [("-", "-", r.latency)]):
            first = i == 0
            table.add_row(
                f"{r.model.ref} ({model_label(r)})" if first else "",
                test,
                rate,
                *(_latency_cells(lat) if first or r.serving else ("", "", "")),
                f"{res.peak_rss_bytes / 2**20:.0f} MiB" if first else "",
                f"{res.cpu_percent_mean:.0f}" if first else "",
                ("-" if r.load_s is None else f"{r.load_s:.2f}") if first else "",
            )
    return table


def _write(path: Path, run: BenchRun) -> None:
    from regress.bench.render import render_json, render_jsonl, render_markdown

    render = {".jsonl": render_jsonl, ".md": render_markdown}.get(path.suffix, render_json)
    write_report(path, render(run))


@click.command()
@click.option(
    "--model",
    "-m",
    "models",
    multiple=True,
    required=True,
    help="A .gguf path or packaged model (smollm2-135m, gemma3-270m); repeat for more.",
)
@click.option(
    "--backend",
    type=click.Choice([*BACKENDS, "ollama"]),
    default="llama_cpp",
    show_default=True,
    help="Where the models run: llama_cpp or hf in-process, an OpenAI-compatible server, or "
    "an Ollama server through its native API (base_url=http://HOST:11434).",
)
@click.option("--model-args", default=None, help="Backend settings: n_ctx=2048,threads=2,...")
@click.option(
    "--n-prompt",
    "-p",
    default="512",
    show_default=True,
    help="Prompt-processing tests, tokens (comma list; 0 for none).",
)
@click.option(
    "--n-gen",
    "-n",
    default="128",
    show_default=True,
    help="Generation tests, tokens (comma list; 0 for none).",
)
@click.option(
    "--runs",
    "-r",
    type=click.IntRange(1),
    default=5,
    show_default=True,
    help="Timed repetitions per test, and rounds over the prompts.",
)
@click.option(
    "--warmup",
    type=click.IntRange(0),
    default=1,
    show_default=True,
    help="Untimed repetitions before each test.",
)
@click.option(
    "--prompts",
    default="builtin",
    show_default=True,
    help="Request prompts: builtin (8 prompts, 7-770 tokens), a text file (one per "
    'line) or JSON Lines with a "prompt" field.',
)
@click.option(
    "--output-len",
    type=click.IntRange(0),
    default=64,
    show_default=True,
    help="Tokens generated per request, end of sequence ignored (0: no requests).",
)
@click.option(
    "--concurrency",
    default="1",
    show_default=True,
    help="openai, ollama: concurrency levels, each a separate run (1,4,16).",
)
@click.option(
    "--request-rate",
    type=float,
    default=math.inf,
    help="openai, ollama: Poisson arrivals per second (default inf: all at once).",
)
@click.option(
    "--num-requests",
    type=click.IntRange(1),
    default=32,
    show_default=True,
    help="openai, ollama: requests per concurrency level.",
)
@click.option(
    "--slo", default=None, help="openai, ollama: goodput SLOs, e.g. ttft=500ms,tpot=50ms."
)
@click.option(
    "--server-pid",
    type=int,
    default=None,
    help="openai, ollama: the server's process id, so its memory and CPU are sampled.",
)
@click.option(
    "--against",
    "baseline",
    default=None,
    help="Latency gate: time this model (a path or packaged name) against each -m candidate, "
    "interleaved, and exit 1 on a significant slowdown beyond the policy's speed.max_slowdown.",
)
@click.option(
    "--against-args",
    "baseline_args",
    default=None,
    help="The --against model's settings (default: --model-args).",
)
# `--baseline` names a stored baseline in every other command (check, drift, plan).
@renamed_option("bench", "--baseline", "--against")
@policy_option("Policy YAML; its `speed: {max_slowdown: 0.10}` sets the latency gate's margin.")
@click.option(
    "--output",
    "-o",
    "outputs",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Write results (repeatable): .json (everything), .jsonl (one row per measurement) "
    "or .md. With --baseline: the gate's Markdown.",
)
@handles_errors
def bench(
    models: tuple[str, ...],
    backend: str,
    model_args: str | None,
    n_prompt: str,
    n_gen: str,
    runs: int,
    warmup: int,
    prompts: str,
    output_len: int,
    concurrency: str,
    request_rate: float,
    num_requests: int,
    slo: str | None,
    server_pid: int | None,
    baseline: str | None,
    baseline_args: str | None,
    policy_path: Path | None,
    outputs: tuple[Path, ...],
) -> None:
    """Measure speed and resources: llama-bench's pp/tg rates, vLLM's request latencies
    (TTFT, TPOT, ITL, E2EL), peak RSS and CPU sampled every 10 ms, GPU through NVML.

    Run it alone on the machine: other CPU-heavy work distorts every figure.

    \b
    Examples:
      regress bench -m smollm2-135m -m gemma3-270m -o bench.json
      regress bench -m model.gguf -p 128,512 -n 32 -r 3 --prompts prompts.txt -o bench.md
      regress bench --backend openai -m smollm2 --model-args base_url=http://127.0.0.1:8000/v1 \\
          --concurrency 1,4,16 --slo ttft=500ms,tpot=50ms -o serve.json
      regress bench --backend ollama -m smollm2:135m \\
          --model-args base_url=http://127.0.0.1:11434 --concurrency 1,2 -o ollama.json
      regress bench --against smollm2-135m -m candidate.gguf --policy policy.yaml -r 3
    """
    for output in outputs:
        if output.is_dir():
            raise BadInput(f"--output {output} is a folder; give a file name")
    require_extra("psutil")
    from regress.bench.run import BenchOptions, run_bench
    from regress.bench.serving import parse_slo

    if baseline is not None:
        _speed_gate(
            models,
            baseline,
            backend,
            model_args,
            baseline_args,
            prompts,
            runs,
            warmup,
            output_len,
            policy_path,
            outputs,
        )
        return
    options = BenchOptions(
        models=models,
        backend=backend,
        model_args=parse_args(model_args),
        n_prompt=_sizes(n_prompt, "--n-prompt"),
        n_gen=_sizes(n_gen, "--n-gen"),
        runs=runs,
        warmup=warmup,
        prompts=load_prompts(prompts),
        prompt_source=prompts,
        output_len=output_len,
        concurrency=_sizes(concurrency, "--concurrency"),
        request_rate=request_rate,
        num_requests=num_requests,
        slo_ms=parse_slo(slo) if slo else {},
        server_pid=server_pid,
    )
    run = run_bench(options, lambda line: stderr.print(line, highlight=False))
    stdout().print(_table(run))
    for output in outputs:
        _write(output, run)
        stderr.print(f"wrote {output}")


def _speed_gate(
    candidates: tuple[str, ...],
    baseline: str,
    backend: str,
    model_args: str | None,
    baseline_args: str | None,
    prompts: str,
    runs: int,
    warmup: int,
    output_len: int,
    policy_path: Path | None,
    outputs: tuple[Path, ...],
) -> None:
    """`--baseline`: one gate per candidate; exit 1 if any is significantly slower."""
    from regress.bench.render import render_speed_gate
    from regress.bench.speed_gate import SpeedGateOptions, SpeedVerdict, run_speed_gate

    policy = load_policy(policy_path)
    candidate_args = parse_args(model_args)
    texts, slower = [], False
    for candidate in candidates:
        options = SpeedGateOptions(
            baseline=baseline,
            candidate=candidate,
            backend=backend,
            baseline_args=candidate_args if baseline_args is None else parse_args(baseline_args),
            candidate_args=candidate_args,
            prompts=load_prompts(prompts),
            output_len=output_len or 1,
            rounds=runs,
            warmup=warmup,
            max_slowdown=policy.max_slowdown,
            alpha=policy.alpha,
        )
        result = run_speed_gate(options, lambda line: stderr.print(line, highlight=False))
        slower |= result.decision.verdict == SpeedVerdict.SLOWER
        texts.append(render_speed_gate(result))
    stdout().print("\n".join(texts), markup=False, highlight=False)
    for output in outputs:
        write_report(output, "\n".join(texts))
    exit_with(ExitCode.REGRESSION if slower else ExitCode.OK)
