"""Evaluate a suite with a model and package the outcome as a `Run` (manifest + records).

Shared by `eval`, `baseline create`, `check` and `drift`: the one place a backend is loaded
and its fingerprint written into a manifest. What to run is a typed `RunPlan`.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from regress import __version__
from regress.backends import Backend, load_backend
from regress.backends.models import ModelFile, resolve_model
from regress.core.errors import BadInput
from regress.core.fingerprint import MODEL_PARAMS, result_params
from regress.core.manifest import Manifest, ModelInfo, Run
from regress.core.proxy_design import ProxyDesign
from regress.run.cache import ResultCache, cached_execute, model_key
from regress.run.engine import Prepared, Shard, TaskRun, TaskSpec, evaluate
from regress.run.generation import GenerationSettings
from regress.run.suite import Suite
from regress.tasks.base import DataSource
from regress.tasks.catalog import BUILTIN, TaskCatalog
from regress.tasks.instructions import instructions_of

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


def suite_specs(
    suite: Suite,
    catalog: TaskCatalog = BUILTIN,
    generation: GenerationSettings | None = None,
) -> list[TaskSpec]:
    """Expand a suite's entries (groups and task files included) into one spec per task;
    `catalog` adds the user's own tasks (task YAML, golden sets) to the built-in ones;
    `generation` (the command line's) goes over each entry's own for generate_until tasks."""
    catalog = catalog.with_instructions(suite.instructions)
    specs: dict[str, TaskSpec] = {}
    for entry in suite.tasks:
        tasks = catalog.get([entry.task])
        if entry.docs is not None and len(tasks) > 1:
            raise BadInput(
                f"suite {suite.name}: `docs` needs a single task, {entry.task} is a group"
            )
        settings = generation.over(entry.generation) if generation else entry.generation
        for task in tasks:
            generates = task.output_type == "generate_until"
            if not (generates or entry.generation.is_default):
                raise BadInput(
                    f"suite {suite.name}: {task.name} does not generate; gen_kwargs and "
                    "repeats apply to generate_until tasks only"
                )
            specs[task.name] = TaskSpec(
                task,
                entry.num_fewshot,
                entry.limit,
                entry.docs,
                settings if generates else GenerationSettings(),
            )
    return list(specs.values())


def baseline_specs(baseline: Run, catalog: TaskCatalog = BUILTIN) -> list[TaskSpec]:
    """Specs that rerun exactly a baseline's examples with the same shots (and instructions)."""
    catalog = catalog.with_instructions(baseline.manifest.instructions)
    missing = sorted(name for name in baseline.manifest.tasks if not catalog.has(name))
    if missing:
        raise BadInput(
            f"baseline {baseline.manifest.name!r} has task(s) {', '.join(missing[:5])} that are "
            "not built in: pass the same --include-path / --golden as when it was made "
            f"(it was made by: {baseline.manifest.command or 'unknown'})"
        )
    tasks = {t.name: t for t in catalog.get(sorted(baseline.manifest.tasks))}
    return [
        TaskSpec(
            tasks[name],
            info.num_fewshot,
            info.limit,
            tuple(r.doc_id for r in baseline.records[name]),
            GenerationSettings.from_dict(info.generation)
            if info.generation
            else GenerationSettings(),
        )
        for name, info in sorted(baseline.manifest.tasks.items())
    ]


@dataclass(frozen=True)
class RunPlan:
    """Everything one evaluation needs: which examples, which model where, and how it is kept.

    Build one with `plan_rerun` to rerun exactly a baseline's examples, or directly from a
    suite's `suite_specs`.
    """

    specs: tuple[TaskSpec, ...]
    model: str
    """A .gguf path, a model folder, a served model name, or a packaged short name."""
    backend: str = "llama_cpp"
    model_args: Mapping[str, Any] = field(default_factory=dict)
    """Backend settings (n_ctx, threads, dtype, base_url, ...)."""
    source: DataSource = field(default_factory=DataSource)
    name: str = "run"
    """The run's name in its manifest (a baseline's name, `candidate`, ...)."""
    suite_name: str = ""
    cache_dir: Path | None = None
    """Result cache folder: finished requests are replayed, a killed run resumes. None: off."""
    shard: Shard | None = None
    command: str = ""
    """The command line that asked for the run, recorded in the manifest."""
    proxy: ProxyDesign | None = None
    """A rerun of a proxy's examples is a sample of the same design: kept in its manifest."""


def plan_rerun(
    baseline: Run, model: str, backend: str, tasks: TaskCatalog = BUILTIN, **changes: Any
) -> RunPlan:
    """A plan that reruns exactly `baseline`'s examples (same shots) on `model`.

    The baseline's result-relevant settings carry over when the backend is the same (but a
    served model's name and weights only to the same model); a `model_args` given in
    `changes` overrides them key by key. `tasks` is the catalog the
    baseline's task names are found in (the user's task YAML and golden sets).
    """
    inherited: dict[str, Any] = {}
    if baseline.manifest.backend.name == backend:
        inherited = result_params(baseline.manifest.backend.params)
    if model != baseline.manifest.model.ref:
        # Another served model is not the baseline's under its name and weights.
        inherited = {k: v for k, v in inherited.items() if k not in MODEL_PARAMS}
    model_args = {**inherited, **dict(changes.pop("model_args", {}))}
    return RunPlan(
        specs=tuple(baseline_specs(baseline, tasks)),
        model=model,
        backend=backend,
        model_args=model_args,
        suite_name=baseline.manifest.suite_name,
        proxy=baseline.manifest.proxy,
        **changes,
    )


@dataclass(frozen=True)
class Outcome:
    """A finished evaluation: the storable run plus the raw task runs and wall time."""

    run: Run
    task_runs: list[TaskRun]
    elapsed_s: float
    cached: int = 0
    """Requests answered from the result cache (a resumed run shows them here)."""
    computed: int = 0
    """Requests computed by the backend, when the result cache was on."""
    cache_rejected: int = 0
    """Cached rows not replayed (corrupt or failing their digest): computed again."""
    cache_enabled: bool = False


def execute(
    plan: RunPlan,
    progress: Callable[[int, int, int], None] | None = None,
    prepared: Prepared | None = None,
    engine: Backend | None = None,
) -> Outcome:
    """Load the model on the plan's backend, evaluate its specs (or one shard), build the run;
    `prepared` is the plan's examples when the caller has rendered them already, `engine`
    the plan's backend when the caller has loaded it already (and closes it itself: a check
    that interleaves two models on one server sends chunks through the same two backends).

    With a cache folder, finished requests are replayed and new ones committed as they
    complete, so the same call after a kill resumes where it stopped. Results of a server
    are cached only when `model_sha256` names the weights it serves.
    """
    model = _resolve(plan.model, plan.backend)
    info = _model_info(model, plan.model_args)
    start = time.perf_counter()
    owned = engine is None
    if engine is None:
        engine = load_backend(plan.backend, model, dict(plan.model_args))
    cache = None
    try:
        fingerprint = engine.fingerprint()
        replay = None
        if plan.cache_dir is not None and info.sha256:
            cache = ResultCache(plan.cache_dir)
            prefix = model_key(info.sha256, fingerprint)
            replay = lambda reqs, tick: cached_execute(engine, reqs, tick, cache, prefix)  # noqa: E731
        task_runs = evaluate(
            plan.specs,
            engine,
            plan.source,
            progress,
            run=replay,
            shard=plan.shard,
            prepared=prepared,
        )
    finally:
        if owned:
            engine.close()
        if cache is not None:
            cache.close()
    elapsed = time.perf_counter() - start
    manifest = Manifest(
        name=plan.name,
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        regress_version=__version__,
        model=info,
        backend=fingerprint,
        suite_name=plan.suite_name,
        tasks={r.info.name: r.info for r in task_runs},
        environment=environment(),
        command=plan.command,
        shard=f"{plan.shard.index}/{plan.shard.count}" if plan.shard else None,
        proxy=plan.proxy,
        instructions=instructions_of(spec.task for spec in plan.specs),
    )
    run = Run(manifest=manifest, records={r.info.name: r.records for r in task_runs})
    return Outcome(
        run=run,
        task_runs=task_runs,
        elapsed_s=elapsed,
        cached=cache.hits if cache is not None else 0,
        computed=cache.misses if cache is not None else 0,
        cache_rejected=cache.rejected if cache is not None else 0,
        cache_enabled=cache is not None,
    )


def _resolve(model: str, backend: str) -> str | ModelFile:
    """The plan's model resolved once for the in-process backends; a served model's name as
    it is (it has no file here)."""
    return model if backend == "openai" else resolve_model(model)


def _model_info(model: str | ModelFile, model_args: Mapping[str, Any]) -> ModelInfo:
    if isinstance(model, ModelFile):
        return model.info
    # A served model has no file here: only the user can say which weights it serves.
    return ModelInfo(ref=model, sha256=str(model_args.get("model_sha256", "")))
