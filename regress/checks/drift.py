"""The drift use case: rerun a pinned baseline's model with today's runtime and judge the
movement against the noise of what changed (regress.gate.drift)."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from regress.checks.steps import RunProgress, run_plan
from regress.core.manifest import Run
from regress.gate.drift import DriftReport, drift_report
from regress.gate.policy import Policy
from regress.run.runner import plan_rerun
from regress.tasks.base import DataSource
from regress.tasks.catalog import BUILTIN, TaskCatalog


@dataclass(frozen=True)
class DriftOptions:
    """How to rerun a pinned baseline for a drift check."""

    policy: Policy = field(default_factory=Policy)
    source: DataSource = field(default_factory=DataSource)
    max_age: timedelta = timedelta(days=30)
    """Warn when the baseline is older than this."""
    model: str | None = None
    """Where the pinned model file is now (default: the reference it recorded)."""
    model_args: Mapping[str, Any] = field(default_factory=dict)
    """Settings to override, to see whether they move results."""
    command: str = ""
    tasks: TaskCatalog = BUILTIN
    """Where the baseline's task names are found: built in, task YAML, golden sets."""


def check_drift(
    baseline: Run, options: DriftOptions | None = None, progress: RunProgress | None = None
) -> DriftReport:
    """Rerun `baseline`'s pinned model with today's runtime (no result cache) and judge the
    movement against the noise of what changed (see `regress.gate.drift.drift_report`)."""
    options = options or DriftOptions()
    progress = progress or (lambda label: nullcontext(None))
    plan = plan_rerun(
        baseline,
        options.model or baseline.manifest.model.ref,
        baseline.manifest.backend.name,
        model_args=options.model_args,
        source=options.source,
        name="drift",
        command=options.command,
        tasks=options.tasks,
    )
    current = run_plan(plan, f"drift {baseline.manifest.name}", progress).run
    return drift_report(baseline, current, options.policy, options.max_age)
