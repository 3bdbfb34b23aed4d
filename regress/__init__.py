"""regress: a CI gate that tells whether a change to a small language model made it worse.

The gate is a library; the `regress` command only calls it::

    from regress import CandidateModel, CheckOptions, Store, check, render_markdown

    baseline = Store("baselines").load("main")
    result = check(baseline, CandidateModel("candidate.gguf"), CheckOptions())
    print(render_markdown(result.comparison))
    raise SystemExit(result.comparison.exit_code)

Names are imported on first use, so `import regress` loads neither click, rich nor torch.
(Public names never repeat a submodule's name: importing `regress.gate.drift` would shadow it.)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:  # the names for type checkers; at run time they load on first use
    from regress.checks import (
        CandidateModel,
        CheckOptions,
        CheckResult,
        DriftOptions,
        Rebaseline,
        check,
        check_drift,
    )
    from regress.core.errors import ExitCode, RegressError
    from regress.core.manifest import Run
    from regress.core.store import Store, read_run, write_run
    from regress.gate.policy import Policy, load_policy
    from regress.gate.results import Comparison, Verdict
    from regress.proxy.build import ProxyOptions, build_proxy
    from regress.proxy.selftest import SelftestOptions, selftest_baseline
    from regress.report.drift import render_drift_markdown
    from regress.report.json_report import render_json
    from regress.report.markdown import render_markdown
    from regress.run.runner import RunPlan, execute, plan_rerun, suite_specs
    from regress.run.suite import load_suite
    from regress.stats import SequentialDesign
    from regress.tasks import resolve_source

_PUBLIC = {
    "CandidateModel": "regress.checks",
    "CheckOptions": "regress.checks",
    "CheckResult": "regress.checks",
    "DriftOptions": "regress.checks",
    "Rebaseline": "regress.checks",
    "check": "regress.checks",
    "check_drift": "regress.checks",
    "Comparison": "regress.gate.results",
    "Verdict": "regress.gate.results",
    "ExitCode": "regress.core.errors",
    "RegressError": "regress.core.errors",
    "Policy": "regress.gate.policy",
    "load_policy": "regress.gate.policy",
    "SequentialDesign": "regress.stats",
    "Run": "regress.core.manifest",
    "Store": "regress.core.store",
    "read_run": "regress.core.store",
    "write_run": "regress.core.store",
    "RunPlan": "regress.run.runner",
    "execute": "regress.run.runner",
    "plan_rerun": "regress.run.runner",
    "suite_specs": "regress.run.runner",
    "load_suite": "regress.run.suite",
    "resolve_source": "regress.tasks",
    "render_markdown": "regress.report.markdown",
    "render_json": "regress.report.json_report",
    "render_drift_markdown": "regress.report.drift",
    "ProxyOptions": "regress.proxy.build",
    "build_proxy": "regress.proxy.build",
    "SelftestOptions": "regress.proxy.selftest",
    "selftest_baseline": "regress.proxy.selftest",
}

__all__ = [
    "__version__",
    "CandidateModel",
    "CheckOptions",
    "CheckResult",
    "DriftOptions",
    "Rebaseline",
    "check",
    "check_drift",
    "Comparison",
    "Verdict",
    "ExitCode",
    "RegressError",
    "Policy",
    "load_policy",
    "SequentialDesign",
    "Run",
    "Store",
    "read_run",
    "write_run",
    "RunPlan",
    "execute",
    "plan_rerun",
    "suite_specs",
    "load_suite",
    "resolve_source",
    "render_markdown",
    "render_json",
    "render_drift_markdown",
    "ProxyOptions",
    "build_proxy",
    "SelftestOptions",
    "selftest_baseline",
]


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'regress' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value
