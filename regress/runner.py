"""Evaluate a suite with a model and package the outcome as a `Run` (manifest + records).

Shared by `eval`, `baseline create`, `check` and `drift`: the one place a backend is loaded
and its fingerprint written into a manifest.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from typing import Any

from regress import __version__
from regress.backends import load_backend
from regress.cache import ResultCache, cached_execute, model_key
from regress.config import Suite
from regress.engine import Shard, TaskRun, TaskSpec, evaluate
from regress.errors import BadInput
from regress.manifest import BackendInfo, Manifest, ModelInfo, Run
from regress.models import model_info
from regress.tasks import get_tasks
from regress.tasks.base import DataSource

_LIBRARIES = ("llama_cpp_python", "transformers", "torch", "numpy", "gguf", "lm_eval")


def environment() -> dict[str, Any]:
    """Python, platform, CPU and library versions: what drift checks compare."""
    versions = {}
    for name in _LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu": _cpu_name(),
        "libraries": versions,
    }


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def suite_specs(suite: Suite) -> list[TaskSpec]:
    """Expand a suite's entries (groups included) into one spec per task."""
    specs: dict[str, TaskSpec] = {}
    for entry in suite.tasks:
        tasks = get_tasks([entry.task])
        if entry.docs is not None and len(tasks) > 1:
            raise BadInput(
                f"suite {suite.name}: `docs` needs a single task, {entry.task} is a group"
            )
        for task in tasks:
            specs[task.name] = TaskSpec(task, entry.num_fewshot, entry.limit, entry.docs)
    return list(specs.values())


def baseline_specs(baseline: Run) -> list[TaskSpec]:
    """Specs that rerun exactly a baseline's examples with the same shots."""
    tasks = {t.name: t for t in get_tasks(sorted(baseline.manifest.tasks))}
    return [
        TaskSpec(
            tasks[name],
            info.num_fewshot,
            info.limit,
            tuple(r.doc_id for r in baseline.records[name]),
        )
        for name, info in sorted(baseline.manifest.tasks.items())
    ]


@dataclass(frozen=True)
class Outcome:
    """A finished evaluation: the storable run plus the raw task runs and wall time."""

    run: Run
    task_runs: list[TaskRun]
    elapsed_s: float
    cached: int = 0
    """Requests answered from the result cache (a resumed run shows them here)."""


def run_specs(
    specs: Sequence[TaskSpec],
    model: str,
    backend: str,
    model_args: dict[str, Any],
    source: DataSource,
    *,
    name: str,
    suite_name: str,
    command: str = "",
    progress: Callable[[int, int, int], None] | None = None,
    cache: ResultCache | None = None,
    shard: Shard | None = None,
) -> Outcome:
    """Load the model on `backend`, evaluate `specs` (or one shard of them), build the manifest.

    With a `cache`, finished requests are replayed and new ones committed as they complete,
    so the same call after a kill resumes where it stopped.
    """
    info = _model_info(model, backend)
    start = time.perf_counter()
    engine = load_backend(backend, model, model_args)
    try:
        fingerprint = engine.fingerprint()
        run = None
        if cache is not None:
            prefix = model_key(info.sha256, fingerprint)
            run = lambda reqs, tick: cached_execute(engine, reqs, tick, cache, prefix)  # noqa: E731
        task_runs = evaluate(specs, engine, source, progress, run=run, shard=shard)
    finally:
        engine.close()
    elapsed = time.perf_counter() - start
    manifest = Manifest(
        name=name,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        regress_version=__version__,
        model=info,
        backend=BackendInfo(
            name=fingerprint["name"],
            version=str(fingerprint.get("version", "")),
            params=fingerprint.get("params", {}),
            build=fingerprint.get("build", {}),
        ),
        suite_name=suite_name,
        tasks={r.info.name: r.info for r in task_runs},
        environment=environment(),
        command=command,
        shard=f"{shard.index}/{shard.count}" if shard else None,
    )
    run = Run(manifest=manifest, records={r.info.name: r.records for r in task_runs})
    cached = cache.hits if cache is not None else 0
    return Outcome(run=run, task_runs=task_runs, elapsed_s=elapsed, cached=cached)


def _model_info(model: str, backend: str) -> ModelInfo:
    if backend == "openai":
        # A served model has no file here; the server's fingerprint identifies it.
        return ModelInfo(ref=model, sha256="")
    return model_info(model)
