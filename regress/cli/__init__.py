"""The `regress` command line: a thin click group, one module per command.

A command's module is imported only when that command runs (or shows its own help), so
`regress --help` loads neither numpy, scipy nor a backend. The group lists each command with
the summary kept here; a test checks each one against the command's own docstring.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import click

import regress

COMMANDS: dict[str, tuple[str, str]] = {
    "baseline": (
        "regress.cli.baseline:baseline",
        "Manage the baseline store (baselines/<name>/, meant to be committed).",
    ),
    "bench": (
        "regress.cli.bench:bench",
        "Measure speed and resources: llama-bench's pp/tg rates, vLLM's request latencies "
        "(TTFT, TPOT, ITL, E2EL), peak RSS and CPU sampled every 10 ms, GPU through NVML.",
    ),
    "check": ("regress.cli.check:check", "Gate a candidate MODEL against a stored baseline."),
    "compare": (
        "regress.cli.compare_models:compare_models",
        "Put models side by side (accuracy, generation and prompt speed, TTFT, peak memory) "
        "and recommend one under constraints, saying why (or why none fits).",
    ),
    "drift": (
        "regress.cli.drift:drift",
        "Check that a pinned model still gives its baseline's answers with today's runtime.",
    ),
    "eval": (
        "regress.cli.eval:eval_command",
        "Evaluate MODEL on tasks, lm-evaluation-harness style.",
    ),
    "history": (
        "regress.cli.history:history",
        "Draw the gate's history file (`check --record-history`) as one offline page.",
    ),
    "init": (
        "regress.cli.init:init",
        "Write a starting policy and the gate's workflows into the git repository at PATH.",
    ),
    "judge": (
        "regress.cli.judge:judge",
        "Audit an LLM judge against people: a blind sample to label, then agreement and win rate.",
    ),
    "merge": (
        "regress.cli.merge:merge",
        "Join the runs of `--shard i/n` into one, deterministically.",
    ),
    "models": (
        "regress.cli.models:models",
        "List packaged models, or describe the given .gguf files, from their GGUF headers.",
    ),
    "plan": (
        "regress.cli.plan:plan",
        "Print the n a gate needs for a drop, or a baseline's MDE and n per unit.",
    ),
    "proxy": (
        "regress.cli.proxy:proxy",
        "Proxy baselines: a few examples chosen by margin that estimate a full suite.",
    ),
    "quantize": (
        "regress.cli.quantize:quantize",
        "Quantize SRC (a .gguf path or packaged model name) to another type.",
    ),
    "recommend": (
        "regress.cli.recommend:recommend_command",
        "The sweep's table and Pareto front, then the best configuration meeting the limits, "
        "why, and what relaxing each limit would buy.",
    ),
    "report": (
        "regress.cli.report:report",
        "Write one HTML page (opens offline) from stored runs, gate JSON reports "
        "(`check --report-json`), bench JSON files (`bench -o FILE.json`) and sweep folders "
        "(`regress sweep -o DIR`: their table and three trade-off charts).",
    ),
    "selftest": (
        "regress.cli.selftest:selftest_command",
        "Simulate candidates from a baseline's own records: P(verdict) by injected drop, MDE.",
    ),
    "sweep": (
        "regress.cli.sweep:sweep",
        "Quantize MODEL into each configuration and measure it against MODEL: accuracy per "
        "task (paired test), WikiText-2 perplexity, KL divergence and same top token, pp/tg "
        "speed and peak RSS. Resumable: run the same command again after a kill (or "
        "--stop-after N).",
    ),
    "tasks": (
        "regress.cli.tasks:tasks_command",
        "List tasks (all, or the NAMES given: tasks or groups) and what each one is.",
    ),
}
"""Command name -> ("module:attribute" of its click command, the first paragraph of its help)."""


def _summary(name: str) -> click.Command:
    """A stand-in command holding only the summary, for the group's listing."""
    return click.Command(name, help=COMMANDS[name][1])


class LazyGroup(click.Group):
    """A group whose commands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attribute = COMMANDS[cmd_name][0].split(":")
        command: click.Command = getattr(importlib.import_module(module), attribute)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # click's own listing, fed by the summaries above instead of importing every command.
        limit = formatter.width - 6 - max(len(name) for name in COMMANDS)
        rows = [(name, _summary(name).get_short_help_str(limit)) for name in COMMANDS]
        with formatter.section("Commands"):
            formatter.write_dl(sorted(rows))


def lm_eval_spelling(token: str) -> str:
    """lm-eval's underscore spellings (`--model_args`, `--num_fewshot`, `--output_path`,
    `--log_samples`, `--gen_kwargs`, `--batch_size`, ...) read as regress's hyphenated
    options, on every command and without a line of help.

    click normalizes option names with it, and a choice on both sides of the comparison
    (`--backend llama_cpp` still matches and stays `llama_cpp`)."""
    return token.replace("_", "-")


@click.group(
    cls=LazyGroup,
    context_settings={
        "help_option_names": ["-h", "--help"],
        "max_content_width": 100,
        "token_normalize_func": lm_eval_spelling,
    },
)
@click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=lambda ctx, _param, asked: show_version(ctx, asked),
    help="Show the version (and, in a git checkout, how far past its release) and exit.",
)
@click.option("--debug", is_flag=True, help="Show the traceback of an unexpected error.")
def cli(debug: bool) -> None:
    """Tell, in CI and with statistical honesty, whether a model change made it worse.

    \b
    Typical loop:
      regress baseline create --name main --model smollm2-135m --tasks builtin --limit 100
      regress check --baseline main --model candidate.gguf --report-md report.md
    Exit codes: 0 pass, 1 regression, 2 bad input, 3 the run itself failed.
    """
    if debug:
        os.environ["REGRESS_DEBUG"] = "1"


def show_version(ctx: click.Context, asked: bool) -> None:
    """Print `regress, version V` and exit; V is worked out only now, as it may ask git."""
    if not asked or ctx.resilient_parsing:
        return
    from regress.cli.version import checkout_version

    version = checkout_version(regress.__version__, Path(regress.__file__).parent)
    click.echo(f"regress, version {version}")
    ctx.exit()


def main() -> None:
    """Console-script entry point."""
    cli()
