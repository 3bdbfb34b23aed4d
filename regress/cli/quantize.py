"""`regress quantize`: make a real candidate model through llama.cpp's quantize API."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import click

from regress.cli.common import handles_errors
from regress.errors import BadInput, RunFailed
from regress.models import check_gguf, resolve_model_path


def _ftypes() -> dict[str, int]:
    import llama_cpp

    prefix = "LLAMA_FTYPE_MOSTLY_"
    return {k[len(prefix) :]: getattr(llama_cpp, k) for k in dir(llama_cpp) if k.startswith(prefix)}


def quantize_file(src: Path, qtype: str, out: Path, threads: int = 0) -> Path:
    """Quantize (or requantize) `src` to `qtype`, written atomically to `out`."""
    import llama_cpp

    check_gguf(src)
    ftypes = _ftypes()
    if qtype.upper() not in ftypes:
        raise BadInput(f"unknown quantization {qtype!r}; known: {', '.join(sorted(ftypes))}")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftypes[qtype.upper()]
    params.allow_requantize = True
    params.nthread = threads
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.", dir=out.parent)
    os.close(fd)
    try:
        status = llama_cpp.llama_model_quantize(str(src).encode(), tmp.encode(), params)
        if status != 0:
            raise RunFailed(
                f"llama.cpp could not quantize {src} to {qtype} (status {status}); "
                "some types (IQ2_XXS, Q2_K_S) need an importance matrix"
            )
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 would hide the model from a CI cache
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


@click.command()
@click.argument("src")
@click.option(
    "--type", "qtype", required=True, help="Target type: Q8_0, Q4_0, Q4_K_M, Q2_K, IQ3_S, ..."
)
@click.option(
    "--output", "-o", type=click.Path(path_type=Path), required=True, help="Output .gguf."
)
@handles_errors
def quantize(src: str, qtype: str, output: Path) -> None:
    """Quantize SRC (a .gguf path or packaged model name) to another type.

    Requantizing an already quantized file is allowed, so a packaged Q4_1 model can be turned
    into real, degraded candidates.

    \b
    Example: regress quantize smollm2-135m --type Q2_K -o /tmp/smollm2-q2k.gguf
    """
    out = quantize_file(resolve_model_path(src), qtype, output)
    click.echo(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB, {qtype.upper()})")
