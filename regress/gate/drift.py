"""Drift: rerun a pinned baseline with today's runtime and say what moved, and why.

A scheduled A/A check. The cause is told apart first (the model file changed, the runtime or
a setting changed, the CPU build changed, nothing changed), then answers are paired and
tested as `check` does, against the noise that cause measurably produces (regress.gate.noise): a
job that lands on a runner with another CPU must not alarm when nothing but the hardware
changed.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from scipy.stats import binomtest

from regress.core.errors import BadInput, ExitCode
from regress.core.fingerprint import hardware_differences, result_params
from regress.core.manifest import Manifest, Run
from regress.gate.compare import judge
from regress.gate.noise import NOISE_FLOORS, Cause
from regress.gate.pairing import Pair, pair
from regress.gate.policy import Policy
from regress.gate.results import Comparison
from regress.stats import adjust_pvalues, mcnemar_pvalue

DRIFT_SCHEMA_VERSION = 2


def parse_age(text: str) -> timedelta:
    """`30d`, `12h`, `2w` into a timedelta."""
    match = re.fullmatch(r"(\d+)\s*([hdw])", text.strip())
    if not match:
        raise BadInput(f"--max-age: expected a number and h, d or w (e.g. 30d), got {text!r}")
    value, unit = int(match.group(1)), match.group(2)
    return {"h": timedelta(hours=value), "d": timedelta(days=value), "w": timedelta(weeks=value)}[
        unit
    ]


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
    for key in ("python", "platform"):
        if b_env.get(key) != c_env.get(key):
            changes.append(f"{key}: {b_env.get(key)} -> {c_env.get(key)}")
    b_libs, c_libs = b_env.get("libraries", {}), c_env.get("libraries", {})
    for lib in sorted(set(b_libs) | set(c_libs)):
        if b_libs.get(lib) != c_libs.get(lib):
            changes.append(f"{lib} {b_libs.get(lib, 'absent')} -> {c_libs.get(lib, 'absent')}")
    if baseline.model.sha256 != current.model.sha256:
        changes.append(
            f"model file sha256 {baseline.model.sha256[:12]} -> {current.model.sha256[:12]}"
        )
    changes += hardware_differences(baseline.backend, current.backend)
    b_params, c_params = baseline.backend.params, current.backend.params
    for key in sorted(set(b_params) | set(c_params)):
        if b_params.get(key) != c_params.get(key):
            changes.append(f"setting {key}: {b_params.get(key)} -> {c_params.get(key)}")
    return changes


class DriftVerdict(StrEnum):
    """What a drift check concluded."""

    STABLE = "STABLE"
    """No answer moved beyond the measured noise of what changed."""
    LOGPROB_DRIFT = "LOGPROB_DRIFT"
    """Nothing recorded changed, no answer flipped, yet log-probs moved: worth a look."""
    DRIFT = "DRIFT"
    """The pinned file changed, or answers moved beyond the noise of what changed."""


@dataclass(frozen=True)
class TaskDrift:
    """How far one task's answers and log-probs moved (examples paired as `check` pairs them)."""

    task: str
    n: int
    flips: int
    """Examples whose answer or status changed."""
    max_abs_logprob_delta: float
    mean_abs_logprob_delta: float


@dataclass(frozen=True)
class UnitDrift:
    """One gated unit's paired tests: did answers move more than the cause's noise explains?"""

    name: str
    n: int
    b: int
    """Right in the baseline, wrong in the rerun."""
    c: int
    """Wrong in the baseline, right in the rerun."""
    flip_floor: float
    """The cause's measured share of changed outcomes (regress.gate.noise)."""
    p_flips: float
    """One-sided binomial test of (b + c) / n > flip_floor, Holm-adjusted."""
    p_shift: float
    """Two-sided McNemar mid-p test of an accuracy change (b vs c), Holm-adjusted."""


@dataclass(frozen=True)
class DriftReport:
    """The outcome of a drift check; `to_dict()` is the JSON report."""

    baseline: str
    model_sha256: str
    verdict: DriftVerdict
    cause: Cause
    """The weightiest difference found: model, runtime, hardware or nothing."""
    exit_code: ExitCode
    tasks: tuple[TaskDrift, ...]
    units: tuple[UnitDrift, ...]
    changes: tuple[str, ...]
    """Every recorded difference between the two runs, one line each."""
    reason: str
    """One line saying why the verdict is what it is."""
    warnings: tuple[str, ...] = field(default=())
    schema_version: int = DRIFT_SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        data = asdict(self)
        data["exit_code"] = int(self.exit_code)
        return data


def drift_cause(baseline: Manifest, current: Manifest) -> Cause:
    """The weightiest difference between a baseline and a rerun of its pinned model."""
    old, new = baseline.backend, current.backend
    if baseline.model.sha256 != current.model.sha256:
        return Cause.MODEL
    runtime = (old.name, old.version, old.libraries, result_params(old.params))
    if runtime != (new.name, new.version, new.libraries, result_params(new.params)):
        return Cause.RUNTIME
    if old.hardware.kernels != new.hardware.kernels:
        return Cause.HARDWARE
    return Cause.NOTHING


def _task_drift(name: str, pairs: list[Pair]) -> TaskDrift:
    deltas: list[float] = []
    flips = 0
    for b, c in pairs:
        flips += b.pred != c.pred or b.status != c.status
        bl, cl = b.scores.get("loglik"), c.scores.get("loglik")
        if bl and cl and len(bl) == len(cl):
            deltas.extend(abs(x - y) for x, y in zip(bl, cl, strict=True))
        elif "loglik" in b.metrics and "loglik" in c.metrics:
            deltas.append(abs(b.metrics["loglik"] - c.metrics["loglik"]))
    return TaskDrift(
        task=name,
        n=len(pairs),
        flips=flips,
        max_abs_logprob_delta=max(deltas, default=0.0),
        mean_abs_logprob_delta=sum(deltas) / len(deltas) if deltas else 0.0,
    )


def _unit_tests(comparison: Comparison, cause: Cause, policy: Policy) -> tuple[UnitDrift, ...]:
    """Per gated accuracy unit, both tests against the cause's floor, Holm across all."""
    floor = NOISE_FLOORS[cause].flips if cause in NOISE_FLOORS else 0.0
    units = [u for u in comparison.units if u.gated and u.b is not None and u.n]
    raw: list[float] = []
    for unit in units:
        b, c = unit.b or 0, unit.c or 0
        flips = binomtest(b + c, unit.n, floor, alternative="greater").pvalue if floor else 1.0
        shift = min(1.0, 2 * min(mcnemar_pvalue(b, c), mcnemar_pvalue(c, b)))
        raw += [float(flips), shift]
    adjusted = adjust_pvalues(raw, policy.correction) if raw else []
    return tuple(
        UnitDrift(u.name, u.n, u.b or 0, u.c or 0, floor, adjusted[2 * i], adjusted[2 * i + 1])
        for i, u in enumerate(units)
    )


def drift_report(
    base: Run, current: Run, policy: Policy, max_age: timedelta, now: datetime | None = None
) -> DriftReport:
    """Compare a rerun of the pinned model with its baseline, example by example.

    Pairs and tests exactly as `check` does. What counts as drift depends on the cause: a
    changed model file always; with nothing changed, any flipped answer (reruns are exact);
    with another runtime or CPU build, answers that moved beyond that cause's measured noise
    (more flips than its floor, or a shift in accuracy), each test at the policy's alpha with
    Holm across units.
    """
    now = now or datetime.now(UTC)
    if base.manifest.proxy is not None:
        # Drift counts flips against a noise floor; a proxy oversamples the unsure examples,
        # so its raw flip share would overstate drift. The parent holds every example.
        raise BadInput(
            f"{base.manifest.name} is a proxy of {base.manifest.proxy.parent}: "
            "check drift on the parent baseline"
        )
    paired = pair(base, current)
    comparison = judge(base, current, paired, policy)
    task_drift = tuple(_task_drift(t.name, paired.pairs[t.name]) for t in paired.tasks)
    cause = drift_cause(base.manifest, current.manifest)
    units = _unit_tests(comparison, cause, policy)
    verdict, reason = _verdict(cause, task_drift, units, policy.alpha)
    warnings = list(comparison.warnings)
    age = now - datetime.fromisoformat(base.manifest.created)
    if age > max_age:
        warnings.append(
            f"baseline {base.manifest.name!r} is {age.days} days old (max {max_age.days}): "
            "re-pin it with `regress baseline create`"
        )
    return DriftReport(
        baseline=base.manifest.name,
        model_sha256=base.manifest.model.sha256,
        verdict=verdict,
        cause=cause,
        exit_code=ExitCode.REGRESSION if verdict is DriftVerdict.DRIFT else ExitCode.OK,
        tasks=task_drift,
        units=units,
        changes=tuple(environment_changes(base.manifest, current.manifest)),
        reason=reason,
        warnings=tuple(warnings),
    )


def _verdict(
    cause: Cause, tasks: tuple[TaskDrift, ...], units: tuple[UnitDrift, ...], alpha: float
) -> tuple[DriftVerdict, str]:
    flips = sum(t.flips for t in tasks)
    n = sum(t.n for t in tasks)
    outcomes = sum(u.b + u.c for u in units)
    moved = f"{flips} of {n} answers changed ({outcomes} right/wrong outcomes in gated units)"
    if cause is Cause.MODEL:
        return DriftVerdict.DRIFT, f"the pinned model file changed; {moved}"
    if cause is Cause.NOTHING:
        if flips:
            return DriftVerdict.DRIFT, f"nothing recorded changed, yet {moved}"
        if any(t.max_abs_logprob_delta > 0 for t in tasks):
            return DriftVerdict.LOGPROB_DRIFT, "no answer changed, but log-probs moved"
        return DriftVerdict.STABLE, "identical answers and log-probs"
    beyond = [u.name for u in units if min(u.p_flips, u.p_shift) < alpha]
    floor = NOISE_FLOORS[cause]
    if beyond:
        return DriftVerdict.DRIFT, (
            f"{cause} changed and {moved}: beyond its measured noise in {', '.join(beyond)}"
        )
    return DriftVerdict.STABLE, (
        f"{cause} changed; {moved}, within its measured noise (up to {floor.flips:.1%} of "
        "answers, no significant accuracy shift)"
    )
