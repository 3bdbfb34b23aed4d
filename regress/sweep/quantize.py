"""Quantize a GGUF through llama.cpp's quantize API: one settings object, one written file.

`regress quantize` and `regress sweep` both come here. Settings beyond the target type are
llama-quantize's own: `pure` (every tensor in the target type, no per-tensor mixture), and
the types of the output and token-embedding tensors.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from regress.backends.gguf_header import check_gguf, read_header
from regress.core.errors import BadInput, RunFailed
from regress.core.files import umask


@dataclass(frozen=True)
class QuantSettings:
    """What llama-quantize is asked for."""

    type: str
    """Target file type: Q8_0, Q4_K_M, IQ4_XS, ..."""
    pure: bool = False
    """Quantize every tensor to `type` (llama-quantize --pure)."""
    output_tensor_type: str | None = None
    """Type of output.weight (llama-quantize --output-tensor-type); None: llama.cpp's choice."""
    token_embedding_type: str | None = None
    """Type of token_embd.weight (--token-embedding-type); None: llama.cpp's choice."""

    @property
    def name(self) -> str:
        """A short label: `Q4_K_M`, `Q4_K_M+pure`, `Q4_0+out=Q8_0+emb=Q8_0`."""
        parts = [self.type.upper()]
        if self.pure:
            parts.append("pure")
        if self.output_tensor_type:
            parts.append(f"out={self.output_tensor_type.upper()}")
        if self.token_embedding_type:
            parts.append(f"emb={self.token_embedding_type.upper()}")
        return "+".join(parts)


def file_types() -> dict[str, int]:
    """llama.cpp's file types (LLAMA_FTYPE_MOSTLY_*) by name."""
    import llama_cpp

    prefix = "LLAMA_FTYPE_MOSTLY_"
    return {k[len(prefix) :]: getattr(llama_cpp, k) for k in dir(llama_cpp) if k.startswith(prefix)}


def tensor_types() -> dict[str, int]:
    """ggml's tensor types (GGML_TYPE_*) by name, for the output and embedding tensors."""
    import llama_cpp

    prefix = "GGML_TYPE_"
    return {k[len(prefix) :]: getattr(llama_cpp, k) for k in dir(llama_cpp) if k.startswith(prefix)}


def check_settings(settings: QuantSettings) -> None:
    """Refuse unknown type names before any work starts (BadInput)."""
    ftypes = file_types()
    if settings.type.upper() not in ftypes:
        raise BadInput(
            f"unknown quantization {settings.type!r}; known: {', '.join(sorted(ftypes))}"
        )
    ttypes = tensor_types()
    for key in ("output_tensor_type", "token_embedding_type"):
        value = getattr(settings, key)
        if value is not None and value.upper() not in ttypes:
            raise BadInput(f"unknown {key} {value!r}; known: {', '.join(sorted(ttypes))}")


def quantize_file(
    src: Path, settings: QuantSettings | str, out: Path, threads: int = 0, verbose: bool = False
) -> Path:
    """Quantize (or requantize) `src` as `settings` say (a type name alone is enough),
    written atomically to `out`; llama.cpp's log of every tensor (about 350 lines, and a
    warning per tensor that falls back to another type) only when `verbose`, its errors
    always."""
    import llama_cpp

    if isinstance(settings, str):
        settings = QuantSettings(settings)
    check_gguf(src)
    check_settings(settings)
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = file_types()[settings.type.upper()]
    params.allow_requantize = True
    params.nthread = threads
    params.pure = settings.pure
    if settings.output_tensor_type:
        params.output_tensor_type = tensor_types()[settings.output_tensor_type.upper()]
    if settings.token_embedding_type:
        params.token_embedding_type = tensor_types()[settings.token_embedding_type.upper()]
    out.parent.mkdir(parents=True, exist_ok=True)
    _remove_orphans(out)
    fd, tmp = tempfile.mkstemp(prefix=f".{out.name}.{os.getpid()}.", dir=out.parent)
    os.close(fd)
    try:
        with _llama_log(verbose):
            status = llama_cpp.llama_model_quantize(str(src).encode(), tmp.encode(), params)
        if status != 0:
            raise RunFailed(
                f"llama.cpp could not quantize {src} to {settings.name} (status {status}); "
                "some types (IQ2_XXS, Q2_K_S) need an importance matrix"
            )
        os.chmod(tmp, 0o666 & ~umask())  # mkstemp's 0600 would hide the model from a CI cache
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


# ggml's log levels (ggml.h); llama-cpp-python's own callback still maps the older numbering,
# under which a warning passes as an error and an error as debug output.
_GGML_LOG_ERROR = 4
_GGML_LOG_CONT = 5


@contextlib.contextmanager
def _llama_log(verbose: bool) -> Iterator[None]:
    """llama.cpp's log on stderr while the block runs: all of it when `verbose`, else only its
    errors (and their continued lines); llama-cpp-python's callback is put back afterwards."""
    import llama_cpp
    from llama_cpp import _logger

    shown = [verbose]  # whether the line being continued was shown

    @llama_cpp.llama_log_callback  # type: ignore[untyped-decorator,misc]
    def write(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
        if level != _GGML_LOG_CONT:
            shown[0] = verbose or level == _GGML_LOG_ERROR
        if shown[0]:
            print(text.decode("utf-8", "replace"), end="", file=sys.stderr, flush=True)

    llama_cpp.llama_log_set(write, ctypes.c_void_p(0))
    try:
        yield
    finally:
        llama_cpp.llama_log_set(_logger.llama_log_callback, ctypes.c_void_p(0))


def _remove_orphans(out: Path) -> None:
    """Delete the temporary files of earlier quantizations to `out` whose process is gone (a
    kill -9 leaves its `.NAME.PID.*` file, up to gigabytes, behind)."""
    for tmp in out.parent.glob(f".{out.name}.*"):
        pid = tmp.name[len(out.name) + 2 :].split(".", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            tmp.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: alive
    return True


def weights_sha256(path: Path) -> str:
    """sha256 over the tensor descriptions (names, shapes, types, offsets) and the tensor data,
    not the header's metadata.

    Two types that fall back to the same tensors (SmolLM2's 576-wide matrices cannot use
    K-quants) give files whose sha256 differs only by the file-type field: this tells them
    apart from files that really differ.
    """
    header = read_header(path)
    start, end = header.tensor_info_span
    digest = hashlib.sha256()
    with path.open("rb") as f:
        f.seek(start)
        digest.update(f.read(end - start))
        f.seek(header.data_offset)
        while block := f.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()
