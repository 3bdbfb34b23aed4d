"""Backends, registered as lazily-importing factories so `import regress` never loads torch."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from regress.backends.base import Backend, Progress
from regress.backends.models import ModelFile
from regress.core.errors import BadInput, pip_install
from regress.core.fingerprint import OPENMP_WAIT_VARIABLES
from regress.core.hashes import is_sha256
from regress.core.requests import AnyResult, Request

# name -> "module:factory"; the module is imported only when the backend is used.
_FACTORIES: dict[str, str] = {
    "llama_cpp": "regress.backends.llama_cpp:LlamaCppBackend",
    "hf": "regress.backends.hf:HFBackend",
    "openai": "regress.backends.openai:OpenAIBackend",
}

BACKENDS = tuple(_FACTORIES)
MAX_SETTINGS = {"n_ctx": 1 << 20, "max_length": 1 << 20, "n_batch": 1 << 16, "threads": 1024}
"""Upper bounds of the sizes a backend allocates by (each backend checks the lower ones): past
them a setting is a typo, not a model, and `n_batch=4294967291` asked llama.cpp for 768 TiB."""
_EXTRAS = {"llama_cpp": "llama", "hf": "hf", "openai": "openai"}
"""The pyproject extra that installs each backend's dependencies."""

__all__ = ["BACKENDS", "Backend", "Progress", "dispatch", "load_backend", "parse_model_args"]

GOMP_SPINCOUNT = "300"
"""How long an idle OpenMP thread of llama.cpp or torch spins before it sleeps (libgomp's rough
scale: 100,000 spins a millisecond). Chosen by experiments/shared_cpu.py on 2 cores (figures in
docs/results/speed.md#shared-cpus): spinning forever (OMP_WAIT_POLICY=ACTIVE), or for libgomp's
default 300,000, keeps a core from a busy neighbour the model then waits for; sleeping at once
(PASSIVE) slows token-by-token decoding by a third; 300 decodes as fast as ACTIVE and shares
the CPUs as well as PASSIVE."""


def default_openmp_waiting() -> None:
    """Set regress's OpenMP waiting unless the user set OMP_WAIT_POLICY or GOMP_SPINCOUNT.

    libgomp reads these once, when it loads, so this runs when this package is imported:
    every way into llama.cpp or torch (load_backend, sweeps that quantize before any backend
    loads, the CLI) imports it first."""
    if not any(name in os.environ for name in OPENMP_WAIT_VARIABLES):
        os.environ["GOMP_SPINCOUNT"] = GOMP_SPINCOUNT


default_openmp_waiting()


def load_backend(
    name: str, model: str | ModelFile, model_args: dict[str, Any] | None = None
) -> Backend:
    """Build backend `name` for `model` with `model_args`: a reference (a path, a packaged
    short name, a served model's name) or, for the in-process backends, a model already
    resolved, which they then use as it is."""
    if name not in _FACTORIES:
        raise BadInput(f"unknown backend {name!r}; choose one of: {', '.join(BACKENDS)}")
    module_name, attr = _FACTORIES[name].split(":")
    _check_settings(model_args or {})
    try:
        factory = getattr(importlib.import_module(module_name), attr)
        backend: Backend = factory(model, **(model_args or {}))
        return backend
    except ModuleNotFoundError as exc:
        raise BadInput(
            f"the {name} backend needs the {exc.name or 'missing'} package: "
            f"{pip_install(_EXTRAS[name])}"
        ) from exc
    except TypeError as exc:
        if "unexpected keyword argument" not in str(exc):
            raise
        raise BadInput(
            f"--model-args: {name} backend does not take {exc}".replace(
                f"{attr}.__init__() got an unexpected keyword argument ", ""
            )
        ) from exc


def parse_model_args(text: str | None) -> dict[str, Any]:
    """Parse lm-eval style `k=v,k2=v2` into typed values (int, float, bool, str)."""
    args: dict[str, Any] = {}
    if not text:
        return args
    for part in text.split(","):
        if not part.strip():
            continue
        if "=" not in part:
            raise BadInput(f"--model-args: expected key=value, got {part!r}")
        key, value = (s.strip() for s in part.split("=", 1))
        # A sha256 stays text: 64 digits would read as an int.
        args[key] = value.lower() if key == "model_sha256" else _typed(value)
    _check_settings(args)
    return args


def _check_settings(args: Mapping[str, Any]) -> None:
    """BadInput for a size setting above MAX_SETTINGS (types are the backend's to check) or a
    model_sha256 that is no sha256 (a suite file's model_args skip `parse_model_args`)."""
    if "model_sha256" in args and not is_sha256(args["model_sha256"], empty=True):
        raise BadInput("--model-args: model_sha256 must be 64 hex digits (the weights' sha256)")
    for key, limit in MAX_SETTINGS.items():
        value = args.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and value > limit:
            raise BadInput(f"--model-args: {key} must be <= {limit}, got {value:.20g}")


def _typed(value: str) -> Any:
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    for cast in (int, float):
        try:
            return cast(value)
        except ValueError:
            pass
    return value


def dispatch(
    backend: Backend, requests: Sequence[Request], progress: Progress | None = None
) -> list[AnyResult]:
    """Send requests to the backend, one call per request kind; results in request order."""
    results: list[AnyResult | None] = [None] * len(requests)
    by_kind: dict[str, list[int]] = {}
    for i, request in enumerate(requests):
        by_kind.setdefault(request.kind, []).append(i)
    methods: dict[str, Callable[..., list[Any]]] = {
        "loglikelihood": backend.loglikelihood,
        "loglikelihood_rolling": backend.loglikelihood_rolling,
        "generate_until": backend.generate,
    }
    for kind, indices in by_kind.items():
        answers = methods[kind]([requests[i] for i in indices], progress)
        for i, answer in zip(indices, answers, strict=True):
            results[i] = answer
    return results  # type: ignore[return-value]
