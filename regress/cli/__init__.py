"""The `regress` command line: a thin click group, one module per command."""

from __future__ import annotations

import os

import click

from regress import __version__
from regress.cli.baseline import baseline
from regress.cli.bench import bench
from regress.cli.check import check
from regress.cli.choose import compare_models
from regress.cli.drift import drift
from regress.cli.eval import eval_command
from regress.cli.merge import merge
from regress.cli.models import models
from regress.cli.plan import plan
from regress.cli.proxy import proxy
from regress.cli.quantize import quantize
from regress.cli.recommend import recommend_command
from regress.cli.report import report
from regress.cli.selftest import selftest_command
from regress.cli.sweep import sweep
from regress.cli.tasks import tasks_command


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="regress")
@click.option("--debug", is_flag=True, help="Show the traceback of an unexpected error.")
def cli(debug: bool) -> None:
    """Tell, in CI and with statistical honesty, whether a model change made it worse.

    \b
    Typical loop:
      regress baseline create --name main --model smollm2-135m --tasks builtin
      regress check --baseline main --model candidate.gguf --report-md report.md
    Exit codes: 0 pass, 1 regression, 2 bad input, 3 the run itself failed.
    """
    if debug:
        os.environ["REGRESS_DEBUG"] = "1"


for command in (
    eval_command,
    baseline,
    bench,
    check,
    compare_models,
    drift,
    merge,
    models,
    plan,
    proxy,
    quantize,
    recommend_command,
    selftest_command,
    sweep,
    report,
    tasks_command,
):
    cli.add_command(command)


def main() -> None:
    """Console-script entry point."""
    cli()
