"""`regress quantize`: make a real candidate model through llama.cpp's quantize API."""

from __future__ import annotations

from pathlib import Path

import click

from regress.backends.models import resolve_model_path
from regress.cli.common import handles_errors
from regress.sweep.quantize import quantize_file


@click.command()
@click.argument("src")
@click.option(
    "--type", "qtype", required=True, help="Target type: Q8_0, Q4_0, Q4_K_M, Q2_K, IQ3_S, ..."
)
@click.option(
    "--output", "-o", type=click.Path(path_type=Path), required=True, help="Output .gguf."
)
@click.option("--verbose", "-v", is_flag=True, help="Show llama.cpp's log of every tensor.")
@handles_errors
def quantize(src: str, qtype: str, output: Path, verbose: bool) -> None:
    """Quantize SRC (a .gguf path or packaged model name) to another type.

    Requantizing an already quantized file is allowed, so a packaged Q4_1 model can be turned
    into real, degraded candidates.

    \b
    Example: regress quantize smollm2-135m --type Q2_K -o /tmp/smollm2-q2k.gguf
    """
    out = quantize_file(resolve_model_path(src), qtype, output, verbose=verbose)
    click.echo(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB, {qtype.upper()})")
