"""regress: a CI gate that tells whether a change to a small language model made it worse.

The gate is a library; the `regress` command only calls it::

    from regress import CandidateModel, CheckOptions, Store, check, render_markdown

    baseline = Store("baselines").load("main")
    result = check(baseline, CandidateModel("candidate.gguf"), CheckOptions())
    print(render_markdown(result.comparison))
    raise SystemExit(result.comparison.exit_code)

Names are imported on first use, so `import regress` loads neither click, rich nor torch.
(Public names never repeat a submodule's name: importing `regress.drift` would shadow it.)
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_PUBLIC = {
    "CandidateModel": "regress.gate",
    "CheckOptions": "regress.gate",
    "CheckResult": "regress.gate",
    "DriftOptions": "regress.gate",
    "Rebaseline": "regress.gate",
    "check": "regress.gate",
    "check_drift": "regress.gate",
    "Comparison": "regress.comparison",
    "Verdict": "regress.comparison",
    "ExitCode": "regress.errors",
    "RegressError": "regress.errors",
    "Policy": "regress.policy",
    "load_policy": "regress.policy",
    "Run": "regress.manifest",
    "Store": "regress.store",
    "read_run": "regress.store",
    "write_run": "regress.store",
    "RunPlan": "regress.runner",
    "execute": "regress.runner",
    "plan_rerun": "regress.runner",
    "suite_specs": "regress.runner",
    "load_suite": "regress.config",
    "resolve_source": "regress.tasks",
    "render_markdown": "regress.report.markdown",
    "render_json": "regress.report.json_report",
    "render_drift_markdown": "regress.drift",
    "ProxyOptions": "regress.proxy",
    "build_proxy": "regress.proxy",
    "SelftestOptions": "regress.selftest",
    "selftest_baseline": "regress.selftest",
}

__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module 'regress' has no attribute {name!r}")
    value = getattr(importlib.import_module(_PUBLIC[name]), name)
    globals()[name] = value
    return value
