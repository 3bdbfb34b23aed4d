"""Drift reports: the Markdown for a job summary and the JSON, from a `DriftReport`."""

from __future__ import annotations

import json

from regress.gate.drift import DriftReport, DriftVerdict
from regress.gate.noise import Cause

_ICON = {
    DriftVerdict.STABLE: "✅",
    DriftVerdict.LOGPROB_DRIFT: "⚠️",
    DriftVerdict.DRIFT: "❌",
}


def render_drift_markdown(report: DriftReport) -> str:
    """Markdown for a job summary: verdict and cause first, then the tests and what changed."""
    lines = [
        f"## regress drift: {_ICON[report.verdict]} {report.verdict} on baseline "
        f"`{report.baseline}` (cause: {report.cause})",
        "",
        report.reason + ".",
        "",
        "| task | n | flips | max abs Δ log-prob | mean abs Δ log-prob |",
        "|---|---:|---:|---:|---:|",
    ]
    for t in report.tasks:
        lines.append(
            f"| {t.task} | {t.n} | {t.flips} | {t.max_abs_logprob_delta:.4g} | "
            f"{t.mean_abs_logprob_delta:.4g} |"
        )
    if report.units and report.cause in (Cause.HARDWARE, Cause.RUNTIME):
        lines += [
            "",
            "| unit | n | b | c | noise floor | adj. p (more flips) | adj. p (accuracy shift) |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {u.name} | {u.n} | {u.b} | {u.c} | {u.flip_floor:.1%} | {u.p_flips:.3g} | "
            f"{u.p_shift:.3g} |"
            for u in report.units
        ]
    lines += ["", "### What changed since the baseline", ""]
    lines += [f"- {c}" for c in report.changes] or ["- nothing recorded differs"]
    if report.warnings:
        lines += ["", "### Warnings", ""] + [f"- {w}" for w in report.warnings]
    return "\n".join(lines) + "\n"


def render_drift_json(report: DriftReport) -> str:
    """The JSON report, sorted keys."""
    return json.dumps(report.to_dict(), indent=2, sort_keys=True) + "\n"
