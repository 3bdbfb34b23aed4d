"""Drift: rerun a pinned baseline with today's runtime and say what moved.

An A/A check: the model file is the same (its sha256 is verified first), so any flipped
answer comes from the runtime — a library upgrade, another CPU's instruction set, a changed
setting. The report lists what differs between the two environments next to the flips.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from regress.errors import BadInput, ExitCode
from regress.manifest import Manifest, Run

DRIFT_SCHEMA_VERSION = 1


def parse_age(text: str) -> timedelta:
    """`30d`, `12h`, `2w` into a timedelta."""
    match = re.fullmatch(r"(\d+)\s*([hdw])", text.strip())
    if not match:
        raise BadInput(f"--max-age: expected a number and h, d or w (e.g. 30d), got {text!r}")
    value, unit = int(match.group(1)), match.group(2)
    return {"h": timedelta(hours=value), "d": timedelta(days=value), "w": timedelta(weeks=value)}[
        unit
    ]


def _features(system_info: str) -> dict[str, str]:
    """`AVX2 = 1 | AVX512 = 1 | ...` into {feature: value}."""
    return dict(re.findall(r"(\w+) = (\w+)", system_info))


def environment_changes(baseline: Manifest, current: Manifest) -> list[str]:
    """Human lines naming each runtime difference that can change log-probs."""
    changes = []
    b_env, c_env = baseline.environment, current.environment
    if baseline.regress_version != current.regress_version:
        changes.append(f"regress {baseline.regress_version} -> {current.regress_version}")
    if baseline.backend.version != current.backend.version:
        changes.append(
            f"{baseline.backend.name} {baseline.backend.version} -> {current.backend.version}"
        )
    for key in ("python", "cpu", "platform"):
        if b_env.get(key) != c_env.get(key):
            changes.append(f"{key}: {b_env.get(key)} -> {c_env.get(key)}")
    b_libs, c_libs = b_env.get("libraries", {}), c_env.get("libraries", {})
    for lib in sorted(set(b_libs) | set(c_libs)):
        if b_libs.get(lib) != c_libs.get(lib):
            changes.append(f"{lib} {b_libs.get(lib, 'absent')} -> {c_libs.get(lib, 'absent')}")
    b_feat = _features(str(baseline.backend.build.get("system_info", "")))
    c_feat = _features(str(current.backend.build.get("system_info", "")))
    for feat in sorted(set(b_feat) | set(c_feat)):
        if b_feat.get(feat) != c_feat.get(feat):
            changes.append(
                f"CPU build feature {feat}: {b_feat.get(feat, 'absent')} -> "
                f"{c_feat.get(feat, 'absent')}"
            )
    b_params, c_params = baseline.backend.params, current.backend.params
    for key in sorted(set(b_params) | set(c_params)):
        if b_params.get(key) != c_params.get(key):
            changes.append(f"setting {key}: {b_params.get(key)} -> {c_params.get(key)}")
    return changes


@dataclass(frozen=True)
class TaskDrift:
    """How far one task's answers and log-probs moved."""

    task: str
    n: int
    flips: int
    max_abs_logprob_delta: float
    mean_abs_logprob_delta: float


@dataclass(frozen=True)
class DriftReport:
    """The outcome of a drift check; `to_dict()` is the JSON report."""

    baseline: str
    model_sha256: str
    verdict: str
    """STABLE (no flip, identical log-probs), LOGPROB_DRIFT (log-probs moved, no flip) or DRIFT."""
    exit_code: ExitCode
    tasks: tuple[TaskDrift, ...]
    changes: tuple[str, ...]
    warnings: tuple[str, ...] = field(default=())
    schema_version: int = DRIFT_SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        data = asdict(self)
        data["exit_code"] = int(self.exit_code)
        return data


def _task_drift(task: str, base: Run, current: Run) -> TaskDrift:
    deltas: list[float] = []
    flips = 0
    pairs = zip(base.records[task], current.records.get(task, []), strict=False)
    for b, c in pairs:
        if b.pred != c.pred or b.status != c.status:
            flips += 1
        bl, cl = b.scores.get("loglik"), c.scores.get("loglik")
        if bl and cl and len(bl) == len(cl):
            deltas.extend(abs(x - y) for x, y in zip(bl, cl, strict=True))
        elif "loglik" in b.metrics and "loglik" in c.metrics:
            deltas.append(abs(b.metrics["loglik"] - c.metrics["loglik"]))
    return TaskDrift(
        task=task,
        n=len(base.records[task]),
        flips=flips,
        max_abs_logprob_delta=max(deltas, default=0.0),
        mean_abs_logprob_delta=sum(deltas) / len(deltas) if deltas else 0.0,
    )


def drift_report(
    base: Run, current: Run, max_age: timedelta, now: datetime | None = None
) -> DriftReport:
    """Compare a rerun of the pinned model with its baseline, example by example."""
    now = now or datetime.now(UTC)
    tasks = tuple(_task_drift(t, base, current) for t in sorted(base.records))
    warnings = []
    age = now - datetime.fromisoformat(base.manifest.created)
    if age > max_age:
        warnings.append(
            f"baseline {base.manifest.name!r} is {age.days} days old (max {max_age.days}): "
            "re-pin it with `regress baseline create`"
        )
    flips = sum(t.flips for t in tasks)
    moved = any(t.max_abs_logprob_delta > 0 for t in tasks)
    verdict = "DRIFT" if flips else ("LOGPROB_DRIFT" if moved else "STABLE")
    return DriftReport(
        baseline=base.manifest.name,
        model_sha256=base.manifest.model.sha256,
        verdict=verdict,
        exit_code=ExitCode.REGRESSION if flips else ExitCode.OK,
        tasks=tasks,
        changes=tuple(environment_changes(base.manifest, current.manifest)),
        warnings=tuple(warnings),
    )


_ICON = {"STABLE": "✅", "LOGPROB_DRIFT": "⚠️", "DRIFT": "❌"}


def render_drift_markdown(report: DriftReport) -> str:
    """Markdown for a job summary: verdict first, then per-task movement and what changed."""
    flips = sum(t.flips for t in report.tasks)
    n = sum(t.n for t in report.tasks)
    lines = [
        f"## regress drift: {_ICON[report.verdict]} {report.verdict} "
        f"({flips} of {n} answers changed) on baseline `{report.baseline}`",
        "",
        f"Model sha256 `{report.model_sha256[:16]}` verified unchanged; differences come from "
        "the runtime.",
        "",
        "| task | n | flips | max abs Δ log-prob | mean abs Δ log-prob |",
        "|---|---:|---:|---:|---:|",
    ]
    for t in report.tasks:
        lines.append(
            f"| {t.task} | {t.n} | {t.flips} | {t.max_abs_logprob_delta:.4g} | "
            f"{t.mean_abs_logprob_delta:.4g} |"
        )
    lines += ["", "### What changed since the baseline", ""]
    lines += [f"- {c}" for c in report.changes] or ["- nothing recorded differs"]
    if report.warnings:
        lines += ["", "### Warnings", ""] + [f"- {w}" for w in report.warnings]
    return "\n".join(lines) + "\n"


def render_drift_json(report: DriftReport) -> str:
    """The JSON report, sorted keys."""
    return json.dumps(report.to_dict(), indent=2, sort_keys=True) + "\n"
